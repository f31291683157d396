import ArgumentParser
import CommandLineSupport
import GroupDefaults

extension GroupDefaultsCommand {
    struct ReadType: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "read-type",
            abstract: "Print the type of a value.",
            discussion: "Example: groupdefaults read-type group.com.example.chat volume   →   Type is float"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The key.") var key: String

        func run() throws {
            try perform {
                let defaults = try options.open(suite)
                guard let value = try defaults.read({ try $0.value(forKey: key) }) else {
                    throw CommandFailure.missingKey(suite, key)
                }
                output("Type is \(value.typeName)")
            }
        }
    }
}
