import Foundation
import GroupDefaultsWire

/// Old-style (OpenStep) property-list text: written as macOS `defaults read` prints a domain, and
/// read as `defaults write DOMAIN 'PLIST'` and `defaults import` accept it.
///
/// The grammar read here: a value is a string (`"quoted"` or `'quoted'` with C escapes, `\Uxxxx`
/// and octal `\ooo`; or bare: letters, digits and `_$:./-`), a dictionary `{ key = value; … }`
/// (the last `;` may be left out), an array `( a, b, )`, or data `<0102 0a>`. `//` and `/* */`
/// comments and white space may come between tokens. A whole text may also be a dictionary
/// without its braces (`key = value; …`, the form of a `.strings` file). Old-style text has no
/// numbers, booleans or dates: they read back as strings, exactly as with `defaults`. The data
/// description `defaults read` prints for 24 bytes or fewer, `{length = 3, bytes = 0x010203}`, is
/// read back as data too.
enum OpenStepPropertyList {
    // MARK: Writing

    /// The text for `value`.
    ///
    /// For display (`openStepText`), exactly what `defaults read` prints: a top-level string,
    /// number or date bare, as `defaults read SUITE KEY` shows it, and data as Foundation
    /// describes it, abbreviated beyond 24 bytes. Otherwise (the `.openStep` format, meant to be
    /// read back) the same layout with every value quoted as needed and data as `<0102…>`.
    static func text(_ value: PropertyListValue, forDisplay: Bool) -> String {
        if forDisplay {
            switch value {
            case .string(let string): return string
            case .integer(let int): return String(int)
            case .double(let double): return numberText(double)
            case .date(let date): return dateText(date)
            case .bool, .data, .array, .dictionary: break
            }
        }
        var out = ""
        write(value, level: 0, forDisplay: forDisplay, into: &out)
        return out
    }

    /// The text for several suites (sorted, their entries sorted), as a dictionary of dictionaries.
    static func text(domains: [(key: String, entries: [(key: String, value: PropertyListValue)])]) -> String {
        var out = "{\n"
        for (name, entries) in domains {
            out += indentation(1) + quotedIfNeeded(name) + " = "
            write(entries: entries, level: 1, forDisplay: true, into: &out)
            out += ";\n"
        }
        return out + "}"
    }

    /// The text for a suite's entries (sorted), as a dictionary.
    static func text(entries: [(key: String, value: PropertyListValue)], forDisplay: Bool) -> String {
        var out = ""
        write(entries: entries, level: 0, forDisplay: forDisplay, into: &out)
        return out
    }

    private static func indentation(_ level: Int) -> String {
        String(repeating: " ", count: level * 4)
    }

    /// Writes `value` found at nesting `level`. A container starts with its own level's
    /// indentation even after `key = ` or an array's element indentation; that is how
    /// Foundation's description, and so `defaults read`, lays out nested containers.
    private static func write(_ value: PropertyListValue, level: Int, forDisplay: Bool, into out: inout String) {
        switch value {
        case .string(let string):
            out += quotedIfNeeded(string)
        case .integer(let int):
            out += quotedIfNeeded(String(int))
        case .double(let double):
            out += quotedIfNeeded(numberText(double))
        case .bool(let bool):
            out += bool ? "1" : "0"
        case .date(let date):
            out += "\"" + dateText(date) + "\""
        case .data(let data):
            out += forDisplay ? dataDescription(data) : dataText(data)
        case .array(let elements):
            out += indentation(level) + "(\n"
            for (index, element) in elements.enumerated() {
                out += indentation(level + 1)
                write(element, level: level + 1, forDisplay: forDisplay, into: &out)
                out += index == elements.count - 1 ? "\n" : ",\n"
            }
            out += indentation(level) + ")"
        case .dictionary(let dictionary):
            write(entries: dictionary.sortedForPropertyList, level: level, forDisplay: forDisplay, into: &out)
        }
    }

