import Foundation
import GroupDefaults
import GroupDefaultsWire
import PropertyListFormats

/// How the tool prints values, as `defaults` does.
enum ValueText {
    /// A single value as `defaults read SUITE KEY` prints it: a string as it is, a number as a
    /// number, a boolean as 1 or 0, anything else as old-style property-list text.
    static func single(_ value: PropertyListValue) -> String {
        value.openStepText
    }

    /// A value on one line (for `watch`): a string through `printable` (its line breaks, tabs and
    /// escape sequences shown escaped, so that it cannot print as another change), anything else
    /// as its property-list text (which escapes them) with its lines joined.
    static func oneLine(_ value: PropertyListValue) -> String {
        if case .string(let string) = value { return printable(string) }
        return printable(single(value).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " "))
    }
}
