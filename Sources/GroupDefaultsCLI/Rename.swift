import ArgumentParser
import CommandLineSupport
import GroupDefaults

extension GroupDefaultsCommand {
    struct Rename: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rename a key, atomically.",
            discussion: "Example: groupdefaults rename group.com.example.chat sound ringtone"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The key to rename.") var old: String
        @Argument(help: "Its new name.") var new: String

        func run() throws {
            try perform {
                do {
                    try options.open(suite).rename(old, to: new)
                } catch let error as SharedDefaultsError where error.code == .keyNotFound {
                    throw CommandFailure.missingKey(suite, old)
                }
            }
        }
    }
}
