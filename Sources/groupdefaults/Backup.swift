import ArgumentParser
import Foundation
import GroupDefaults

extension GroupDefaultsCommand {
    struct Backup: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a suite to a file: consistent and compacted, safe while other processes write.",
            discussion: "Example: groupdefaults backup group.com.example.chat /var/backups/chat.lmdb")

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The backup's path (a .lmdb file that does not exist yet).") var destination: String

        func run() throws {
            try perform {
                try options.open(suite).backup(to: URL(fileURLWithPath: destination))
            }
        }
    }

    struct Restore: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace a suite's contents with a backup's, atomically.",
            discussion: "Refuses a source that does not verify. Example: groupdefaults restore group.com.example.chat /var/backups/chat.lmdb")

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The backup to restore (a .lmdb file).") var source: String

        func run() throws {
            try perform {
                try options.openOrCreate(suite).restore(from: URL(fileURLWithPath: source))
            }
        }
    }
}
