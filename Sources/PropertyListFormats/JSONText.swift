import Foundation
import GroupDefaultsWire

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
        guard case .value(let value) = try decode(bytes, keepingTopLevelEntries: false) else { preconditionFailure("entries only when asked") }
        return value
    }

    /// The typed JSON in `bytes`; with `keepingTopLevelEntries`, a top-level `{"dictionary": {…}}`
    /// as its entries, every key kept as its bytes. Foundation's `JSONDecoder` keeps one of two
    /// keys that are canonically equivalent, so the syntax pass (`JSONTextParser`) refuses them in
    /// every object but the suite's, and that one's values are decoded one by one.
    static func decode(_ bytes: [UInt8], keepingTopLevelEntries: Bool) throws -> PropertyListTopLevel {
        var parser = JSONTextParser(bytes, keepingSuiteEntries: keepingTopLevelEntries)
        let syntax = try parser.document()  // syntax, with line and column
        if let suite = parser.suiteEntries, case .dictionary(let root) = syntax, root.count == 1 {
            var entries: [(key: String, value: PropertyListValue)] = []
            entries.reserveCapacity(suite.count)
            for (key, range) in suite {
                entries.append((key, try decodeValue(bytes[range], at: ".dictionary.\(key)")))
            }
            return .entries(entries)
        }
        return .value(try decodeValue(bytes[...], at: ""))
    }

    private static func decodeValue(_ bytes: ArraySlice<UInt8>, at path: String) throws -> PropertyListValue {
        do {
            let value = try JSONDecoder().decode(PropertyListValue.self, from: Data(bytes))
            guard PropertyListValue.fitsDecodingDepth(value) else {
                throw PropertyListFormatError("typed JSON: values nest deeper than \(PropertyListValue.maximumDecodingDepth) levels")
            }
            return value
        } catch let error as DecodingError {
            let context: DecodingError.Context
            switch error {
            case .dataCorrupted(let c), .keyNotFound(_, let c), .typeMismatch(_, let c), .valueNotFound(_, let c): context = c
            @unknown default: throw PropertyListFormatError("typed JSON: \(error)")
            }
            let inner = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            throw PropertyListFormatError("typed JSON: \(context.debugDescription) (at $\(path)\(inner)); \(shapes)")
        }
    }

    /// A suite's entries as typed JSON, `{"dictionary": {…}}`, laid out as
    /// `propertyListData(format: .json)` lays out a dictionary (pretty-printed, keys sorted by
    /// their bytes), every key kept as its bytes.
    static func encode(entries: [(key: String, value: PropertyListValue)]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        func encoded<T: Encodable>(_ value: T) throws -> String {
            do {
                return String(decoding: try encoder.encode(value), as: UTF8.self)
            } catch let error as EncodingError {
                guard case .invalidValue(_, let context) = error else { throw PropertyListFormatError("typed JSON: \(error)") }
                throw PropertyListFormatError("typed JSON: \(context.debugDescription)")
            }
        }
        guard !entries.isEmpty else { return Data((try encoded(PropertyListValue.dictionary([:])) + "\n").utf8) }
        var out = "{\n  \"dictionary\" : {\n"
        let sorted = entries.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        for (index, entry) in sorted.enumerated() {
            // Its lines one level deeper (an empty line, of an empty container, stays empty).
            let value = try encoded(entry.value).split(separator: "\n", omittingEmptySubsequences: false)
                .enumerated().map { $0 == 0 || $1.isEmpty ? String($1) : "    " + $1 }.joined(separator: "\n")
            out += "    " + (try encoded(entry.key)) + " : " + value + (index == sorted.count - 1 ? "\n" : ",\n")
        }
        out += "  }\n}\n"
        return Data(out.utf8)
    }
}

