public import Foundation
public import GroupDefaults
import GroupDefaultsWire

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
    /// Dates keep whole seconds (the format's `<date>` has no fraction); everything else survives.
    case xml
    /// Apple's binary property list, `bplist00…`. Lossless.
    case binary
    /// Old-style (OpenStep) text in the layout of macOS `defaults read`, with data written as
    /// `<01020304 05>` so that it reads back whole. Reading it back gives strings, arrays,
    /// dictionaries and data only: old-style text has no numbers, booleans or dates.
    case openStep
    /// The design's lossless typed JSON (`{"integer":3}`, …), pretty-printed with sorted keys.
    case json
}

/// Why bytes or text could not be read, or a value written, in a property-list format. The
/// description names the format, what is wrong and, for text, the line and column.
public struct PropertyListFormatError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) {
        self.description = description
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
    ///   years 0–9999 in XML or typed JSON. Binary and old-style encoding never fail.
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
        let bytes = [UInt8](data)
        guard !bytes.isEmpty else {
            throw PropertyListFormatError("the data is empty: expected a property list (XML, binary or old-style) or typed JSON")
        }
        if bytes.starts(with: BinaryPropertyList.magic) { return try BinaryPropertyList.decode(bytes) }
        if bytes.starts(with: "bplist".utf8) {
            let version = String(decoding: bytes[6..<min(8, bytes.count)], as: UTF8.self)
            throw PropertyListFormatError("binary property list: \"bplist\(version)\" is not supported (only bplist00)")
        }
        let text = try utf8Text(bytes)
        var start = 0
        while start < text.count, TextScanning.isWhitespace(text[start]) { start += 1 }
        let opening = text[start...]
        if ["<?xml", "<!DOCTYPE", "<plist", "<!--"].contains(where: { opening.starts(with: $0.utf8) }) {
            return try XMLPropertyList.decode(text)
        }
        if TypedJSONText.looksTyped(opening) { return try TypedJSONText.decode(text) }
        return try OpenStepPropertyList.parse(text)
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
    /// objects; dates as ISO 8601 strings (`"2026-11-21T10:00:00.000Z"`), data as base64 strings.
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

// MARK: - XML property lists

/// Apple's XML property-list format, written and read here.
///
/// The writer follows Apple's layout (tabs, `<data>` as wrapped base64, keys sorted); a carriage
/// return in a string is written `&#13;` so that XML readers, which turn a raw one into a line
/// feed, keep it. Other control characters are written as they are, as Apple does; XML 1.0
/// readers other than Apple's and this one refuse them. `<date>` holds whole seconds (UTC,
/// `2026-11-21T10:00:00Z`): fractions are dropped (rounded down, as Apple does).
///
/// The reader takes the plist subset of XML: an optional declaration, comments, a DOCTYPE, then
/// `<plist>` (or a bare value) holding `dict`/`key`, `array`, `string`, `integer` (decimal or
/// `0x` hex), `real` (also `nan`, `+infinity`, `-infinity`), `true`, `false`, `date`, `data`;
/// the five named entities, numeric character references and CDATA sections.
enum XMLPropertyList {
    static let header = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">

