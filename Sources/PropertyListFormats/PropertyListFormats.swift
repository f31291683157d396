public import Foundation
public import GroupDefaultsWire

/// The on-disk forms a whole suite or a value can take.
///
/// ```swift
/// let data = try value.propertyListData(format: .binary)       // bplist00…
/// let back = try PropertyListValue.decode(propertyListData: data)  // any of the four, detected
/// ```
/// XML, binary and typed JSON are written and read by this library itself (not by Foundation's
/// `PropertyListSerialization`, whose Linux implementation crashes on some damaged binary lists
/// and reads bad base64 in XML as empty data), so they behave the same on every platform.
public enum PropertyListFormat: String, Sendable, CaseIterable {
    /// Apple's XML property list: `<?xml …?><!DOCTYPE plist …><plist version="1.0">…</plist>`.
    /// Dates keep whole seconds (the format's `<date>` has no fraction); strings and keys holding
    /// a character XML 1.0 cannot hold (U+0000–U+0008, U+000B, U+000C, U+000E–U+001F, U+FFFE,
    /// U+FFFF) are refused; everything else survives.
    case xml
    /// Apple's binary property list, `bplist00…`. Lossless.
    case binary
    /// Old-style (OpenStep) text in the layout of macOS `defaults read`, with data written as
    /// `<01020304 05>` so that it reads back whole. Reading it back gives strings, arrays,
    /// dictionaries and data only: old-style text has no numbers, booleans or dates.
    case openStep
    /// The design's typed JSON (`{"integer":3}`, …), pretty-printed with sorted keys. Lossless
    /// but for dates, kept to the microsecond (`2020-11-21T10:00:00.123456Z`), years 0000 to 9999.
    case json
}

/// A property list's top level as `PropertyListValue.decodeSuite(propertyListData:)` reads it.
public enum PropertyListTopLevel: Sendable {
    /// A dictionary: its entries in the order read, every key kept as its bytes.
    case entries([(key: String, value: PropertyListValue)])
    /// A value that is not a dictionary.
    case value(PropertyListValue)
}

/// Why bytes or text could not be read, or a value written, in a property-list format. The
/// description names the format, what is wrong and, for text, the line and column.
public struct PropertyListFormatError: Error, CustomStringConvertible, Sendable {
    public let description: String
    /// When a value was refused because the format asked for cannot hold it: the formats that
    /// can (empty for anything else).
    public let formatsThatHoldIt: [PropertyListFormat]

    init(_ description: String, formatsThatHoldIt: [PropertyListFormat] = []) {
        self.description = description
        self.formatsThatHoldIt = formatsThatHoldIt
    }
}

extension PropertyListValue {
    /// Encodes as `format`: XML or binary property list (Apple's formats: `<?xml …><plist
    /// version="1.0">…`, `bplist00…`), old-style (OpenStep) text as macOS `defaults read` prints
    /// it, or typed JSON (pretty-printed, sorted keys).
    ///
    /// ```swift
    /// let xml = try PropertyListValue.dictionary(["sound": "ring.caf"]).propertyListData(format: .xml)
    /// ```
    /// - Throws: `PropertyListFormatError` when the format cannot carry the value: a date outside
    ///   years 0000–9999 in XML or typed JSON, a string or key holding a character XML 1.0 cannot
    ///   hold in XML (the error names where, the character, and `formatsThatHoldIt`). Binary and
    ///   old-style encoding never fail.
    public func propertyListData(format: PropertyListFormat) throws -> Data {
        switch format {
        case .xml:
            return Data(try XMLPropertyList.encode(self).utf8)
        case .binary:
            return Data(BinaryPropertyList.encode(self))
        case .openStep:
            return Data((OpenStepPropertyList.text(self, forDisplay: false) + "\n").utf8)
        case .json:
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            do {
                var data = try encoder.encode(self)
                data.append(0x0A)
                return data
            } catch let error as EncodingError {
                guard case .invalidValue(_, let context) = error else { throw PropertyListFormatError("typed JSON: \(error)") }
                throw PropertyListFormatError("typed JSON: \(context.debugDescription)")
            }
        }
    }

