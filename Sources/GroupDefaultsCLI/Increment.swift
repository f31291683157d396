import ArgumentParser
import CommandLineSupport
import GroupDefaults

extension GroupDefaultsCommand {
    struct Increment: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add to an integer, atomically across processes, and print the result.",
            usage: "groupdefaults increment [--directory <DIR>] <suite> <key> [<by>]",
            discussion: "A missing key counts as 0. Example: groupdefaults increment group.com.example.chat unread 2"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The key.") var key: String
        // Captured raw, so that a negative amount is not taken for an option (ArgumentParser takes
        // `-3` for one otherwise): an array, of which `validate` allows one, so the usage is given
        // (ArgumentParser's would show `[<by> ...]`).
        @Argument(parsing: .allUnrecognized, help: ArgumentHelp("How much to add (default 1; may be negative).", valueName: "by"))
        var amount: [String] = []

        /// What to add: the one number given, or 1.
        private var by: Int? {
            guard amount.count <= 1 else { return nil }
            guard let text = amount.first else { return 1 }
            return Int(text)
        }

        func validate() throws {
            guard by != nil else {
                throw CommandFailure("increment takes one whole number to add, not '\(amount.joined(separator: " "))'")
            }
        }

        func run() throws {
            try perform {
                guard let by else { return }
                var new: PropertyListValue?
                try options.writing(suite, checking: [key: nil]) { defaults in
                    new = try defaults.update(key) { old in
                        guard let old else { return .integer(by) }
                        guard case .integer(let value) = old else {
                            throw CommandFailure("the value of \(key) is a \(old.typeName), not an integer")
                        }
                        let (sum, overflow) = value.addingReportingOverflow(by)
                        guard !overflow else { throw CommandFailure("\(value) + \(by) does not fit in a 64-bit integer") }
                        return .integer(sum)
                    }
                }
                output(new.map(ValueText.single) ?? "")
            }
        }
    }
}
