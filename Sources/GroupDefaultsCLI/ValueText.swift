import Foundation
import GroupDefaults
import PropertyListFormats

/// How the tool prints values, as `defaults` does.
enum ValueText {
    /// A single value as `defaults read SUITE KEY` prints it: a string as it is, a number as a
    /// number, a boolean as 1 or 0, anything else as old-style property-list text.
    static func single(_ value: PropertyListValue) -> String {
        value.openStepText
    }

    /// A value on one line (for `watch`).
    static func oneLine(_ value: PropertyListValue) -> String {
        single(value).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
    }
}