    /// A dictionary of `entries` (sorted) found at nesting `level`.
    private static func write(entries: [(key: String, value: PropertyListValue)], level: Int, forDisplay: Bool, into out: inout String) {
        out += indentation(level) + "{\n"
        for (key, element) in entries {
            out += indentation(level + 1) + quotedIfNeeded(key) + " = "
            write(element, level: level + 1, forDisplay: forDisplay, into: &out)
            out += ";\n"
        }
        out += indentation(level) + "}"
    }

    /// A double as `NSNumber` describes it: the shortest form that reads back, without a `.0`
    /// on whole numbers (`0.8`, `1`, `1e+300`, `nan`, `inf`).
    private static func numberText(_ double: Double) -> String {
        if double.isNaN { return "nan" }
        if double.isInfinite { return double > 0 ? "inf" : "-inf" }
        let text = "\(double)"
        return text.hasSuffix(".0") ? String(text.dropLast(2)) : text
    }

    /// `2026-11-21 10:00:00 +0000`, rounded down to the second.
    private static func dateText(_ date: Date) -> String {
        guard let iso = TypedJSONDate.formatWholeSeconds(date) else { return "\(date)" }
        // iso is YYYY-MM-DDTHH:MM:SSZ
        return iso.prefix(10) + " " + iso.dropFirst(11).prefix(8) + " +0000"
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// `{length = 3, bytes = 0x010203}`; beyond 24 bytes the first 16 and the last 8 bytes in
    /// groups of four, `{length = 100, bytes = 0x00010203 04050607 08090a0b 0c0d0e0f ... 5c5d5e5f 60616263 }`.
    private static func dataDescription(_ data: Data) -> String {
        var out = Array("{length = \(data.count), bytes = 0x".utf8)
        func hex(_ bytes: some Collection<UInt8>, grouped: Bool) {
            for (index, byte) in bytes.enumerated() {
                out.append(hexDigits[Int(byte >> 4)])
                out.append(hexDigits[Int(byte & 0x0F)])
                if grouped, index % 4 == 3 { out.append(UInt8(ascii: " ")) }
            }
        }
        if data.count <= 24 {
            hex(data, grouped: false)
        } else {
            hex(data.prefix(16), grouped: true)
            out += "... ".utf8
            hex(data.suffix(8), grouped: true)
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// `<01020304 0506>`: old-style data syntax, four bytes to a group.
    private static func dataText(_ data: Data) -> String {
        var out: [UInt8] = [UInt8(ascii: "<")]
        out.reserveCapacity(data.count * 9 / 4 + 2)
        for (index, byte) in data.enumerated() {
            if index > 0, index % 4 == 0 { out.append(UInt8(ascii: " ")) }
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0F)])
        }
        out.append(UInt8(ascii: ">"))
        return String(decoding: out, as: UTF8.self)
    }

    /// Bare when non-empty and only ASCII letters and digits (as `defaults read` prints it), else
    /// in double quotes with C escapes and `\Uxxxx` for each UTF-16 unit beyond ASCII.
    static func quotedIfNeeded(_ string: String) -> String {
        let isBare =
            !string.isEmpty
            && string.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
                default: false
                }
            }
        if isBare { return string }
        var out = "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case "\u{07}": out += "\\a"
            case "\u{08}": out += "\\b"
            case "\u{0B}": out += "\\v"
            case "\u{0C}": out += "\\f"
            case _ where scalar.value < 0x20 || scalar.value >= 0x7F:
                for unit in String(scalar).utf16 {
                    out += "\\U" + TextScanning.zeroPadded(String(unit, radix: 16), width: 4)
                }
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    // MARK: Reading

    static func parse(_ bytes: [UInt8], keepingTopLevelEntries: Bool = false) throws -> PropertyListTopLevel {
        var parser = OpenStepParser(bytes, keepingTopLevelEntries: keepingTopLevelEntries)
        let value = try parser.document()
        return parser.topLevelEntries.map { .entries($0) } ?? .value(value)
    }
}

