import Foundation
import GroupDefaultsWire
internal import PropertyListFormats

/// The argument domain: the `-key value` pairs of a command line, read first for this process
/// only, as Foundation's `UserDefaults` reads them.
///
/// Foundation's rule, followed word for word: a word that starts with `-` followed by a word that
/// does not is a pair (the key is the first word without its `-`; an empty key is skipped with its
/// value). The value, without surrounding white space, is read as property-list text when it starts
/// with `{`, `[`, `(`, `<` or `"` and parses; otherwise it is the string itself: `-sound bell.caf`
/// is the string `bell.caf`, `-volume 3` the string `3` (which `integer(forKey:)` reads as 3),
/// `-quiet '{ from = 22; to = 7; }'` a dictionary. The program's name (the first word) is looked at
/// too, as Foundation does; a later pair for the same key wins.
enum ArgumentDomain {
    /// The first characters of a value that is read as property-list text.
    private static let propertyListOpenings: Set<Character> = ["{", "[", "(", "<", "\""]

    static func parse(_ arguments: [String]) -> [ExactName: PropertyListValue] {
        var domain: [ExactName: PropertyListValue] = [:]
        var index = 0
        while index < arguments.count - 1 {
            let word = arguments[index]
            let next = arguments[index + 1]
            guard word.hasPrefix("-"), !next.hasPrefix("-") else {
                index += 1
                continue
            }
            let key = String(word.dropFirst())
            if !key.isEmpty { domain[key.exact] = value(of: next) }
            index += 2
        }
        return domain
    }

    /// A value word: property-list text if it looks like one and parses, else the string.
    static func value(of word: String) -> PropertyListValue {
        let trimmed = word.trimmingCharacters(in: .whitespacesAndNewlines)
        if let first = trimmed.first, propertyListOpenings.contains(first),
            let parsed = try? PropertyListValue.decodeText(trimmed)
        {
            return parsed
        }
        return .string(trimmed)
    }
}
