import ArgumentParser
import CommandLineSupport
import GroupDefaults
import GroupDefaultsWire

extension GroupDefaultsCommand {
    struct Domains: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the suites.",
            discussion:
                "Prints the suite names on one line, separated by commas, as `defaults domains` does.\n\nExample: groupdefaults domains --list"
        )

        @OptionGroup var options: SuiteOptions
        @Flag(name: .long, help: "One suite name per line.") var list = false

        func run() throws {
            try perform {
                let names = try SharedDefaults.suiteNames(in: options.directoryURL)
                if list {
                    for name in names { output(printable(name)) }
                } else {
                    output(names.map(printable).joined(separator: ", "))
                }
            }
        }
    }
}