/// A recursive-descent reader for old-style text (see `OpenStepPropertyList`), over UTF-8 bytes.
private struct OpenStepParser {
    private let bytes: [UInt8]
    private var i = 0
    /// Whether a top-level dictionary is read as a suite's entries (`topLevelEntries`), whose keys
    /// may be canonically equivalent.
    private let keepingTopLevelEntries: Bool
    private(set) var topLevelEntries: [(key: String, value: PropertyListValue)]?

    init(_ bytes: [UInt8], keepingTopLevelEntries: Bool) {
        self.bytes = bytes
        self.keepingTopLevelEntries = keepingTopLevelEntries
    }

    mutating func document() throws -> PropertyListValue {
        try skipTrivia()
        guard i < bytes.count else { throw failure("the text holds no value", at: i) }
        let start = i
        let value = try self.value(depth: 0)
        try skipTrivia()
        if i < bytes.count, bytes[i] == UInt8(ascii: "="), case .string = value {
            // A dictionary without its braces: `key = value; …`.
            i = start
            topLevelEntries = nil
            return try dictionary(try entries(closing: nil, openedAt: start, depth: 0), openedAt: start, depth: 0)
        }
        guard i == bytes.count else {
            throw failure("unexpected \(TextScanning.describe(bytes, i)) after the value", at: i)
        }
        return value
    }

    private func failure(_ message: String, at offset: Int) -> PropertyListFormatError {
        PropertyListFormatError("old-style property list: \(message) at \(TextScanning.location(bytes, offset))")
    }

    private func found() -> String {
        TextScanning.describe(bytes, i)
    }