        """

    static func encode(_ value: PropertyListValue) throws -> String {
        var out = header
        try write(value, indent: 0, into: &out)
        out += "</plist>\n"
        return out
    }

    private static func write(_ value: PropertyListValue, indent: Int, into out: inout String) throws {
        let tabs = String(repeating: "\t", count: indent)
        out += tabs
        switch value {
        case .string(let string):
            out += "<string>" + escaped(string) + "</string>\n"
        case .integer(let int):
            out += "<integer>\(int)</integer>\n"
        case .double(let double):
            let text = double.isNaN ? "nan" : double.isInfinite ? (double > 0 ? "+infinity" : "-infinity") : "\(double)"
            out += "<real>\(text)</real>\n"
        case .bool(let bool):
            out += bool ? "<true/>\n" : "<false/>\n"
        case .date(let date):
            out += "<date>" + (try dateText(date)) + "</date>\n"
        case .data(let data):
            out += "<data>\n"
            let base64 = Array(data.base64EncodedString().utf8)
            for start in stride(from: 0, to: base64.count, by: 68) {
                out += tabs + String(decoding: base64[start..<min(start + 68, base64.count)], as: UTF8.self) + "\n"
            }
            out += tabs + "</data>\n"
        case .array(let elements):
            guard !elements.isEmpty else {
                out += "<array/>\n"
                return
            }
            out += "<array>\n"
            for element in elements { try write(element, indent: indent + 1, into: &out) }
            out += tabs + "</array>\n"
        case .dictionary(let dictionary):
            guard !dictionary.isEmpty else {
                out += "<dict/>\n"
                return
            }
            out += "<dict>\n"
            for (key, element) in dictionary.sortedForPropertyList {
                out += tabs + "\t<key>" + escaped(key) + "</key>\n"
                try write(element, indent: indent + 1, into: &out)
            }
            out += tabs + "</dict>\n"
        }
    }

    private static func escaped(_ string: String) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(string.unicodeScalars.count)
        for scalar in string.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\r": out += "&#13;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// `2026-11-21T10:00:00Z`, the date rounded down to the second.
    private static func dateText(_ date: Date) throws -> String {
        let seconds = date.timeIntervalSince1970.rounded(.down)
        guard seconds.isFinite, let text = TypedJSONDate.format(Date(timeIntervalSince1970: seconds)) else {
            throw PropertyListFormatError(
                "XML property list: <date> carries years 0 to 9999; this date is \(date.timeIntervalSince1970) s from 1970"
            )
        }
        return text.replacingOccurrences(of: ".000Z", with: "Z")
    }

    static func decode(_ bytes: [UInt8]) throws -> PropertyListValue {
        var reader = XMLReader(bytes)
        return try reader.document()
    }
}

/// A recursive-descent reader for XML property lists (see `XMLPropertyList`).
private struct XMLReader {
    private let bytes: [UInt8]
    private var i = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    private struct Tag {
        var name: String
        var isEmpty: Bool  // `<name/>`
        var offset: Int
    }

    mutating func document() throws -> PropertyListValue {
        try skipMisc(allowDoctype: true)
        let root = try openTag(expecting: "<plist> or a value")
        let value: PropertyListValue
        if root.name == "plist" {
            guard !root.isEmpty else { throw failure("<plist/> holds no value", at: root.offset) }
            try skipMisc()
            guard !atCloseTag else { throw failure("<plist> holds no value", at: i) }
            value = try element(try openTag(expecting: "a value"), depth: 0)
            try skipMisc()
            try closeTag("plist", openedAt: root.offset)
        } else {
            value = try element(root, depth: 0)
        }
        try skipMisc()
        guard i == bytes.count else {
            throw failure("unexpected \(TextScanning.describe(bytes, i)) after the property list", at: i)
        }
        return value
    }

    private func failure(_ message: String, at offset: Int) -> PropertyListFormatError {
        PropertyListFormatError("XML property list: \(message) at \(TextScanning.location(bytes, offset))")
    }

    private func starts(with literal: String, at offset: Int? = nil) -> Bool {
        bytes[min(offset ?? i, bytes.count)...].starts(with: literal.utf8)
    }

    private var atCloseTag: Bool { starts(with: "</") }

    /// Skips white space, comments and processing instructions (and a DOCTYPE when allowed).
    private mutating func skipMisc(allowDoctype: Bool = false) throws {
        while i < bytes.count {
            if TextScanning.isWhitespace(bytes[i]) {
                i += 1
            } else if starts(with: "<!--") {
                try skip(past: "-->", what: "comment")
            } else if starts(with: "<?") {
                try skip(past: "?>", what: "processing instruction")
            } else if allowDoctype, starts(with: "<!DOCTYPE") {
                try skipDoctype()
            } else {
                return
            }
        }
    }

    private mutating func skip(past terminator: String, what: String) throws {
        let start = i
        let end = Array(terminator.utf8)
        while i < bytes.count {
            if bytes[i...].starts(with: end) {
                i += end.count
                return
            }
            i += 1
        }
        throw failure("unterminated \(what)", at: start)
    }

    private mutating func skipDoctype() throws {
        let start = i
        var inSubset = false
        var quote: UInt8?
        while i < bytes.count {
            let byte = bytes[i]
            i += 1
            if let q = quote {
                if byte == q { quote = nil }
            } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                quote = byte
            } else if byte == UInt8(ascii: "[") {
                inSubset = true
            } else if byte == UInt8(ascii: "]") {
                inSubset = false
            } else if byte == UInt8(ascii: ">"), !inSubset {
                return
            }
        }
        throw failure("unterminated <!DOCTYPE>", at: start)
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"):
            true
        default:
            byte >= 0x80
        }
    }

    /// Reads `<name attr="…" …>` or `<name …/>`.
    private mutating func openTag(expecting: String) throws -> Tag {
        let start = i
        guard i < bytes.count, bytes[i] == UInt8(ascii: "<"), i + 1 < bytes.count, Self.isNameByte(bytes[i + 1]) else {
            throw failure("expected \(expecting), found \(TextScanning.describe(bytes, i))", at: i)
        }
        i += 1
        let nameStart = i
        while i < bytes.count, Self.isNameByte(bytes[i]) { i += 1 }
        let name = String(decoding: bytes[nameStart..<i], as: UTF8.self)
        while true {
            while i < bytes.count, TextScanning.isWhitespace(bytes[i]) { i += 1 }
            guard i < bytes.count else { throw failure("unterminated <\(name)> tag", at: start) }
            if starts(with: "/>") {
                i += 2
                return Tag(name: name, isEmpty: true, offset: start)
            }
            if bytes[i] == UInt8(ascii: ">") {
                i += 1
                return Tag(name: name, isEmpty: false, offset: start)
            }
            // An attribute: name = "value" (its value does not matter here).
            let attributeStart = i
            while i < bytes.count, Self.isNameByte(bytes[i]) { i += 1 }
            while i < bytes.count, TextScanning.isWhitespace(bytes[i]) { i += 1 }
            guard i > attributeStart, i < bytes.count, bytes[i] == UInt8(ascii: "=") else {
                throw failure("malformed attribute in <\(name)>", at: attributeStart)
            }
            i += 1
            while i < bytes.count, TextScanning.isWhitespace(bytes[i]) { i += 1 }
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") || bytes[i] == UInt8(ascii: "'") else {
                throw failure("attribute value in <\(name)> must be quoted", at: i)
            }
            let quote = bytes[i]
            i += 1
            while i < bytes.count, bytes[i] != quote { i += 1 }
            guard i < bytes.count else { throw failure("unterminated attribute value in <\(name)>", at: attributeStart) }
            i += 1
        }
    }

    private mutating func closeTag(_ name: String, openedAt: Int) throws {
        guard atCloseTag else {
            throw failure(
                "expected </\(name)> (for the <\(name)> at \(TextScanning.location(bytes, openedAt))), found \(TextScanning.describe(bytes, i))",
                at: i
            )
        }
        let start = i
        i += 2
        let nameStart = i
        while i < bytes.count, Self.isNameByte(bytes[i]) { i += 1 }
        let found = String(decoding: bytes[nameStart..<i], as: UTF8.self)
        while i < bytes.count, TextScanning.isWhitespace(bytes[i]) { i += 1 }
        guard found == name else {
            throw failure("</\(found)> does not close the <\(name)> at \(TextScanning.location(bytes, openedAt))", at: start)
        }
        guard i < bytes.count, bytes[i] == UInt8(ascii: ">") else { throw failure("unterminated </\(name)> tag", at: start) }
        i += 1
    }

    private mutating func element(_ tag: Tag, depth: Int) throws -> PropertyListValue {
        guard depth < BinaryCodec.maximumDepth else {
            throw failure("values nest deeper than \(BinaryCodec.maximumDepth) levels", at: tag.offset)
        }
        switch tag.name {
        case "dict":
            var dictionary: [String: PropertyListValue] = [:]
            guard !tag.isEmpty else { return .dictionary(dictionary) }
            while true {
                try skipMisc()
                if atCloseTag { break }
                let keyTag = try openTag(expecting: "<key> or </dict>")
                guard keyTag.name == "key" else {
                    throw failure("expected <key> in <dict>, found <\(keyTag.name)>", at: keyTag.offset)
                }
                let key = keyTag.isEmpty ? "" : try text(of: keyTag)
                try skipMisc()
                guard !atCloseTag else { throw failure("the key \"\(key)\" has no value", at: i) }
                let valueTag = try openTag(expecting: "the value for the key \"\(key)\"")
                guard valueTag.name != "key" else { throw failure("the key \"\(key)\" has no value", at: valueTag.offset) }
                guard dictionary.updateValue(try element(valueTag, depth: depth + 1), forKey: key) == nil else {
                    throw failure("duplicate key \"\(key)\"", at: keyTag.offset)
                }
            }
            try closeTag("dict", openedAt: tag.offset)
            return .dictionary(dictionary)
        case "array":
            var array: [PropertyListValue] = []
            guard !tag.isEmpty else { return .array(array) }
            while true {
                try skipMisc()
                if atCloseTag { break }
                array.append(try element(try openTag(expecting: "a value or </array>"), depth: depth + 1))
            }
            try closeTag("array", openedAt: tag.offset)
            return .array(array)
        case "string":
            return .string(tag.isEmpty ? "" : try text(of: tag))
        case "integer":
            let text = try trimmedText(of: tag)
            var digits = Substring(text)
            let negative = digits.first == "-"
            if negative || digits.first == "+" { digits = digits.dropFirst() }
            let hex = digits.hasPrefix("0x") || digits.hasPrefix("0X")
            guard !digits.isEmpty, let magnitude = UInt64(hex ? digits.dropFirst(2) : digits, radix: hex ? 16 : 10),
                let value = negative
                    ? (magnitude <= UInt64(Int.max) + 1 ? Int(truncatingIfNeeded: 0 &- magnitude) : nil)
                    : Int(exactly: magnitude)
            else {
                throw failure("<integer>\(text)</integer> is not an integer that fits in 64 bits", at: tag.offset)
            }
            return .integer(value)
        case "real":
            let text = try trimmedText(of: tag)
            let value: Double?
            switch text.lowercased() {
            case "nan": value = .nan
            case "inf", "+inf", "infinity", "+infinity": value = .infinity
            case "-inf", "-infinity": value = -.infinity
            default: value = Double(text)
            }
            guard let value else { throw failure("<real>\(text)</real> is not a number", at: tag.offset) }
            return .double(value)
        case "true", "false":
            if !tag.isEmpty {
                guard try trimmedText(of: tag).isEmpty else { throw failure("<\(tag.name)> must be empty", at: tag.offset) }
            }
            return .bool(tag.name == "true")
        case "date":
            let text = try trimmedText(of: tag)
            guard let date = TypedJSONDate.parse(text) else {
                throw failure("<date>\(text)</date> is not a date such as 2026-11-21T10:00:00Z", at: tag.offset)
            }
            return .date(date)
        case "data":
            var base64 = try trimmedText(of: tag).unicodeScalars.filter { !($0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r") }
            switch base64.count % 4 {
            case 2: base64.append(contentsOf: "==".unicodeScalars)
            case 3: base64.append("=")
            default: break
            }
            guard let data = Data(base64Encoded: String(base64)) else {
                throw failure("<data> does not hold valid base64", at: tag.offset)
            }
            return .data(data)
        case "key":
            throw failure("<key> outside a <dict>", at: tag.offset)
        case "plist":
            throw failure("<plist> inside a value", at: tag.offset)
        default:
            throw failure("unknown element <\(tag.name)>", at: tag.offset)
        }
    }

    private mutating func trimmedText(of tag: Tag) throws -> String {
        guard !tag.isEmpty else { return "" }
        return try text(of: tag).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The character data up to the tag's close tag, entities and CDATA resolved, line ends
    /// normalised to LF (as XML prescribes).
    private mutating func text(of tag: Tag) throws -> String {
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw failure("unterminated <\(tag.name)>", at: tag.offset) }
            let byte = bytes[i]
            if byte == UInt8(ascii: "<") {
                if atCloseTag {
                    try closeTag(tag.name, openedAt: tag.offset)
                    return String(decoding: out, as: UTF8.self)
                } else if starts(with: "<![CDATA[") {
                    let start = i
                    i += 9
                    while i < bytes.count, !starts(with: "]]>") {
                        out.append(bytes[i])
                        i += 1
                    }
                    guard i < bytes.count else { throw failure("unterminated CDATA section", at: start) }
                    i += 3
                } else if starts(with: "<!--") {
                    try skip(past: "-->", what: "comment")
                } else {
                    throw failure("unexpected markup inside <\(tag.name)>", at: i)
                }
            } else if byte == UInt8(ascii: "&") {
                TextScanning.append(try entity(), to: &out)
            } else if byte == 0x0D {
                out.append(0x0A)
                i += 1
                if i < bytes.count, bytes[i] == 0x0A { i += 1 }
            } else {
                out.append(byte)
                i += 1
            }
        }
    }

    private mutating func entity() throws -> Unicode.Scalar {
        let start = i
        guard let end = bytes[i...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
            throw failure("'&' must start an entity such as &amp;", at: start)
        }
        let name = String(decoding: bytes[(i + 1)..<end], as: UTF8.self)
        i = end + 1
        switch name {
        case "lt": return "<"
        case "gt": return ">"
        case "amp": return "&"
        case "quot": return "\""
        case "apos": return "'"
        default:
            var code: UInt32?
            if name.hasPrefix("#x") || name.hasPrefix("#X") {
                code = UInt32(name.dropFirst(2), radix: 16)
            } else if name.hasPrefix("#") {
                code = UInt32(name.dropFirst(), radix: 10)
            }
            guard let code, let scalar = Unicode.Scalar(code) else {
                throw failure("unknown entity &\(name);", at: start)
            }
            return scalar
        }
    }
}

// MARK: - Binary property lists

/// Apple's binary property-list format, `bplist00`, written and read here.
///
/// Layout: the 8-byte magic, the objects, a table of each object's offset, and a 32-byte trailer
/// (offset and reference sizes, object count, top object, table offset), all big-endian. Objects
/// start with a marker byte, type in the high nibble: `0x08`/`0x09` false/true, `0x1n` an integer
/// of 2^n bytes (1, 2 and 4 bytes unsigned, 8 signed, 16 for values beyond `Int64`), `0x2n` a
/// real, `0x33` a date (seconds since 2001 as a double), `0x4n` data, `0x5n` ASCII and `0x6n`
/// UTF-16 strings, `0xAn` arrays and `0xDn` dictionaries of object references; a count of 15 or
/// more follows the marker as an integer object.
///
/// The reader checks every offset, count and reference against the data, refuses cycles, nesting
/// deeper than `BinaryCodec.maximumDepth`, and shared sub-objects that would expand to an
/// unreasonable number of values.
enum BinaryPropertyList {
    static let magic: [UInt8] = Array("bplist00".utf8)

    static func encode(_ value: PropertyListValue) -> [UInt8] {
        var writer = BinaryPlistWriter()
        _ = writer.add(value)
        return writer.finish()
    }

    static func decode(_ bytes: [UInt8]) throws -> PropertyListValue {
        var reader = try BinaryPlistReader(bytes)
        return try reader.topValue()
    }

    /// The fewest of 1, 2, 4 or 8 bytes that hold `value`.
    static func byteWidth(_ value: UInt64) -> Int {
        value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
    }
}

private struct BinaryPlistWriter {
    private enum Object {
        case scalar(PropertyListValue)
        case string(String)
        case array([Int])
        case dictionary(keys: [Int], values: [Int])
    }

    private var objects: [Object] = []
    /// Strings written once each (keys repeat); keyed by their UTF-8 bytes, not by `String`
    /// equality, which would merge canonically equivalent but different strings.
    private var strings: [[UInt8]: Int] = [:]

    /// Adds `value` and what it holds; returns its object number (the first is the top object).
    mutating func add(_ value: PropertyListValue) -> Int {
        switch value {
        case .string(let string):
            return add(string)
        case .array(let elements):
            let index = objects.count
            objects.append(.array([]))
            let references = elements.map { add($0) }
            objects[index] = .array(references)
            return index
        case .dictionary(let dictionary):
            let index = objects.count
            objects.append(.array([]))
            let entries = dictionary.sortedForPropertyList
            let keys = entries.map { add($0.key) }
            let values = entries.map { add($0.value) }
            objects[index] = .dictionary(keys: keys, values: values)
            return index
        default:
            objects.append(.scalar(value))
            return objects.count - 1
        }
    }

    private mutating func add(_ string: String) -> Int {
        let key = Array(string.utf8)
        if let index = strings[key] { return index }
        objects.append(.string(string))
        strings[key] = objects.count - 1
        return objects.count - 1
    }

    func finish() -> [UInt8] {
        let referenceSize = BinaryPropertyList.byteWidth(UInt64(objects.count - 1))
        var out = BinaryPropertyList.magic
        var offsets: [Int] = []
        offsets.reserveCapacity(objects.count)
        for object in objects {
            offsets.append(out.count)
            write(object, referenceSize: referenceSize, into: &out)
        }
        let tableOffset = out.count
        let offsetSize = BinaryPropertyList.byteWidth(UInt64(offsets.last ?? 0))
        for offset in offsets { appendUnsigned(UInt64(offset), width: offsetSize, to: &out) }
        out += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)]
        appendUnsigned(UInt64(objects.count), width: 8, to: &out)
        appendUnsigned(0, width: 8, to: &out)
        appendUnsigned(UInt64(tableOffset), width: 8, to: &out)
        return out
    }

    private func write(_ object: Object, referenceSize: Int, into out: inout [UInt8]) {
        switch object {
        case .string(let string):
            if string.utf8.allSatisfy({ $0 < 0x80 }) {
                appendMarker(0x50, count: string.utf8.count, to: &out)
                out += string.utf8
            } else {
                appendMarker(0x60, count: string.utf16.count, to: &out)
                for unit in string.utf16 { appendUnsigned(UInt64(unit), width: 2, to: &out) }
            }
        case .array(let references):
            appendMarker(0xA0, count: references.count, to: &out)
            for reference in references { appendUnsigned(UInt64(reference), width: referenceSize, to: &out) }
        case .dictionary(let keys, let values):
            appendMarker(0xD0, count: keys.count, to: &out)
            for reference in keys + values { appendUnsigned(UInt64(reference), width: referenceSize, to: &out) }
        case .scalar(let value):
            switch value {
            case .integer(let int):
                appendInteger(int, to: &out)
            case .double(let double):
                out.append(0x23)
                appendUnsigned(double.bitPattern, width: 8, to: &out)
            case .bool(let bool):
                out.append(bool ? 0x09 : 0x08)
            case .date(let date):
                out.append(0x33)
                appendUnsigned(date.timeIntervalSinceReferenceDate.bitPattern, width: 8, to: &out)
            case .data(let data):
                appendMarker(0x40, count: data.count, to: &out)
                out += data
            case .string, .array, .dictionary:
                preconditionFailure("containers and strings are objects of their own")
            }
        }
    }

    private func appendMarker(_ type: UInt8, count: Int, to out: inout [UInt8]) {
        if count < 15 {
            out.append(type | UInt8(count))
        } else {
            out.append(type | 0x0F)
            appendInteger(count, to: &out)
        }
    }

    private func appendInteger(_ int: Int, to out: inout [UInt8]) {
        let width = int < 0 ? 8 : BinaryPropertyList.byteWidth(UInt64(int))
        out.append(0x10 | UInt8(width.trailingZeroBitCount))
        appendUnsigned(UInt64(bitPattern: Int64(int)), width: width, to: &out)
    }

    private func appendUnsigned(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
}

private struct BinaryPlistReader {
    private let bytes: [UInt8]
    private let offsetSize: Int
    private let referenceSize: Int
    private let objectCount: Int
    private let topObject: Int
    private let tableOffset: Int
    /// Each object, once read: its value, its height (levels of nesting below it) and how many
    /// values it expands to. Shared sub-objects are read once; `inProgress` catches cycles.
    private var done: [Int: (value: PropertyListValue, height: Int, size: Int)] = [:]
    private var inProgress: Set<Int> = []
    /// At most this many values in all, however objects are shared (a 1 KB file could otherwise
    /// describe 2^100 values).
    private let sizeLimit: Int

    init(_ bytes: [UInt8]) throws {
        self.bytes = bytes
        guard bytes.count >= BinaryPropertyList.magic.count + 1 + 1 + 32 else {
            throw PropertyListFormatError("binary property list: \(bytes.count) bytes are too few for the header, an object and the trailer")
        }
        let trailer = bytes.count - 32
        func field(_ at: Int) -> UInt64 {
            bytes[at..<(at + 8)].reduce(0) { $0 << 8 | UInt64($1) }
        }
        offsetSize = Int(bytes[trailer + 6])
        referenceSize = Int(bytes[trailer + 7])
        let count = field(trailer + 8)
        let top = field(trailer + 16)
        let table = field(trailer + 24)
        guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
            throw PropertyListFormatError("binary property list: bad trailer (offset size \(offsetSize), reference size \(referenceSize))")
        }
        guard table >= UInt64(BinaryPropertyList.magic.count + 1), table <= UInt64(trailer),
            count >= 1, count <= (UInt64(trailer) - table) / UInt64(offsetSize), top < count
        else {
            throw PropertyListFormatError(
                "binary property list: bad trailer (\(count) objects, top object \(top), offset table at \(table) in \(bytes.count) bytes)"
            )
        }
        objectCount = Int(count)
        topObject = Int(top)
        tableOffset = Int(table)
        sizeLimit = max(1 << 20, bytes.count * 16)
    }

    mutating func topValue() throws -> PropertyListValue {
        try value(topObject, depth: 0).value
    }

    private func failure(_ message: String, object: Int, offset: Int) -> PropertyListFormatError {
        PropertyListFormatError("binary property list: \(message) (object \(object) at byte \(offset))")
    }

    /// Checks that `length` bytes from `offset` lie before the offset table.
    private func checkRange(_ offset: Int, _ length: Int, object: Int) throws {
        guard offset >= 0, length >= 0, length <= tableOffset, offset <= tableOffset - length else {
            throw failure("runs past the end of the objects", object: object, offset: offset)
        }
    }

    /// `width` (at most 8) bytes at `offset` as a big-endian unsigned number.
    private func unsigned(at offset: Int, width: Int, object: Int) throws -> UInt64 {
        try checkRange(offset, width, object: object)
        return bytes[offset..<(offset + width)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    private func offset(of object: Int) -> Int {
        let start = tableOffset + object * offsetSize
        return Int(truncatingIfNeeded: bytes[start..<(start + offsetSize)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }

    /// The count in a marker's low nibble, or the integer object after it when the nibble is 15;
    /// returns the count and where the object's contents start.
    private func count(marker: UInt8, at offset: Int, object: Int) throws -> (count: Int, start: Int) {
        let nibble = Int(marker & 0x0F)
        guard nibble == 0x0F else { return (nibble, offset + 1) }
        let intMarker = try unsigned(at: offset + 1, width: 1, object: object)
        guard intMarker & 0xF0 == 0x10, intMarker & 0x0F <= 3 else {
            throw failure("a count must be an integer object", object: object, offset: offset)
        }
        let width = 1 << Int(intMarker & 0x0F)
        let value = try unsigned(at: offset + 2, width: width, object: object)
        guard value <= UInt64(tableOffset) else { throw failure("count \(value) exceeds the data", object: object, offset: offset) }
        return (Int(value), offset + 2 + width)
    }

    private mutating func value(_ object: Int, depth: Int) throws -> (value: PropertyListValue, height: Int, size: Int) {
        guard object >= 0, object < objectCount else {
            throw PropertyListFormatError("binary property list: reference to object \(object) of \(objectCount)")
        }
        let offset = offset(of: object)
        guard depth < BinaryCodec.maximumDepth else {
            throw failure("values nest deeper than \(BinaryCodec.maximumDepth) levels", object: object, offset: offset)
        }
        if let known = done[object] {
            guard depth + known.height < BinaryCodec.maximumDepth else {
                throw failure("values nest deeper than \(BinaryCodec.maximumDepth) levels", object: object, offset: offset)
            }
            return known
        }
        guard !inProgress.contains(object) else { throw failure("the object contains itself", object: object, offset: offset) }
        guard offset >= BinaryPropertyList.magic.count, offset < tableOffset else {
            throw failure("offset outside the object area", object: object, offset: offset)
        }
        inProgress.insert(object)
        defer { inProgress.remove(object) }

        let marker = bytes[offset]
        var result: (value: PropertyListValue, height: Int, size: Int)
        switch marker >> 4 {
        case 0x0:
            switch marker {
            case 0x08: result = (.bool(false), 0, 1)
            case 0x09: result = (.bool(true), 0, 1)
            case 0x00: throw failure("null is not a property-list value", object: object, offset: offset)
            default: throw failure("unknown marker 0x\(String(marker, radix: 16))", object: object, offset: offset)
            }
        case 0x1:
            let exponent = Int(marker & 0x0F)
            guard exponent <= 4 else { throw failure("bad integer size", object: object, offset: offset) }
            let width = 1 << exponent
            let int: Int?
            if width == 16 {
                let high = try unsigned(at: offset + 1, width: 8, object: object)
                let low = try unsigned(at: offset + 9, width: 8, object: object)
                let fitsPositive = high == 0 && low <= UInt64(Int64.max)
                let fitsNegative = high == UInt64.max && low > UInt64(Int64.max)
                int = fitsPositive || fitsNegative ? Int(truncatingIfNeeded: Int64(bitPattern: low)) : nil
            } else {
                let raw = try unsigned(at: offset + 1, width: width, object: object)
                int = width == 8 ? Int(truncatingIfNeeded: Int64(bitPattern: raw)) : Int(raw)
            }
            guard let int else { throw failure("integer outside the 64-bit signed range", object: object, offset: offset) }
            result = (.integer(int), 0, 1)
        case 0x2:
            switch marker & 0x0F {
            case 2: result = (.double(Double(Float(bitPattern: UInt32(try unsigned(at: offset + 1, width: 4, object: object))))), 0, 1)
            case 3: result = (.double(Double(bitPattern: try unsigned(at: offset + 1, width: 8, object: object))), 0, 1)
            default: throw failure("bad real size", object: object, offset: offset)
            }
        case 0x3:
            guard marker == 0x33 else { throw failure("bad date marker", object: object, offset: offset) }
            let seconds = Double(bitPattern: try unsigned(at: offset + 1, width: 8, object: object))
            result = (.date(Date(timeIntervalSinceReferenceDate: seconds)), 0, 1)
        case 0x4:
            let (count, start) = try count(marker: marker, at: offset, object: object)
            try checkRange(start, count, object: object)
            result = (.data(Data(bytes[start..<(start + count)])), 0, 1)
        case 0x5, 0x7:
            let (count, start) = try count(marker: marker, at: offset, object: object)
            try checkRange(start, count, object: object)
            let slice = bytes[start..<(start + count)]
            if marker >> 4 == 0x5, let bad = slice.firstIndex(where: { $0 >= 0x80 }) {
                throw failure("ASCII string holds the byte 0x\(String(bytes[bad], radix: 16))", object: object, offset: offset)
            }
            guard let string = String(validating: slice, as: UTF8.self) else {
                throw failure("string is not valid UTF-8", object: object, offset: offset)
            }
            result = (.string(string), 0, 1)
        case 0x6:
            let (count, start) = try count(marker: marker, at: offset, object: object)
            guard count <= tableOffset / 2 else { throw failure("string runs past the end of the objects", object: object, offset: offset) }
            try checkRange(start, count * 2, object: object)
            let units = (0..<count).map { UInt16(bytes[start + 2 * $0]) << 8 | UInt16(bytes[start + 2 * $0 + 1]) }
            guard let string = String(validating: units, as: UTF16.self) else {
                throw failure("UTF-16 string holds an unpaired surrogate", object: object, offset: offset)
            }
            result = (.string(string), 0, 1)
        case 0xA:
            let (count, start) = try count(marker: marker, at: offset, object: object)
            let references = try self.references(count, at: start, object: object)
            var elements: [PropertyListValue] = []
            elements.reserveCapacity(count)
            var height = 0
            var size = 1
            for reference in references {
                let element = try value(reference, depth: depth + 1)
                elements.append(element.value)
                height = max(height, element.height + 1)
                size += element.size
                guard size <= sizeLimit else {
                    throw failure("shared objects expand to more than \(sizeLimit) values", object: object, offset: offset)
                }
            }
            result = (.array(elements), height, size)
        case 0xD:
            let (count, start) = try count(marker: marker, at: offset, object: object)
            let references = try self.references(count * 2, at: start, object: object)
            var dictionary: [String: PropertyListValue] = [:]
            dictionary.reserveCapacity(count)
            var height = 0
            var size = 1
            for index in 0..<count {
                guard case .string(let key) = try value(references[index], depth: depth + 1).value else {
                    throw failure("dictionary key \(index) is not a string", object: object, offset: offset)
                }
                let element = try value(references[count + index], depth: depth + 1)
                guard dictionary.updateValue(element.value, forKey: key) == nil else {
                    throw failure("duplicate key \"\(key)\"", object: object, offset: offset)
                }
                height = max(height, element.height + 1)
                size += element.size
                guard size <= sizeLimit else {
                    throw failure("shared objects expand to more than \(sizeLimit) values", object: object, offset: offset)
                }
            }
            result = (.dictionary(dictionary), height, size)
        case 0x8:
            throw failure("a UID (keyed-archiver reference) is not a property-list value", object: object, offset: offset)
        case 0xB, 0xC:
            throw failure("a set is not a property-list value", object: object, offset: offset)
        default:
            throw failure("unknown marker 0x\(String(marker, radix: 16))", object: object, offset: offset)
        }
        done[object] = result
        return result
    }

    private func references(_ count: Int, at start: Int, object: Int) throws -> [Int] {
        guard count <= tableOffset / referenceSize else {
            throw failure("\(count) references run past the end of the objects", object: object, offset: start)
        }
        try checkRange(start, count * referenceSize, object: object)
        return (0..<count).map { index in
            let at = start + index * referenceSize
            return Int(truncatingIfNeeded: bytes[at..<(at + referenceSize)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        }
    }
}

// MARK: - JSON

/// Typed JSON (the Codable form in TypedJSON.swift) read from text, with syntax errors located.
enum TypedJSONText {
    static let tags: Set<String> = ["string", "integer", "double", "bool", "date", "data", "array", "dictionary"]
    /// The names people give the same types elsewhere (`defaults`' type flags, XML property lists,
    /// other languages), with the tag each means: an object of one such key is refused, not stored.
    static let aliases: [String: String] = [
        "int": "integer", "long": "integer", "uint": "integer", "number": "integer", "float": "double", "real": "double",
        "boolean": "bool", "str": "string", "text": "string", "dict": "dictionary", "object": "dictionary", "list": "array",
        "bytes": "data", "blob": "data",
    ]

    /// Whether text starts `{"<tag>":` (white space allowed around the tokens).
    static func looksTyped(_ text: ArraySlice<UInt8>) -> Bool {
        var i = text.startIndex
        func skipWhitespace() { while i < text.endIndex, TextScanning.isWhitespace(text[i]) { i += 1 } }
        guard i < text.endIndex, text[i] == UInt8(ascii: "{") else { return false }
        i += 1
        skipWhitespace()
        guard i < text.endIndex, text[i] == UInt8(ascii: "\"") else { return false }
        i += 1
        let nameStart = i
        while i < text.endIndex, text[i] != UInt8(ascii: "\"") { i += 1 }
        guard i < text.endIndex, tags.contains(String(decoding: text[nameStart..<i], as: UTF8.self)) else { return false }
        i += 1
        skipWhitespace()
        return i < text.endIndex && text[i] == UInt8(ascii: ":")
    }

    /// What each tag holds, for an error about typed JSON of the wrong shape.
    static let shapes =
        #"typed JSON is {"TAG": VALUE}: {"string": "…"}, {"integer": a whole number}, {"double": a number}, "#
        + #"{"bool": true or false}, {"date": "ISO 8601"}, {"data": "base64"}, {"array": [typed values]}, "#
        + #"{"dictionary": {"key": typed value}}"#

    static func decode(_ bytes: [UInt8]) throws -> PropertyListValue {
        var parser = JSONTextParser(bytes)
        _ = try parser.document()  // syntax, with line and column
        do {
            let value = try JSONDecoder().decode(PropertyListValue.self, from: Data(bytes))
            guard BinaryCodec.fitsNestingLimit(value) else {
                throw PropertyListFormatError("typed JSON: values nest deeper than \(BinaryCodec.maximumDepth) levels")
            }
            return value
        } catch let error as DecodingError {
            let context: DecodingError.Context
            switch error {
            case .dataCorrupted(let c), .keyNotFound(_, let c), .typeMismatch(_, let c), .valueNotFound(_, let c): context = c
            @unknown default: throw PropertyListFormatError("typed JSON: \(error)")
            }
            let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw PropertyListFormatError("typed JSON: \(context.debugDescription) (at $\(path)); \(shapes)")
        }
    }
}

/// A JSON reader (RFC 8259) straight to `PropertyListValue`, for plain JSON and as the syntax
/// check before typed JSON.
private struct JSONTextParser {
    private let bytes: [UInt8]
    private var i = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func document() throws -> PropertyListValue {
        let value = try self.value(depth: 0)
        skipWhitespace()
        guard i == bytes.count else { throw failure("unexpected \(TextScanning.describe(bytes, i)) after the JSON value", at: i) }
        return value
    }

    private func failure(_ message: String, at offset: Int) -> PropertyListFormatError {
        PropertyListFormatError("JSON: \(message) at \(TextScanning.location(bytes, offset))")
    }

    private mutating func skipWhitespace() {
        while i < bytes.count, TextScanning.isWhitespace(bytes[i]) { i += 1 }
    }

    private mutating func value(depth: Int) throws -> PropertyListValue {
        skipWhitespace()
        guard depth < BinaryCodec.maximumDepth else {
            throw failure("values nest deeper than \(BinaryCodec.maximumDepth) levels", at: i)
        }
        guard i < bytes.count else { throw failure("expected a value, found the end of the text", at: i) }
        switch bytes[i] {
        case UInt8(ascii: "{"):
            let start = i
            i += 1
            var object: [String: PropertyListValue] = [:]
            skipWhitespace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
                i += 1
                return .dictionary(object)
            }
            while true {
                skipWhitespace()
                let keyOffset = i
                guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else {
                    throw failure("expected a key in double quotes, found \(TextScanning.describe(bytes, i))", at: i)
                }
                let key = try string()
                skipWhitespace()
                guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else {
                    throw failure("expected ':' after the key \"\(key)\", found \(TextScanning.describe(bytes, i))", at: i)
                }
                i += 1
                guard object.updateValue(try value(depth: depth + 1), forKey: key) == nil else {
                    throw failure("duplicate key \"\(key)\"", at: keyOffset)
                }
                skipWhitespace()
                guard i < bytes.count else { throw failure("unterminated object", at: start) }
                if bytes[i] == UInt8(ascii: ",") {
                    i += 1
                } else if bytes[i] == UInt8(ascii: "}") {
                    i += 1
                    return .dictionary(object)
                } else {
                    throw failure("expected ',' or '}', found \(TextScanning.describe(bytes, i))", at: i)
                }
            }
        case UInt8(ascii: "["):
            let start = i
            i += 1
            var array: [PropertyListValue] = []
            skipWhitespace()
            if i < bytes.count, bytes[i] == UInt8(ascii: "]") {
                i += 1
                return .array(array)
            }
            while true {
                array.append(try value(depth: depth + 1))
                skipWhitespace()
                guard i < bytes.count else { throw failure("unterminated array", at: start) }
                if bytes[i] == UInt8(ascii: ",") {
                    i += 1
                } else if bytes[i] == UInt8(ascii: "]") {
                    i += 1
                    return .array(array)
                } else {
                    throw failure("expected ',' or ']', found \(TextScanning.describe(bytes, i))", at: i)
                }
            }
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            let start = i
            try literal("null")
            throw failure("null is not a property-list value (leave the key out instead)", at: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try number()
        default:
            throw failure("expected a value, found \(TextScanning.describe(bytes, i))", at: i)
        }
    }

    private mutating func literal(_ word: String) throws {
        guard bytes[i...].starts(with: word.utf8) else {
            throw failure("expected a value, found \(TextScanning.describe(bytes, i))", at: i)
        }
        i += word.utf8.count
    }

    private mutating func number() throws -> PropertyListValue {
        let start = i
        func digits() -> Int {
            let from = i
            while i < bytes.count, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") { i += 1 }
            return i - from
        }
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        let integerStart = i
        let integerDigits = digits()
        guard integerDigits > 0 else { throw failure("malformed number", at: start) }
        guard integerDigits == 1 || bytes[integerStart] != UInt8(ascii: "0") else {
            throw failure("a number must not have leading zeros", at: start)
        }
        var isInteger = true
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            isInteger = false
            guard digits() > 0 else { throw failure("malformed number: digits must follow '.'", at: start) }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            isInteger = false
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw failure("malformed number: digits must follow the exponent", at: start) }
        }
        let text = String(decoding: bytes[start..<i], as: UTF8.self)
        if isInteger {
            guard let int = Int(text) else {
                throw failure("the integer \(text) does not fit in 64 bits (write \(text).0 for a double)", at: start)
            }
            return .integer(int)
        }
        guard let double = Double(text), double.isFinite else {
            throw failure("the number \(text) is out of the range of a double", at: start)
        }
        return .double(double)
    }

    private mutating func string() throws -> String {
        let start = i
        i += 1
        var out: [UInt8] = []
        while true {
            guard i < bytes.count else { throw failure("unterminated string", at: start) }
            let byte = bytes[i]
            if byte == UInt8(ascii: "\"") {
                i += 1
                return String(decoding: out, as: UTF8.self)
            }
            if byte < 0x20 {
                throw failure("control character \(TextScanning.describe(bytes, i)) in a string (escape it, e.g. \\n)", at: i)
            }
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                i += 1
                continue
            }
            let escapeStart = i
            i += 1
            guard i < bytes.count else { throw failure("unterminated string", at: start) }
            let escape = bytes[i]
            i += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                let unit = try hex4(escapeStart)
                if UTF16.isLeadSurrogate(unit) {
                    guard bytes[i...].starts(with: "\\u".utf8) else {
                        throw failure("unpaired surrogate \\u\(String(unit, radix: 16))", at: escapeStart)
                    }
                    i += 2
                    let low = try hex4(escapeStart)
                    guard UTF16.isTrailSurrogate(low) else {
                        throw failure("unpaired surrogate \\u\(String(unit, radix: 16))", at: escapeStart)
                    }
                    let scalar = Unicode.Scalar(0x10000 + (UInt32(unit - 0xD800) << 10) + UInt32(low - 0xDC00))!
                    TextScanning.append(scalar, to: &out)
                    continue
                }
                guard !UTF16.isTrailSurrogate(unit) else {
                    throw failure("unpaired surrogate \\u\(String(unit, radix: 16))", at: escapeStart)
                }
                TextScanning.append(Unicode.Scalar(unit)!, to: &out)
            default:
                throw failure("unknown escape \\\(String(decoding: [escape], as: UTF8.self))", at: escapeStart)
            }
        }
    }

    private mutating func hex4(_ escapeStart: Int) throws -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard i < bytes.count, let digit = TextScanning.hexValue(bytes[i]) else {
                throw failure("\\u must be followed by four hex digits", at: escapeStart)
            }
            value = value << 4 | UInt16(digit)
            i += 1
        }
        return value
    }
}

/// Plain JSON for people and scripts, written by hand so that integers stay integers (`3`, not
/// `3.0`) and the layout is the same on every platform.
enum PlainJSONText {
    static func write(_ value: PropertyListValue, indent: Int, into out: inout String) {
        switch value {
        case .string(let string):
            quote(string, into: &out)
        case .integer(let int):
            out += String(int)
        case .double(let double):
            if double.isFinite {
                out += "\(double)"
            } else {
                quote(double.isNaN ? "nan" : double > 0 ? "inf" : "-inf", into: &out)
            }
        case .bool(let bool):
            out += bool ? "true" : "false"
        case .date(let date):
            quote(TypedJSONDate.format(date) ?? "\(date)", into: &out)
        case .data(let data):
            quote(data.base64EncodedString(), into: &out)
        case .array(let elements):
            guard !elements.isEmpty else {
                out += "[]"
                return
            }
            let inner = String(repeating: " ", count: (indent + 1) * 2)
            out += "[\n"
            for (index, element) in elements.enumerated() {
                out += inner
                write(element, indent: indent + 1, into: &out)
                out += index == elements.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: " ", count: indent * 2) + "]"
        case .dictionary(let dictionary):
            guard !dictionary.isEmpty else {
                out += "{}"
                return
            }
            let inner = String(repeating: " ", count: (indent + 1) * 2)
            let entries = dictionary.sortedForPropertyList
            out += "{\n"
            for (index, entry) in entries.enumerated() {
                out += inner
                quote(entry.key, into: &out)
                out += " : "
                write(entry.value, indent: indent + 1, into: &out)
                out += index == entries.count - 1 ? "\n" : ",\n"
            }
            out += String(repeating: " ", count: indent * 2) + "}"
        }
    }

    private static func quote(_ string: String, into out: inout String) {
        out += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{08}": out += "\\b"
            case "\u{0C}": out += "\\f"
            case _ where scalar.value < 0x20:
                out += "\\u" + TextScanning.zeroPadded(String(scalar.value, radix: 16), width: 4)
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
