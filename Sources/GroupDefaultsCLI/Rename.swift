import ArgumentParser
import CommandLineSupport
import GroupDefaults

extension GroupDefaultsCommand {
    struct Rename: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rename a key, atomically.",
            discussion: """
                A key that already holds a value is refused, and nothing changes; --force replaces \
                its value (the old one is gone).

                Example: groupdefaults rename group.com.example.chat sound ringtone
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The key to rename.") var old: String
        @Argument(help: "Its new name.") var new: String
        @Flag(help: "Replace the value the new name holds, if any.") var force = false

        func run() throws {
            try perform {
                do {
                    try options.open(suite).rename(old, to: new, replacing: force)
                } catch let error as SharedDefaultsError where error.code == .keyNotFound {
                    throw CommandFailure.missingKey(suite, old)
                } catch let error as SharedDefaultsError where error.code == .keyExists {
                    throw CommandFailure(
                        "\(new) already holds a value in \(suite): nothing was renamed (`groupdefaults rename --force \(shellWord(suite)) \(shellWord(old)) \(shellWord(new))` replaces it)"
                    )
                }
            }
        }
    }
}