    /// Decodes data in any of the four formats, detecting which: the `bplist00` magic, `<?xml` or
    /// `<plist` (after optional white space), `{"<tag>":` typed JSON, and otherwise old-style text.
    ///
    /// Text may be UTF-8 (with or without a byte-order mark) or UTF-16 with a byte-order mark.
    /// Values may nest at most 512 levels, as in a suite; deeper nesting is an error, not a crash.
    /// - Throws: `PropertyListFormatError` naming what is wrong (and where, for text).
    public static func decode(propertyListData data: Data) throws -> PropertyListValue {
        switch try decode(propertyListData: data, keepingTopLevelEntries: false) {
        case .value(let value): value
        case .entries(let entries): .dictionary(Dictionary(entries, uniquingKeysWith: { first, _ in first }))  // not reached
        }
    }

    /// Decodes data in any of the four formats (detected as `decode(propertyListData:)` does) for a
    /// whole suite: a top-level dictionary comes back as its entries, in the order the data holds
    /// them, every key kept as its bytes: `"\u{E9}"` and `"e\u{301}"` are two keys, as in Apple's
    /// property lists and in a suite (`PropertyListValue.dictionary`, keyed by Swift strings, would
    /// merge them). A key of the same bytes twice is an error. Dictionaries inside values are
    /// `[String: PropertyListValue]`: two canonically equivalent keys there are an error too.
    ///
    /// ```swift
    /// guard case .entries(let entries) = try PropertyListValue.decodeSuite(propertyListData: data) else { … }
    /// try defaults.replaceAll(with: entries)
    /// ```
    /// - Throws: `PropertyListFormatError` naming what is wrong (and where, for text).
    public static func decodeSuite(propertyListData data: Data) throws -> PropertyListTopLevel {
        try decode(propertyListData: data, keepingTopLevelEntries: true)
    }

    /// Decodes property-list text the way Foundation's `PropertyListSerialization` reads text: XML
    /// (after optional white space, `<?xml`, `<!DOCTYPE`, `<plist` or `<!--`), else old-style; never
    /// typed JSON or binary. For the argument domain (`-key '{ a = 1; }'`).
    package static func decodeText(_ text: String) throws -> PropertyListValue {
        let bytes = Array(text.utf8)
        var start = 0
        while start < bytes.count, TextScanning.isWhitespace(bytes[start]) { start += 1 }
        let opening = bytes[start...]
        let decoded =
            ["<?xml", "<!DOCTYPE", "<plist", "<!--"].contains(where: { opening.starts(with: $0.utf8) })
            ? try XMLPropertyList.decode(bytes, keepingTopLevelEntries: false)
            : try OpenStepPropertyList.parse(bytes, keepingTopLevelEntries: false)
        switch decoded {
        case .value(let value): return value
        case .entries(let entries): return .dictionary(Dictionary(entries, uniquingKeysWith: { first, _ in first }))  // not reached
        }
    }

    private static func decode(propertyListData data: Data, keepingTopLevelEntries suite: Bool) throws -> PropertyListTopLevel {
        let bytes = [UInt8](data)
        guard !bytes.isEmpty else {
            throw PropertyListFormatError("the data is empty: expected a property list (XML, binary or old-style) or typed JSON")
        }
        if bytes.starts(with: BinaryPropertyList.magic) { return try BinaryPropertyList.decode(bytes, keepingTopLevelEntries: suite) }
        if bytes.starts(with: "bplist".utf8) {
            let version = String(decoding: bytes[6..<min(8, bytes.count)], as: UTF8.self)
            throw PropertyListFormatError("binary property list: \"bplist\(version)\" is not supported (only bplist00)")
        }
        let text = try utf8Text(bytes)
        var start = 0
        while start < text.count, TextScanning.isWhitespace(text[start]) { start += 1 }
        let opening = text[start...]
        if ["<?xml", "<!DOCTYPE", "<plist", "<!--"].contains(where: { opening.starts(with: $0.utf8) }) {
            return try XMLPropertyList.decode(text, keepingTopLevelEntries: suite)
        }
        if TypedJSONText.looksTyped(opening) { return try TypedJSONText.decode(text, keepingTopLevelEntries: suite) }
        return try OpenStepPropertyList.parse(text, keepingTopLevelEntries: suite)
    }

