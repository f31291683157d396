import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults

extension GroupDefaultsCommand {
    struct Backup: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a suite to a file: consistent and compacted, safe while other processes write.",
            discussion: "Example: groupdefaults backup group.com.example.chat /var/backups/chat.lmdb"
        )

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
            discussion: "Refuses a source that does not verify. Example: groupdefaults restore group.com.example.chat /var/backups/chat.lmdb"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The backup to restore (a .lmdb file).") var source: String

        func run() throws {
            try perform {
                // Check the source before the target exists: a refused restore creates nothing.
                let sourceURL = URL(fileURLWithPath: source)
                guard FileManager.default.fileExists(atPath: sourceURL.path) else {
                    throw CommandFailure("cannot restore from \(source): no such file")
                }
                let report = SharedDefaults.verify(fileAt: sourceURL)
                guard report.isHealthy else {
                    let problem =
                        report.structureProblem
                        ?? "damaged keys: " + report.damagedKeys.map(\.key).joined(separator: ", ")
                    throw CommandFailure("cannot restore from \(source): it does not verify (\(problem)); nothing was changed")
                }
                try options.writing(suite) { try $0.restore(from: sourceURL) }
            }
        }
    }
}
