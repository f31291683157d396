import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire
import PropertyListFormats

extension GroupDefaultsCommand {
    struct Find: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Search the keys and values of every suite for a word.",
            discussion: "Example: groupdefaults find ring"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The word to look for (case-insensitive).") var word: String

        func run() throws {
            try perform {
                var found = false
                for name in try SharedDefaults.suiteNames(in: options.directoryURL) {
                    let matches = try contents(of: options.open(name)).filter { key, value in
                        key.localizedCaseInsensitiveContains(word) || Self.contains(value, word)
                    }
                    guard !matches.isEmpty else { continue }
                    found = true
                    output("Found \(matches.count) keys in domain '\(printable(name))': \(PropertyListValue.openStepText(entries: matches))")
                }
                if !found { output("No domain, key, nor value containing '\(word)'") }
            }
        }

        static func contains(_ value: PropertyListValue, _ word: String) -> Bool {
            switch value {
            case .array(let elements): elements.contains { contains($0, word) }
            case .dictionary(let elements):
                elements.contains { $0.key.localizedCaseInsensitiveContains(word) || contains($0.value, word) }
            default: ValueText.single(value).localizedCaseInsensitiveContains(word)
            }
        }
    }
}