    /// Encodes a whole suite's entries as a dictionary in `format`, as
    /// `PropertyListValue.dictionary(…).propertyListData(format:)` does, but keeping every key as
    /// its bytes: `"\u{E9}"` and `"e\u{301}"` are written as two keys (a `[String: PropertyListValue]`
    /// would hold one). Entries are written in the formats' key order, whatever their order here.
    ///
    /// ```swift
    /// let data = try PropertyListValue.propertyListData(entries: try defaults.storedValues(), format: .binary)
    /// ```
    /// - Throws: `PropertyListFormatError` for a key given twice (the same bytes), or a value the
    ///   format cannot carry (see `propertyListData(format:)`).
    public static func propertyListData(entries: [(key: String, value: PropertyListValue)], format: PropertyListFormat) throws -> Data {
        try entries.checkNoDuplicateKeys()
        let sorted = entries.sortedForPropertyList
        switch format {
        case .xml:
            return Data(try XMLPropertyList.encode(entries: sorted).utf8)
        case .binary:
            return Data(BinaryPropertyList.encode(entries: sorted))
        case .openStep:
            return Data((OpenStepPropertyList.text(entries: sorted, forDisplay: false) + "\n").utf8)
        case .json:
            return try TypedJSONText.encode(entries: entries)
        }
    }

    /// A whole suite's entries as old-style text, as `openStepText` prints a dictionary, every key
    /// kept as its bytes (see `propertyListData(entries:format:)`).
    public static func openStepText(entries: [(key: String, value: PropertyListValue)]) -> String {
        OpenStepPropertyList.text(entries: entries.sortedForPropertyList, forDisplay: true)
    }

    /// A whole suite's entries as plain JSON, as `plainJSON()` prints a dictionary, every key kept
    /// as its bytes (see `propertyListData(entries:format:)`).
    public static func plainJSON(entries: [(key: String, value: PropertyListValue)]) -> String {
        var out = ""
        PlainJSONText.write(entries: entries, indent: 0, into: &out)
        return out
    }

    /// Several suites' entries, by suite name, as old-style text: a dictionary of dictionaries, as
    /// `defaults read` prints every domain, every key kept as its bytes.
    public static func openStepText(domains: [(name: String, entries: [(key: String, value: PropertyListValue)])]) -> String {
        OpenStepPropertyList.text(domains: domains.map { ($0.name, $0.entries.sortedForPropertyList) }.sortedForPropertyList)
    }

    /// Several suites' entries, by suite name, as plain JSON: an object of objects, every key kept
    /// as its bytes.
    public static func plainJSON(domains: [(name: String, entries: [(key: String, value: PropertyListValue)])]) -> String {
        var out = ""
        PlainJSONText.write(domains: domains.map { ($0.name, $0.entries) }.sortedForPropertyList, into: &out)
        return out
    }

    /// Old-style text exactly as macOS `defaults read` prints it.
    ///
    /// A dictionary prints as `{`, one `key = value;` line per key (sorted, four spaces of
    /// indentation per level), `}`; an array as `(`, `value,` lines, `)`. A nested container opens
    /// on its key's line after its own indentation, as `defaults` does (`key =     {`). Strings,
    /// keys and numbers are bare when they are ASCII letters and digits only, else quoted with
    /// `\"`, `\\`, `\n`, … and `\Uxxxx` for non-ASCII (so `"0.8"`, `"-1"`, `"com.example"`); booleans
    /// print `1`/`0`; dates `"2026-11-21 10:00:00 +0000"`; data `{length = 3, bytes = 0x010203}`
    /// (abbreviated beyond 24 bytes, as macOS does).
    ///
    /// A value that is not a container prints as `defaults read SUITE KEY` shows it: a string
    /// as-is, a number as a number, a date unquoted. `propertyListData(format: .openStep)` uses the
    /// same layout but quotes such a value and writes data as `<01020304 05>`, so that it reads back.
    public var openStepText: String {
        OpenStepPropertyList.text(self, forDisplay: true)
    }

    /// Plain JSON for people and scripts (`read --json`): strings, numbers, true/false, arrays,
    /// objects; dates as ISO 8601 strings to the microsecond (`"2026-11-21T10:00:00.000Z"`,
    /// `"2020-11-21T10:00:00.123456Z"`), data as base64 strings.
    /// Pretty-printed (two spaces) with sorted keys. Doubles JSON cannot hold print as the strings
    /// `"nan"`, `"inf"`, `"-inf"`. Types are not kept: use typed JSON for a lossless form.
    public func plainJSON() -> String {
        var out = ""
        PlainJSONText.write(self, indent: 0, into: &out)
        return out
    }

