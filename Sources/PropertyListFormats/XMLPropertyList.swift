import Foundation
import GroupDefaultsWire

/// Apple's XML property-list format, written and read here.
///
/// The writer follows Apple's layout (tabs, `<data>` as wrapped base64, keys sorted); a carriage
/// return in a string is written `&#13;` so that XML readers, which turn a raw one into a line
/// feed, keep it. A string or key holding a character XML 1.0 cannot hold, raw or as a character
/// reference (U+0000–U+0008, U+000B, U+000C, U+000E–U+001F, U+FFFE, U+FFFF), is refused, naming
/// where it is and the character: written raw it makes a file that XML parsers (expat, Python's
/// `plistlib`, libxml2) refuse as not well-formed, so the value would not survive the trip
/// anywhere else. (The reader takes such characters, raw or as references, as others write them.) `<date>` holds whole seconds (UTC, `2026-11-21T10:00:00Z`,
/// proleptic Gregorian, years 0000 to 9999): fractions are dropped (rounded down, as Apple does).
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
        try check(value, at: Location(topLevelKey: nil, path: ""))
        var out = header
        try write(value, indent: 0, into: &out)
        out += "</plist>\n"
        return out
    }

    /// A suite's entries, sorted, as a top-level `<dict>`.
    static func encode(entries: [(key: String, value: PropertyListValue)]) throws -> String {
        for (key, value) in entries {
            try check(key: key, at: Location(topLevelKey: nil, path: ""))
            try check(value, at: Location(topLevelKey: key, path: ""))
        }
        var out = header
        try write(entries: entries, indent: 0, into: &out)
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
            try write(entries: dictionary.sortedForPropertyList, indent: indent, into: &out)
        }
    }

    /// A `<dict>` of `entries` (sorted), at `indent` (its own indentation already written).
    private static func write(entries: [(key: String, value: PropertyListValue)], indent: Int, into out: inout String) throws {
        let tabs = String(repeating: "\t", count: indent)
        guard !entries.isEmpty else {
            out += "<dict/>\n"
            return
        }
        out += "<dict>\n"
        for (key, element) in entries {
            out += tabs + "\t<key>" + escaped(key) + "</key>\n"
            try write(element, indent: indent + 1, into: &out)
        }
        out += tabs + "</dict>\n"
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

    /// `2026-11-21T10:00:00Z`, the date rounded down to the second (`check` refused any other).
    private static func dateText(_ date: Date) throws -> String {
        guard let text = TypedJSONDate.formatWholeSeconds(date) else {
            throw PropertyListFormatError(
                "XML property list: <date> carries years 0000 to 9999; this date is \(date.timeIntervalSince1970) s from 1970"
            )
        }
        return text
    }

    /// Whether XML 1.0 can hold `scalar` in a document, raw or as a character reference (its
    /// `Char` production; surrogates are no `Unicode.Scalar`).
    static func isXMLCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x0A, 0x0D, 0x20...0xFFFD, 0x1_0000...: true
        default: false
        }
    }

    /// Where a value being written is: the suite's key it belongs to, and the path inside it.
    private struct Location {
        var topLevelKey: String?
        var path: String

        func appending(_ step: String) -> Location { Location(topLevelKey: topLevelKey, path: path + step) }

        /// `the value of "bell"`, `the value of "prefs" at ["inner"][2]`, `the value at [2]`.
        var valueDescription: String {
            switch (topLevelKey, path.isEmpty) {
            case (let key?, true): "the value of \"\(key)\""
            case (let key?, false): "the value of \"\(key)\" at \(path)"
            case (nil, true): "the value"
            case (nil, false): "the value at \(path)"
            }
        }
    }

    /// Refuses what an XML property list cannot hold (see `XMLPropertyList`), naming where it is,
    /// before anything is written.
    private static func check(_ value: PropertyListValue, at location: Location) throws {
        switch value {
        case .string(let string):
            if let bad = string.unicodeScalars.first(where: { !isXMLCharacter($0) }) {
                throw refusal("\(location.valueDescription) holds \(codePoint(bad))")
            }
        case .date(let date):
            if TypedJSONDate.formatWholeSeconds(date) == nil {
                throw PropertyListFormatError(
                    "XML property list: \(location.valueDescription) is a date outside years 0000 to 9999 "
                        + "(\(date.timeIntervalSince1970) s from 1970), which <date> cannot hold; a binary property list holds it",
                    formatsThatHoldIt: [.binary]
                )
            }
        case .array(let elements):
            for (index, element) in elements.enumerated() { try check(element, at: location.appending("[\(index)]")) }
        case .dictionary(let dictionary):
            for (key, element) in dictionary.sortedForPropertyList {
                try check(key: key, at: location)
                try check(element, at: location.appending("[\"\(key)\"]"))
            }
        case .integer, .double, .bool, .data:
            break
        }
    }

    /// Refuses a dictionary key (a suite's own when `location` has no key) XML cannot hold.
    private static func check(key: String, at location: Location) throws {
        guard let bad = key.unicodeScalars.first(where: { !isXMLCharacter($0) }) else { return }
        let whose = location.topLevelKey == nil && location.path.isEmpty ? "" : " in \(location.valueDescription)"
        throw refusal("the key \"\(key)\"\(whose) holds \(codePoint(bad))")
    }

    private static func refusal(_ what: String) -> PropertyListFormatError {
        PropertyListFormatError(
            "XML property list: \(what), which XML 1.0 cannot hold, raw or as a character reference; "
                + "a binary property list or typed JSON holds it",
            formatsThatHoldIt: [.binary, .json]
        )
    }

    /// `U+0001`.
    private static func codePoint(_ scalar: Unicode.Scalar) -> String {
        "U+" + TextScanning.zeroPadded(String(scalar.value, radix: 16, uppercase: true), width: 4)
    }

    static func decode(_ bytes: [UInt8], keepingTopLevelEntries: Bool = false) throws -> PropertyListTopLevel {
        var reader = XMLReader(bytes, keepingTopLevelEntries: keepingTopLevelEntries)
        let value = try reader.document()
        return reader.topLevelEntries.map { .entries($0) } ?? .value(value)
    }
}

