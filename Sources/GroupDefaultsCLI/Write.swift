import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire
import PropertyListFormats

extension GroupDefaultsCommand {
    struct Write: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a value, or replace a whole suite.",
            discussion: """
                  write SUITE KEY VALUE          a string
                  write SUITE KEY -TYPE VALUE    -string, -int[eger], -float, -bool[ean],
                                                 -date, -data HEX
                  write SUITE KEY -array V...    also -array-add V..., -dict K V...,
                                                 -dict-add K V...; elements are strings
                                                 unless a type flag precedes them
                  write SUITE KEY --json VALUE   typed JSON ({"integer":3}) or plain JSON
                  write SUITE 'PLIST'            replace the whole suite, all or nothing

                Booleans: true, false, yes, no, 1, 0. Dates: 2026-11-21 10:00:00 +0000,
                2026-11-21, or ISO 8601 (2026-11-21T10:00:00.123456Z): to the microsecond,
                years 0000 to 9999, Gregorian before 1582 too. Options go before SUITE; --
                ends them (write -- SUITE KEY VALUE, for a suite whose name starts with -).

                Example: groupdefaults write group.com.example.chat volume -float 0.8
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(parsing: .captureForPassthrough, help: "SUITE KEY [-TYPE] VALUE…, or SUITE PLIST.")
        var arguments: [String] = []

        func run() throws {
            // The arguments are captured raw (for the single-dash type flags), help included.
            if arguments == ["help"] || arguments.first == "--help" || arguments.first == "-h" {
                throw CleanExit.helpRequest(self)
            }
            try perform {
                // `--` ends the options, as everywhere (a suite may then start with '-'); before it,
                // a word like an option where the suite goes is a typo.
                let arguments: [String]
                if self.arguments.first == "--" {
                    arguments = Array(self.arguments.dropFirst())
                } else {
                    arguments = self.arguments
                    if let first = arguments.first { try SuiteOptions.checkNotAnOption(first) }
                }
                guard arguments.count >= 2 else {
                    throw CommandFailure("write needs a suite and a key and value, or a suite and a property list; see `groupdefaults write --help`")
                }
                let suite = arguments[0]
                if arguments.count == 2 {
                    // A whole suite is a property list, `{ … }` (an array `( … )` or XML is refused below);
                    // a word is a key whose value was forgotten.
                    guard let start = arguments[1].trimmingCharacters(in: .whitespacesAndNewlines).first, "{(<".contains(start) else {
                        throw CommandFailure(
                            "no value for the key \(arguments[1]): `groupdefaults write \(shellWord(suite)) KEY VALUE` writes a key, `groupdefaults write \(shellWord(suite)) '{ key = value; }'` replaces the whole suite"
                        )
                    }
                    // A suite's keys are their bytes: "caf\u{E9}" and "cafe\u{301}" are two.
                    let decoded = try PropertyListValue.decodeSuite(propertyListData: Data(arguments[1].utf8))
                    guard case .entries(let entries) = decoded else {
                        throw CommandFailure("a property list that replaces a suite must be a dictionary: { key = value; }")
                    }
                    try options.writing(suite, checking: entries.map { (key: $0.key, value: Optional($0.value)) }) {
                        try $0.replaceAll(with: entries)
                    }
                    return
                }
                // Everything is read before the suite is opened: a value refused creates nothing.
                let key = arguments[1]
                try TypeFlags.checkNotAFlag(key, suite: suite)
                var words = Array(arguments.dropFirst(2))[...]
                switch words.first {
                case "-array-add":
                    words.removeFirst()
                    let added = try TypeFlags.values(&words)
                    try options.writing(suite, checking: [key: .array(added)]) { defaults in
                        try defaults.update(key) { old in
                            guard let old else { return .array(added) }
                            guard case .array(let existing) = old else {
                                throw CommandFailure("-array-add: the value of \(key) is a \(old.typeName), not an array")
                            }
                            return .array(existing + added)
                        }
                    }
                case "-dict-add":
                    words.removeFirst()
                    let added = try TypeFlags.pairs(&words)
                    try options.writing(suite, checking: [key: .dictionary(added)]) { defaults in
                        try defaults.update(key) { old in
                            guard let old else { return .dictionary(added) }
                            guard case .dictionary(let existing) = old else {
                                throw CommandFailure("-dict-add: the value of \(key) is a \(old.typeName), not a dictionary")
                            }
                            try TypeFlags.checkNoEquivalentKeys(added.keys, existing.keys)
                            return .dictionary(existing.merging(added) { _, new in new })
                        }
                    }
                default:
                    let value = try TypeFlags.value(&words, allowContainers: true)
                    guard words.isEmpty else {
                        throw CommandFailure("unexpected '\(words.first!)' after the value; quote a value that has spaces")
                    }
                    try options.writing(suite, checking: [key: value]) { defaults in try defaults.write { try $0.set(value, forKey: key) } }
                }
            }
        }
    }
}

/// The type flags of `defaults write`, parsed from the words after the key.
enum TypeFlags {
    /// Every flag `value` knows, for the suggestion after a typo.
    static let knownFlags = [
        "-string", "-int", "-integer", "-float", "-double", "-bool", "-boolean", "-date", "-data", "--json",
        "-array", "-dict", "-array-add", "-dict-add",
    ]

    /// Refuses a key that is a type flag, or a near miss of one (`write SUITE -int 3`, the key
    /// forgotten; `-flaot`): stored, it would be a key named after the flag. A key that merely
    /// starts with '-' is a key.
    static func checkNotAFlag(_ key: String, suite: String) throws {
        let flag = knownFlags.contains(key) ? key : Spelling.nearest(to: key, among: knownFlags)
        guard key.hasPrefix("-"), let flag else { return }
        let meant = flag == key ? "" : " (did you mean '\(flag)'?)"
        throw CommandFailure(
            "'\(key)' stands where the key goes: a type flag\(meant) follows the key (`groupdefaults write \(suite) KEY \(flag) VALUE`)"
        )
    }

    /// One value: a type flag and its argument(s), or a bare string.
    static func value(_ words: inout ArraySlice<String>, allowContainers: Bool) throws -> PropertyListValue {
        guard let word = words.popFirst() else { throw CommandFailure("a value is missing") }
        func argument() throws -> String {
            guard let next = words.popFirst() else { throw CommandFailure("\(word) needs a value") }
            return next
        }
        switch word {
        case "-string": return .string(try argument())
        case "-int", "-integer":
            let text = try argument()
            guard let int = Int(text) else { throw CommandFailure("\(word) needs a whole number, not '\(text)'") }
            return .integer(int)
        case "-float", "-double":
            let text = try argument()
            guard let double = Double(text) else { throw CommandFailure("\(word) needs a number, not '\(text)'") }
            return .double(double)
        case "-bool", "-boolean":
            let text = try argument()
            switch text.lowercased() {
            case "true", "yes", "1": return .bool(true)
            case "false", "no", "0": return .bool(false)
            default: throw CommandFailure("\(word) needs true, false, yes, no, 1 or 0, not '\(text)'")
            }
        case "-date":
            let text = try argument()
            guard let date = DateText.parse(text) else {
                throw CommandFailure(
                    "-date needs a date of years 0000 to 9999 like '2026-11-21 10:00:00 +0000', '2026-11-21' or "
                        + "'2026-11-21T10:00:00.123456Z', not '\(text)'"
                )
            }
            return .date(date)
        case "-data":
            let text = try argument()
            guard let data = hexData(text) else {
                throw CommandFailure("-data needs hexadecimal digits in pairs, like 0a1b2c, not '\(text)'")
            }
            return .data(data)
        case "--json", "-json":
            let text = try argument()
            do {
                return try PropertyListValue.parseJSON(text)
            } catch {
                throw CommandFailure("--json: \(error)")
            }
        case "-array" where allowContainers:
            return .array(try values(&words))
        case "-dict" where allowContainers:
            return .dictionary(try pairs(&words))
        case "-array", "-dict", "-array-add", "-dict-add":
            throw CommandFailure("\(word) cannot be nested here")
        default:
            if word.hasPrefix("-") && word.count > 1 && Double(word) == nil {
                let meant = Spelling.nearest(to: word, among: knownFlags).map { ": did you mean '\($0)'?" } ?? ""
                throw CommandFailure(
                    "unknown type flag '\(word)'\(meant) (see `groupdefaults write --help`; -string stores a string that starts with '-')"
                )
            }
            return .string(word)
        }
    }

    /// Values up to the end of the words.
    static func values(_ words: inout ArraySlice<String>) throws -> [PropertyListValue] {
        var values: [PropertyListValue] = []
        while !words.isEmpty { values.append(try value(&words, allowContainers: false)) }
        return values
    }

    /// Key-value pairs up to the end of the words (of a key given twice, the last value).
    static func pairs(_ words: inout ArraySlice<String>) throws -> [String: PropertyListValue] {
        var pairs: [String: PropertyListValue] = [:]
        while let key = words.popFirst() {
            guard !words.isEmpty else { throw CommandFailure("-dict: the key '\(key)' has no value") }
            try checkNoEquivalentKeys([key], pairs.keys)
            pairs[key] = try value(&words, allowContainers: false)
        }
        return pairs
    }

    /// Refuses a key of `added` that is canonically equivalent to one of `existing` without being
    /// the same bytes (`"caf\u{E9}"`, `"cafe\u{301}"`): a dictionary inside a value is keyed by
    /// Swift strings and would keep one of them, silently.
    static func checkNoEquivalentKeys(_ added: some Sequence<String>, _ existing: some Collection<String>) throws {
        for key in added {
            guard let index = existing.firstIndex(of: key), case let other = existing[index], !other.isSameName(as: key) else { continue }
            throw CommandFailure(
                "the keys \"\(other)\" and \"\(key)\" differ in their bytes but are one key to a dictionary inside a value "
                    + "(canonically equivalent); a suite's own keys can differ so, a nested dictionary's cannot"
            )
        }
    }

    static func hexData(_ text: String) -> Data? {
        let digits = Array(text.utf8.filter { $0 != UInt8(ascii: " ") })
        guard digits.count % 2 == 0 else { return nil }
        var data = Data(capacity: digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = hexDigit(digits[index]), let low = hexDigit(digits[index + 1]) else { return nil }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }

    private static func hexDigit(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Dates as `defaults` prints and reads them, and ISO 8601, read by `TypedJSONDate`: to the
/// microsecond, years 0000 to 9999 of the proleptic Gregorian calendar (as ISO 8601, the formats'
/// writers and Python count them). Not Foundation's formatters: they keep milliseconds, and count
/// dates before 1582-10-15 in the Julian calendar (1582-10-14 read as 1582-10-24).
enum DateText {
    /// `2026-11-21 10:00:00 +0000` (any offset, `±HHMM` or `±HH:MM`; none is UTC; a fraction may
    /// follow the seconds), `2026-11-21` (midnight UTC), or ISO 8601 with a zone
    /// (`2026-11-21T10:00:00.123456Z`, `2026-11-21T12:00:00+02:00`).
    static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        let iso: String
        switch parts.count {
        case 1 where text.utf8.count == 10: iso = text + "T00:00:00Z"
        case 1: iso = text
        case 2: iso = parts[0] + "T" + parts[1] + "Z"
        case 3: iso = parts[0] + "T" + parts[1] + parts[2]
        default: return nil
        }
        return TypedJSONDate.parse(withColonInOffset(iso))
    }

    /// `…+0200` as `…+02:00`; anything else as it is.
    private static func withColonInOffset(_ text: String) -> String {
        let b = Array(text.utf8)
        guard b.count >= 19 + 5, case let sign = b[b.count - 5], sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-"),
            b[(b.count - 4)...].allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return text }
        return String(decoding: b[..<(b.count - 2)] + Array(":".utf8) + b[(b.count - 2)...], as: UTF8.self)
    }
}
