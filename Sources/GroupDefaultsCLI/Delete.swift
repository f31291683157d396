import ArgumentParser
import CommandLineSupport
import GroupDefaults

extension GroupDefaultsCommand {
    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete a key, or every key of a suite.",
            discussion: """
                Deleting a whole suite removes all of its keys in one transaction (observers see one \
                `cleared` change); the suite's files stay, because other processes may have them open.

                Example: groupdefaults delete group.com.example.chat draft
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The key to delete; all keys when omitted.") var key: String?

        func run() throws {
            try perform {
                let defaults = try options.open(suite)
                try defaults.write { tx in
                    guard let key else { return try tx.removeAll() }
                    guard try tx.value(forKey: key) != nil else {
                        throw CommandFailure.missingKey(suite, key)
                    }
                    try tx.removeValue(forKey: key)
                }
            }
        }
    }
}