    /// Parses plain or typed JSON text into a value (used by `write --json`).
    ///
    /// A typed-JSON object (exactly one key, and that key one of `string`, `integer`, `double`,
    /// `bool`, `date`, `data`, `array`, `dictionary`) decodes as typed JSON; anything else as plain
    /// JSON: integers (no fraction, no exponent) become `.integer`, other numbers `.double`,
    /// `true`/`false` `.bool`, strings `.string`, arrays and objects likewise. An object of one key
    /// that is a tag misspelt (`{"integr": 3}`) or named as elsewhere (`{"int": 3}`, `{"real": 1.5}`,
    /// `{"boolean": true}`) is refused, naming the tag meant: a dictionary of
    /// one such key is written typed, `{"dictionary": {"integr": {"integer": 3}}}`.
    /// ```swift
    /// try PropertyListValue.parseJSON(#"{"volume": 0.8, "badge": 3}"#)   // plain
    /// try PropertyListValue.parseJSON(#"{"date": "2026-11-21T10:00:00.000Z"}"#)  // typed: a date
    /// ```
    /// - Throws: `PropertyListFormatError` with line and column for bad syntax, a `null`, or an
    ///   integer beyond 64 bits; with the JSON path for typed JSON of the wrong shape.
    public static func parseJSON(_ text: String) throws -> PropertyListValue {
        let bytes = Array(text.utf8)
        var parser = JSONTextParser(bytes)
        let plain = try parser.document()
        if case .dictionary(let object) = plain, object.count == 1, let key = object.keys.first {
            if TypedJSONText.tags.contains(key) { return try TypedJSONText.decode(bytes) }
            // A misspelt tag would store a dictionary of one key where a typed value was meant.
            if let tag = TypedJSONText.aliases[key.lowercased()] ?? Spelling.nearest(to: key, among: TypedJSONText.tags.sorted()) {
                throw PropertyListFormatError(
                    """
                    "\(key)" is not a typed-JSON tag: did you mean "\(tag)"? (a dictionary with that one key is written \
                    typed: {"dictionary": {"\(key)": …}})
                    """
                )
            }
        }
        return plain
    }
}

// MARK: - Shared helpers

/// The bytes of `bytes` as UTF-8 text: a UTF-8 byte-order mark dropped, UTF-16 with a byte-order
/// mark converted, anything else checked to be valid UTF-8.
private func utf8Text(_ bytes: [UInt8]) throws -> [UInt8] {
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return try utf8Text(Array(bytes.dropFirst(3))) }
    if bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) {
        let bigEndian = bytes[0] == 0xFE
        guard bytes.count % 2 == 0 else { throw PropertyListFormatError("UTF-16 text with an odd number of bytes") }
        var units: [UInt16] = []
        units.reserveCapacity(bytes.count / 2)
        for i in stride(from: 2, to: bytes.count, by: 2) {
            let (high, low) = bigEndian ? (bytes[i], bytes[i + 1]) : (bytes[i + 1], bytes[i])
            units.append(UInt16(high) << 8 | UInt16(low))
        }
        guard let text = String(validating: units, as: UTF16.self) else {
            throw PropertyListFormatError("the UTF-16 text holds an unpaired surrogate")
        }
        return Array(text.utf8)
    }
    guard String(validating: bytes, as: UTF8.self) != nil else {
        throw PropertyListFormatError("the data is neither a binary property list nor UTF-8 text")
    }
    return bytes
}

/// Small pieces shared by the text parsers (XML, JSON, old-style), which all work on UTF-8 bytes.
enum TextScanning {
    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// "line 3, column 7" for a byte offset (columns count characters, from 1).
    static func location(_ bytes: [UInt8], _ offset: Int) -> String {
        let end = min(max(offset, 0), bytes.count)
        var line = 1
        var lineStart = 0
        for i in 0..<end where bytes[i] == 0x0A {
            line += 1
            lineStart = i + 1
        }
        let column = String(decoding: bytes[lineStart..<end], as: UTF8.self).count + 1
        return "line \(line), column \(column)"
    }

    /// What is at `offset`, for messages: `'x'`, `U+0007`, or "the end of the text".
    static func describe(_ bytes: [UInt8], _ offset: Int) -> String {
        guard offset < bytes.count else { return "the end of the text" }
        var length = 1
        let lead = bytes[offset]
        if lead >= 0xF0 { length = 4 } else if lead >= 0xE0 { length = 3 } else if lead >= 0xC0 { length = 2 }
        let character = String(decoding: bytes[offset..<min(offset + length, bytes.count)], as: UTF8.self)
        if let scalar = character.unicodeScalars.first, scalar.value < 0x20 || scalar.value == 0x7F {
            return "U+" + TextScanning.zeroPadded(String(scalar.value, radix: 16, uppercase: true), width: 4)
        }
        return "'\(character)'"
    }

