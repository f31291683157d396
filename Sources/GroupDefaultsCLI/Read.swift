import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire
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
                    var all: [(name: String, entries: [(key: String, value: PropertyListValue)])] = []
                    for name in try SharedDefaults.suiteNames(in: options.directoryURL) {
                        all.append((name, try contents(of: options.open(name))))
                    }
                    output(json ? PropertyListValue.plainJSON(domains: all) : PropertyListValue.openStepText(domains: all))
                    return
                }
                let defaults = try options.open(suite)
                Self.noteManaged(defaults, key: key)
                if let key {
                    guard let value = try defaults.read({ try $0.value(forKey: key) }) else {
                        throw CommandFailure.missingKey(suite, key)
                    }
                    // A string prints as it is, as macOS `defaults` prints it, for a script; on a terminal its
                    // control characters are escaped, so that a synced value cannot move the cursor or retitle it.
                    let text = json ? value.plainJSON() : ValueText.single(value)
                    output(isatty(STDOUT_FILENO) == 1 ? printable(text) : text)
                } else {
                    let entries = try contents(of: defaults)
                    output(json ? PropertyListValue.plainJSON(entries: entries) : PropertyListValue.openStepText(entries: entries))
                }
            }
        }
    }
}

extension GroupDefaultsCommand.Read {
    /// One line on stderr for each managed or pinned key read (`key`, or every one): what programs
    /// read, or who changes it.
    static func noteManaged(_ defaults: SharedDefaults, key: String?) {
        for pinned in defaults.pinnedKeys where key.map({ pinned.isSameName(as: $0) }) ?? true {
            groupdefaults.printError("note: \(printable(pinned)) is pinned by the suite's owner: only the owner's devices change it")
        }
        for setting in defaults.managedSettings.settings where key.map({ setting.key.isSameName(as: $0) }) ?? true {
            groupdefaults.printError(
                "note: \(printable(setting.key)) is managed by \(setting.file): programs read \(ValueText.oneLine(setting.value))"
            )
        }
    }
}

/// Every stored key and value of a suite, in key order. Never a `[String: PropertyListValue]`:
/// keys are their bytes, and a Swift dictionary would keep one of `"caf\u{E9}"` and `"cafe\u{301}"`.
func contents(of defaults: SharedDefaults) throws -> [(key: String, value: PropertyListValue)] {
    try defaults.storedValues()
}