    private static func isBare(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "_"), UInt8(ascii: "$"), UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "/"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }

    private func isQuote(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'")
    }

    /// Skips white space and comments.
    private mutating func skipTrivia() throws {
        while i < bytes.count {
            let byte = bytes[i]
            if TextScanning.isWhitespace(byte) || byte == 0x0B || byte == 0x0C {
                i += 1
            } else if bytes[i...].starts(with: "//".utf8) {
                while i < bytes.count, bytes[i] != 0x0A { i += 1 }
            } else if bytes[i...].starts(with: "/*".utf8) {
                let start = i
                i += 2
                while i < bytes.count, !bytes[i...].starts(with: "*/".utf8) { i += 1 }
                guard i < bytes.count else { throw failure("unterminated /* comment", at: start) }
                i += 2
            } else {
                return
            }
        }
    }

    private mutating func value(depth: Int) throws -> PropertyListValue {
        try skipTrivia()
        guard depth < PropertyListValue.maximumDecodingDepth else {
            throw failure("values nest deeper than \(PropertyListValue.maximumDecodingDepth) levels", at: i)
        }
        guard i < bytes.count else { throw failure("expected a value, found the end of the text", at: i) }
        let byte = bytes[i]
        switch byte {
        case UInt8(ascii: "{"):
            if let data = try dataDescription() { return .data(data) }
            let start = i
            i += 1
            return try dictionary(try entries(closing: UInt8(ascii: "}"), openedAt: start, depth: depth), openedAt: start, depth: depth)
        case UInt8(ascii: "("):
            return .array(try array(depth: depth))
        case UInt8(ascii: "<"):
            return .data(try data())
        case _ where isQuote(byte) || Self.isBare(byte):
            return .string(try string())
        default:
            throw failure("expected a value, found \(found())", at: i)
        }
    }

    /// A dictionary of `entries`. At the top level of a suite (`keepingTopLevelEntries`) the
    /// entries go to `topLevelEntries`, and the value returned has none; elsewhere two canonically
    /// equivalent keys are refused.
    private mutating func dictionary(_ entries: DictionaryEntries, openedAt: Int, depth: Int) throws -> PropertyListValue {
        if depth == 0, keepingTopLevelEntries {
            topLevelEntries = entries.entries
            return .dictionary([:])
        }
        return .dictionary(try entries.dictionary { failure($0, at: openedAt) })
    }

    /// The entries of a dictionary up to `closing` (or the end of the text when nil), each key
    /// once (compared as bytes).
    private mutating func entries(closing: UInt8?, openedAt: Int, depth: Int) throws -> DictionaryEntries {
        var dictionary = DictionaryEntries()
        func atEnd() -> Bool {
            if let closing { return i < bytes.count && bytes[i] == closing }
            return i == bytes.count
        }
        while true {
            try skipTrivia()
            if atEnd() {
                if closing != nil { i += 1 }
                return dictionary
            }
            guard i < bytes.count else { throw failure("unterminated dictionary: expected '}' for the '{'", at: openedAt) }
            let keyOffset = i
            guard isQuote(bytes[i]) || Self.isBare(bytes[i]) else {
                throw failure("expected a key (a string) or '}', found \(found())", at: i)
            }
            let key = try string()
            try skipTrivia()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "=") else {
                throw failure("expected '=' after the key \"\(key)\", found \(found())", at: i)
            }
            i += 1
            guard dictionary.append(key, try value(depth: depth + 1)) else {
                throw failure("duplicate key \"\(key)\"", at: keyOffset)
            }
            try skipTrivia()
            if i < bytes.count, bytes[i] == UInt8(ascii: ";") {
                i += 1
            } else if !atEnd() {
                if i == bytes.count, closing != nil {
                    throw failure("unterminated dictionary: expected '}' for the '{'", at: openedAt)
                }
                throw failure("expected ';' after the value for the key \"\(key)\", found \(found())", at: i)
            }
        }
    }

    private mutating func array(depth: Int) throws -> [PropertyListValue] {
        let start = i
        i += 1
        var elements: [PropertyListValue] = []
        while true {
            try skipTrivia()
            guard i < bytes.count else { throw failure("unterminated array: expected ')' for the '('", at: start) }
            if bytes[i] == UInt8(ascii: ")") {
                i += 1
                return elements
            }
            elements.append(try value(depth: depth + 1))
            try skipTrivia()
            guard i < bytes.count else { throw failure("unterminated array: expected ')' for the '('", at: start) }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
            } else if bytes[i] != UInt8(ascii: ")") {
                throw failure("expected ',' or ')' after an array element, found \(found())", at: i)
            }
        }
    }

    /// `<0102 0a>`: pairs of hex digits, white space anywhere between them.
    private mutating func data() throws -> Data {
        let start = i
        i += 1
        var data: [UInt8] = []
        var high: UInt8?
        while true {
            guard i < bytes.count else { throw failure("unterminated data: expected '>' for the '<'", at: start) }
            let byte = bytes[i]
            if byte == UInt8(ascii: ">") {
                guard high == nil else { throw failure("data holds an odd number of hex digits", at: start) }
                i += 1
                return Data(data)
            }
            if TextScanning.isWhitespace(byte) {
                i += 1
                continue
            }
            guard let nibble = TextScanning.hexValue(byte) else {
                throw failure("expected a hex digit or '>' in data, found \(found())", at: i)
            }
            if let h = high {
                data.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
            i += 1
        }
    }

    /// `{length = 3, bytes = 0x010203}` (what `defaults read` prints for data) as data, or nil
    /// (nothing consumed) when the braces open a dictionary.
    private mutating func dataDescription() throws -> Data? {
        let start = i
        var j = i + 1
        func skipSpaces() { while j < bytes.count, TextScanning.isWhitespace(bytes[j]) { j += 1 } }
        func take(_ word: String) -> Bool {
            skipSpaces()
            guard bytes[j...].starts(with: word.utf8) else { return false }
            j += word.utf8.count
            return true
        }
        guard take("length"), take("=") else { return nil }
        skipSpaces()
        let digitsStart = j
        while j < bytes.count, bytes[j] >= UInt8(ascii: "0"), bytes[j] <= UInt8(ascii: "9") { j += 1 }
        guard j > digitsStart else { return nil }
        let length = String(decoding: bytes[digitsStart..<j], as: UTF8.self)
        guard take(",") else { return nil }  // `{length = 3; …}` is a dictionary
        guard take("bytes"), take("="), take("0x") else {
            throw failure("malformed data description: expected {length = N, bytes = 0x…}", at: start)
        }
        var data: [UInt8] = []
        var high: UInt8?
        while true {
            guard j < bytes.count else { throw failure("unterminated data description", at: start) }
            let byte = bytes[j]
            if byte == UInt8(ascii: "}") { break }
            if byte == UInt8(ascii: ".") {
                throw failure("abbreviated data (\"...\") cannot be read back; write the bytes as <0102…>", at: j)
            }
            j += 1
            if TextScanning.isWhitespace(byte) { continue }
            guard let nibble = TextScanning.hexValue(byte) else {
                throw failure("expected a hex digit in the data description, found \(TextScanning.describe(bytes, j - 1))", at: j - 1)
            }
            if let h = high {
                data.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        guard high == nil, Int(length) == data.count else {
            throw failure("the data description says length \(length) but holds \(data.count) bytes", at: start)
        }
        i = j + 1
        return Data(data)
    }

    /// A quoted or bare string.
    private mutating func string() throws -> String {
        guard isQuote(bytes[i]) else {
            let start = i
            while i < bytes.count, Self.isBare(bytes[i]) { i += 1 }
            return String(decoding: bytes[start..<i], as: UTF8.self)
        }
        let quote = bytes[i]
        let start = i
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw failure("unterminated string: no closing quote for this one", at: start) }
            let byte = bytes[i]
            if byte == quote {
                i += 1
                return String(decoding: out, as: UTF8.self)
            }
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                i += 1
                continue
            }
            let escapeStart = i
            i += 1
            guard i < bytes.count else { throw failure("unterminated string: no closing quote for this one", at: start) }
            let escape = bytes[i]
            switch escape {
            case UInt8(ascii: "a"): out.append(0x07)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "v"): out.append(0x0B)
            case UInt8(ascii: "U"), UInt8(ascii: "u"):
                i += 1
                TextScanning.append(try unicodeEscape(escapeStart), to: &out)
                continue
            case UInt8(ascii: "0")...UInt8(ascii: "7"):
                var code: UInt32 = 0
                var digits = 0
                while digits < 3, i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "7") {
                    code = code * 8 + UInt32(bytes[i] - UInt8(ascii: "0"))
                    digits += 1
                    i += 1
                }
                TextScanning.append(Unicode.Scalar(UInt8(truncatingIfNeeded: code)), to: &out)
                continue
            case 0x80...:
                continue  // a backslash before a non-ASCII character stands for the character
            default:
                out.append(escape)  // \" \' \\ and any other character stand for themselves
            }
            i += 1
        }
    }

    /// After `\U`: one to four hex digits, a UTF-16 unit; a high surrogate must be followed by
    /// `\U` and its low surrogate.
    private mutating func unicodeEscape(_ escapeStart: Int) throws -> Unicode.Scalar {
        func unit() throws -> UInt16 {
            var value: UInt16 = 0
            var digits = 0
            while digits < 4, i < bytes.count, let digit = TextScanning.hexValue(bytes[i]) {
                value = value << 4 | UInt16(digit)
                digits += 1
                i += 1
            }
            guard digits > 0 else { throw failure("\\U must be followed by hex digits", at: escapeStart) }
            return value
        }
        let first = try unit()
        if UTF16.isLeadSurrogate(first) {
            guard bytes[i...].starts(with: "\\U".utf8) || bytes[i...].starts(with: "\\u".utf8) else {
                throw failure("unpaired surrogate \\U\(String(first, radix: 16))", at: escapeStart)
            }
            i += 2
            let second = try unit()
            guard UTF16.isTrailSurrogate(second) else {
                throw failure("unpaired surrogate \\U\(String(first, radix: 16))", at: escapeStart)
            }
            return Unicode.Scalar(0x10000 + (UInt32(first - 0xD800) << 10) + UInt32(second - 0xDC00))!
        }
        guard let scalar = Unicode.Scalar(first) else {
            throw failure("unpaired surrogate \\U\(String(first, radix: 16))", at: escapeStart)
        }
        return scalar
    }
}