    /// `digits` with leading zeros up to `width` characters.
    static func zeroPadded(_ digits: String, width: Int) -> String {
        digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    /// Appends the UTF-8 form of `scalar`.
    static func append(_ scalar: Unicode.Scalar, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: String(Character(scalar)).utf8)
    }
}

extension Dictionary where Key == String, Value == PropertyListValue {
    /// The entries in the order every format here writes them: keys compared by UTF-16 code unit,
    /// as Apple's `compare:` does, so that `"B" < "a" < "a-b" < "aB"`.
    var sortedForPropertyList: [(key: String, value: PropertyListValue)] {
        sorted { $0.key.utf16.lexicographicallyPrecedes($1.key.utf16) }
    }
}

extension Array where Element == (key: String, entries: [(key: String, value: PropertyListValue)]) {
    /// Domains in the order of `sortedForPropertyList`.
    var sortedForPropertyList: [(key: String, entries: [(key: String, value: PropertyListValue)])] {
        sorted { $0.key.utf16.lexicographicallyPrecedes($1.key.utf16) }
    }
}

extension Array where Element == (key: String, value: PropertyListValue) {
    /// The entries in the order every format here writes them (see `Dictionary.sortedForPropertyList`):
    /// by UTF-16 code unit, so two keys of different bytes never tie.
    var sortedForPropertyList: [(key: String, value: PropertyListValue)] {
        sorted { $0.key.utf16.lexicographicallyPrecedes($1.key.utf16) }
    }

    /// Throws if two entries have the same key, the same bytes (`ExactName`); keys that differ in
    /// their bytes are two keys, however alike they look.
    func checkNoDuplicateKeys() throws {
        var seen = Set<ExactName>()
        for entry in self where !seen.insert(entry.key.exact).inserted {
            throw PropertyListFormatError("duplicate key \"\(entry.key)\" in the entries to write")
        }
    }
}

/// The entries of one dictionary as a reader finds them, in order. A key is a duplicate when its
/// bytes are those of an earlier key (`ExactName`), as Apple's property lists compare keys; keys
/// that differ in their bytes (`"\u{E9}"` and `"e\u{301}"`) are two keys.
///
/// A suite's own keys keep every such key (`entries`). A dictionary inside a value is a
/// `[String: PropertyListValue]`, whose keys compare as Swift strings (canonical equivalence):
/// it cannot hold two canonically equivalent keys, so `dictionary(failure:)` refuses them rather
/// than keep one silently.
struct DictionaryEntries {
    private(set) var entries: [(key: String, value: PropertyListValue)] = []
    private var seen = Set<ExactName>()

    /// Adds `key` and `value`; false (nothing added) when a key of the same bytes is already there.
    mutating func append(_ key: String, _ value: PropertyListValue) -> Bool {
        guard seen.insert(key.exact).inserted else { return false }
        entries.append((key, value))
        return true
    }

    /// The entries as a dictionary of a value; `failure` makes the error (with the reader's
    /// location) when two keys are canonically equivalent.
    func dictionary(failure: (String) -> PropertyListFormatError) throws -> [String: PropertyListValue] {
        var dictionary: [String: PropertyListValue] = [:]
        dictionary.reserveCapacity(entries.count)
        var spelling: [String: String] = [:]
        for (key, value) in entries {
            if let earlier = spelling.updateValue(key, forKey: key) {
                throw failure(Self.equivalentKeysMessage(earlier, key))
            }
            dictionary[key] = value
        }
        return dictionary
    }

    /// Why two canonically equivalent keys cannot be one dictionary inside a value.
    static func equivalentKeysMessage(_ first: String, _ second: String) -> String {
        "a dictionary inside a value cannot hold both the key \"\(first)\" (\(scalars(first))) and \"\(second)\" "
            + "(\(scalars(second))): they are canonically equivalent, one key to a Swift dictionary (a suite's own keys "
            + "may differ so)"
    }

    /// `U+0065 U+0301`: the scalars of `text` (the first 12).
    static func scalars(_ text: String) -> String {
        var parts = text.unicodeScalars.prefix(12).map {
            "U+" + TextScanning.zeroPadded(String($0.value, radix: 16, uppercase: true), width: 4)
        }
        if text.unicodeScalars.count > 12 { parts.append("…") }
        return parts.joined(separator: " ")
    }
}