/// A JSON reader (RFC 8259) straight to `PropertyListValue`, for plain JSON and as the syntax
/// check before typed JSON.
struct JSONTextParser {
    private let bytes: [UInt8]
    private var i = 0
    /// Whether a top-level `{"dictionary": {…}}` is a suite, whose keys may be canonically
    /// equivalent (`suiteEntries`).
    private let keepingSuiteEntries: Bool
    /// Whether the value about to be read is that suite's object.
    private var atSuiteObject = false
    /// The suite's keys and where each one's value lies in the text, in order.
    private(set) var suiteEntries: [(key: String, range: Range<Int>)]?

    init(_ bytes: [UInt8], keepingSuiteEntries: Bool = false) {
        self.bytes = bytes
        self.keepingSuiteEntries = keepingSuiteEntries
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
        guard depth < PropertyListValue.maximumDecodingDepth else {
            throw failure("values nest deeper than \(PropertyListValue.maximumDecodingDepth) levels", at: i)
        }
        guard i < bytes.count else { throw failure("expected a value, found the end of the text", at: i) }
        let isSuite = atSuiteObject
        atSuiteObject = false
        switch bytes[i] {
        case UInt8(ascii: "{"):
            return try object(depth: depth, isSuite: isSuite)
        case UInt8(ascii: "["):
            return try array(depth: depth)
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

    /// An object, at its `{`: keys in double quotes, each once (compared as bytes). Two keys that
    /// are canonically equivalent are refused, but in the suite's object (`isSuite`), whose
    /// entries are kept in `suiteEntries` instead (the value returned has none).
    private mutating func object(depth: Int, isSuite: Bool = false) throws -> PropertyListValue {
        let start = i
        i += 1
        var object = DictionaryEntries()
        var suite: [(key: String, range: Range<Int>)] = []
        func finished() throws -> PropertyListValue {
            if isSuite {
                suiteEntries = suite
                return .dictionary([:])
            }
            return .dictionary(try object.dictionary { failure($0, at: start) })
        }
        skipWhitespace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") {
            i += 1
            return try finished()
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
            // The top-level object's "dictionary" member is the suite, in typed JSON.
            atSuiteObject = keepingSuiteEntries && depth == 0 && suiteEntries == nil && key.isSameName(as: "dictionary")
            skipWhitespace()
            let valueStart = i
            let element = try value(depth: depth + 1)
            atSuiteObject = false
            guard object.append(key, element) else {
                throw failure("duplicate key \"\(key)\"", at: keyOffset)
            }
            if isSuite { suite.append((key, valueStart..<i)) }
            skipWhitespace()
            guard i < bytes.count else { throw failure("unterminated object", at: start) }
            if bytes[i] == UInt8(ascii: ",") {
                i += 1
            } else if bytes[i] == UInt8(ascii: "}") {
                i += 1
                return try finished()
            } else {
                throw failure("expected ',' or '}', found \(TextScanning.describe(bytes, i))", at: i)
            }
        }
    }

    /// An array, at its `[`.
    private mutating func array(depth: Int) throws -> PropertyListValue {
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
            quote(TypedJSONDate.valueText(date) ?? "\(date)", into: &out)
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
            write(entries: Array(dictionary), indent: indent, into: &out)
        }
    }

    /// Several suites (sorted) as an object of objects; every key kept as its bytes.
    static func write(domains: [(key: String, entries: [(key: String, value: PropertyListValue)])], into out: inout String) {
        guard !domains.isEmpty else {
            out += "{}"
            return
        }
        out += "{\n"
        for (index, domain) in domains.enumerated() {
            out += "  "
            quote(domain.key, into: &out)
            out += " : "
            write(entries: domain.entries, indent: 1, into: &out)
            out += index == domains.count - 1 ? "\n" : ",\n"
        }
        out += "}"
    }

    /// A dictionary's entries as an object, sorted; every key kept as its bytes.
    static func write(entries unsorted: [(key: String, value: PropertyListValue)], indent: Int, into out: inout String) {
        guard !unsorted.isEmpty else {
            out += "{}"
            return
        }
        let inner = String(repeating: " ", count: (indent + 1) * 2)
        let entries = unsorted.sortedForPropertyList
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