/// A recursive-descent reader for XML property lists (see `XMLPropertyList`).
private struct XMLReader {
    private let bytes: [UInt8]
    private var i = 0
    /// Whether a top-level `<dict>` is read as a suite's entries (`topLevelEntries`), whose keys
    /// may be canonically equivalent.
    private let keepingTopLevelEntries: Bool
    private(set) var topLevelEntries: [(key: String, value: PropertyListValue)]?

    init(_ bytes: [UInt8], keepingTopLevelEntries: Bool) {
        self.bytes = bytes
        self.keepingTopLevelEntries = keepingTopLevelEntries
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
        guard depth < PropertyListValue.maximumDecodingDepth else {
            throw failure("values nest deeper than \(PropertyListValue.maximumDecodingDepth) levels", at: tag.offset)
        }
        switch tag.name {
        case "dict": return try dictionary(tag, depth: depth)
        case "array": return try array(tag, depth: depth)
        case "string": return .string(tag.isEmpty ? "" : try text(of: tag))
        case "integer": return try integer(tag)
        case "real": return try real(tag)
        case "true", "false": return try boolean(tag)
        case "date": return try date(tag)
        case "data": return try data(tag)
        case "key": throw failure("<key> outside a <dict>", at: tag.offset)
        case "plist": throw failure("<plist> inside a value", at: tag.offset)
        default: throw failure("unknown element <\(tag.name)>", at: tag.offset)
        }
    }

    /// `<dict>`: `<key>` and value pairs, each key once (compared as bytes). At the top level of
    /// a suite (`keepingTopLevelEntries`) the entries go to `topLevelEntries`, and the value
    /// returned has none; elsewhere two canonically equivalent keys are refused.
    private mutating func dictionary(_ tag: Tag, depth: Int) throws -> PropertyListValue {
        var dictionary = DictionaryEntries()
        func finished() throws -> PropertyListValue {
            if depth == 0, keepingTopLevelEntries {
                topLevelEntries = dictionary.entries
                return .dictionary([:])
            }
            return .dictionary(try dictionary.dictionary { failure($0, at: tag.offset) })
        }
        guard !tag.isEmpty else { return try finished() }
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
            guard dictionary.append(key, try element(valueTag, depth: depth + 1)) else {
                throw failure("duplicate key \"\(key)\"", at: keyTag.offset)
            }
        }
        try closeTag("dict", openedAt: tag.offset)
        return try finished()
    }

    /// `<array>`: values in order.
    private mutating func array(_ tag: Tag, depth: Int) throws -> PropertyListValue {
        var array: [PropertyListValue] = []
        guard !tag.isEmpty else { return .array(array) }
        while true {
            try skipMisc()
            if atCloseTag { break }
            array.append(try element(try openTag(expecting: "a value or </array>"), depth: depth + 1))
        }
        try closeTag("array", openedAt: tag.offset)
        return .array(array)
    }

    /// `<integer>`: decimal or `0x` hex, signed, within 64 bits.
    private mutating func integer(_ tag: Tag) throws -> PropertyListValue {
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
    }

    /// `<real>`: a number, or `nan` and the infinities.
    private mutating func real(_ tag: Tag) throws -> PropertyListValue {
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
    }

    /// `<true/>` or `<false/>` (or with nothing between their tags).
    private mutating func boolean(_ tag: Tag) throws -> PropertyListValue {
        if !tag.isEmpty {
            guard try trimmedText(of: tag).isEmpty else { throw failure("<\(tag.name)> must be empty", at: tag.offset) }
        }
        return .bool(tag.name == "true")
    }

    /// `<date>`: whole seconds, UTC.
    private mutating func date(_ tag: Tag) throws -> PropertyListValue {
        let text = try trimmedText(of: tag)
        guard let date = TypedJSONDate.parse(text) else {
            throw failure("<date>\(text)</date> is not a date such as 2026-11-21T10:00:00Z", at: tag.offset)
        }
        return .date(date)
    }

    /// `<data>`: base64, white space ignored, padding optional.
    private mutating func data(_ tag: Tag) throws -> PropertyListValue {
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
