import ArgumentParser
import CommandLineSupport
import GroupDefaults
import PropertyListFormats

extension GroupDefaultsCommand {
    struct Read: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a suite, or one of its values.",
            discussion: """
                Without a key, prints the whole suite as old-style property-list text; with a key, that \
                value alone. Without a suite, prints every suite.

                Example: groupdefaults read group.com.example.chat sound
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String?
        @Argument(help: "The key to print.") var key: String?
        @Flag(name: .long, help: "Print plain JSON instead.") var json = false

        func run() throws {
            try perform {
                guard let suite else {
                    var all: [String: PropertyListValue] = [:]
                    for name in try SharedDefaults.suiteNames(in: options.directoryURL) {
                        all[name] = .dictionary(try contents(of: options.open(name)))
                    }
                    output(json ? PropertyListValue.dictionary(all).plainJSON() : PropertyListValue.dictionary(all).openStepText)
                    return
                }
                let defaults = try options.open(suite)
                if let key {
                    guard let value = try defaults.read({ try $0.value(forKey: key) }) else {
                        throw CommandFailure.missingKey(suite, key)
                    }
                    output(json ? value.plainJSON() : ValueText.single(value))
                } else {
                    let dictionary = PropertyListValue.dictionary(try contents(of: defaults))
                    output(json ? dictionary.plainJSON() : dictionary.openStepText)
                }
            }
        }
    }
}

/// Every stored key and value of a suite.
func contents(of defaults: SharedDefaults) throws -> [String: PropertyListValue] {
    var dictionary: [String: PropertyListValue] = [:]
    for entry in try defaults.storedValues() { dictionary[entry.key] = entry.value }
    return dictionary
}
