import Foundation

/// Why an entry carries no value although the key holds one (`SyncEntry.unavailable`, `"unavailable"`
/// on the wire): the server holds a value it does not serve, checked when it reads it (one stored by
/// an older version, put back from a dump, or changed behind its back), or a device received one it
/// cannot take. That key alone is unavailable; the page, event or push answer around it is served
/// as usual. A device keeps its own value of the key and reports the entry.
///
/// ```json
/// {"key": "layout", "unavailable": "too_deep", "hlc": "121…", "origin": "998…", "rev": 45}
/// ```
public enum UnavailableValue: String, Codable, Sendable, Hashable {
    /// Nested more deeply than `PropertyListValue.maximumNestingDepth`.
    case tooDeep = "too_deep"
    /// Larger than the server's value limit (`SyncLimits.maxValueBytes`).
    case tooLarge = "too_large"
    /// Not valid typed JSON (or not one line of UTF-8 JSON the server can copy into an answer).
    case damaged

    /// A newer server's reason this version does not know reads as `damaged`.
    public init(from decoder: any Decoder) throws {
        self = Self(rawValue: try decoder.singleValueContainer().decode(String.self)) ?? .damaged
    }

    /// What it means, for a person: "nested more than 100 levels deep".
    public var words: String {
        switch self {
        case .tooDeep: "nested more than \(PropertyListValue.maximumNestingDepth) levels deep"
        case .tooLarge: "larger than the server's value limit"
        case .damaged: "not valid typed JSON"
        }
    }
}

/// The check a server makes of a value's stored typed JSON before it serves it, without decoding
/// it into a value: at most `maximumBytes` bytes, one line of UTF-8 JSON (no control character,
/// so that it can be copied into an event's `data:` line), typed JSON as `PropertyListValue`
/// decodes it on a device (a double that fits a `Double`, neither overflowing nor a non-zero
/// number underflowing to zero; no lone UTF-16 surrogate in a `\u` escape; no dictionary holding
/// two keys Swift's `String ==` takes for one, the same or canonically equivalent, which a
/// device's dictionary would merge), nested no deeper than `PropertyListValue.maximumNestingDepth`.
/// What a device refuses is refused here too, as `damaged`. The scan stops at the first level
/// past the limit, so a hostile value costs no more than a legal one.
package enum StoredValueCheck {
    /// What keeps `json` from being served, or nil if it may be.
    package static func problem(typedJSON json: [UInt8], maximumBytes: Int) -> UnavailableValue? {
        if json.count > maximumBytes { return .tooLarge }
        guard String(validating: json, as: UTF8.self) != nil else { return .damaged }
        return json.withUnsafeBufferPointer { bytes in
            var reader = TypedJSONReader(bytes: bytes)
            do throws(UnavailableValue) {
                try reader.value(depth: 0)
                reader.skipSpaces()
                return reader.isAtEnd ? nil : .damaged
            } catch {
                return error
            }
        }
    }
}

extension UnavailableValue: Error {}

/// Reads typed JSON from bytes, checking its shape and depth without building anything.
private struct TypedJSONReader {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    var isAtEnd: Bool { index == bytes.count }

    private var next: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpaces() {
        while next == UInt8(ascii: " ") { index += 1 }
    }

    private mutating func expect(_ byte: UInt8) throws(UnavailableValue) {
        skipSpaces()
        guard next == byte else { throw .damaged }
        index += 1
    }

    /// Whether the next byte (after spaces) is `byte`; taken if so.
    private mutating func take(_ byte: UInt8) -> Bool {
        skipSpaces()
        guard next == byte else { return false }
        index += 1
        return true
    }

    /// One typed value (`{"tag": payload}`) inside `depth` arrays and dictionaries.
    mutating func value(depth: Int) throws(UnavailableValue) {
        try expect(UInt8(ascii: "{"))
        skipSpaces()
        let tag = String(decoding: try string(), as: UTF8.self)
        try expect(UInt8(ascii: ":"))
        skipSpaces()
        switch tag {
        case "string":
            _ = try string()
        case "date":
            guard let text = Self.text(try string()), TypedJSONDate.parse(text) != nil else { throw .damaged }
        case "data":
            guard let text = Self.text(try string()), Data(base64Encoded: text) != nil else { throw .damaged }
        case "integer":
            let text = String(decoding: try number(), as: UTF8.self)
            guard Int(text) ?? Double(text).flatMap(Int.init(exactly:)) != nil else { throw .damaged }
        case "double":
            if next == UInt8(ascii: "\"") {
                guard let text = Self.text(try string()), ["nan", "inf", "-inf"].contains(text) else { throw .damaged }
            } else {
                // As devices decode it: a number that overflows a Double, or that is not zero and
                // underflows to it, is refused.
                let json = try number()
                let text = String(decoding: json, as: UTF8.self)
                guard let double = Double(text), double.isFinite, double != 0 || Self.isZeroMantissa(json) else { throw .damaged }
            }
        case "bool":
            try literal(next == UInt8(ascii: "t") ? "true" : "false")
        case "array":
            guard depth < PropertyListValue.maximumNestingDepth else { throw .tooDeep }
            try expect(UInt8(ascii: "["))
            if !take(UInt8(ascii: "]")) {
                repeat { try value(depth: depth + 1) } while take(UInt8(ascii: ","))
                try expect(UInt8(ascii: "]"))
            }
        case "dictionary":
            guard depth < PropertyListValue.maximumNestingDepth else { throw .tooDeep }
            try expect(UInt8(ascii: "{"))
            if !take(UInt8(ascii: "}")) {
                // Keys Swift's `String ==` takes for one (the same, or canonically equivalent) would
                // be merged by a device's dictionary: refused, never served merged.
                var keys: Set<String> = []
                repeat {
                    skipSpaces()
                    guard let key = Self.text(try string()), keys.insert(key).inserted else { throw .damaged }
                    try expect(UInt8(ascii: ":"))
                    try value(depth: depth + 1)
                } while take(UInt8(ascii: ","))
                try expect(UInt8(ascii: "}"))
            }
        default:
            throw .damaged
        }
        try expect(UInt8(ascii: "}"))
    }

    /// A string's text, its escapes resolved (`\/` in base64, for one).
    private static func text(_ json: Slice<UnsafeBufferPointer<UInt8>>) -> String? {
        guard json.contains(UInt8(ascii: "\\")) else { return String(decoding: json, as: UTF8.self) }
        return try? JSONDecoder().decode(String.self, from: Data([UInt8(ascii: "\"")] + json + [UInt8(ascii: "\"")]))
    }

    /// A JSON string at `index`; its bytes between the quotes, escapes as written.
    private mutating func string() throws(UnavailableValue) -> Slice<UnsafeBufferPointer<UInt8>> {
        guard next == UInt8(ascii: "\"") else { throw .damaged }
        index += 1
        let start = index
        while let byte = next {
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return bytes[start..<index - 1]
            case UInt8(ascii: "\\"):
                index += 1
                guard let escaped = next else { throw .damaged }
                if escaped == UInt8(ascii: "u") {
                    // A UTF-16 code unit: a surrogate only as a high one followed by a low one, as
                    // devices decode it (a lone one is no character).
                    let unit = try codeUnit(at: index + 1)
                    index += 5
                    if (0xDC00...0xDFFF).contains(unit) { throw .damaged }
                    if (0xD800...0xDBFF).contains(unit) {
                        guard next == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u"),
                            (0xDC00...0xDFFF).contains(try codeUnit(at: index + 2))
                        else { throw .damaged }
                        index += 6
                    }
                } else {
                    guard Array("\"\\/bfnrt".utf8).contains(escaped) else { throw .damaged }
                    index += 1
                }
            case 0..<0x20:
                throw .damaged
            default:
                index += 1
            }
        }
        throw .damaged
    }

    /// The four hex digits at `start` as a UTF-16 code unit.
    private func codeUnit(at start: Int) throws(UnavailableValue) -> UInt16 {
        guard start + 4 <= bytes.count else { throw .damaged }
        var unit: UInt16 = 0
        for byte in bytes[start..<start + 4] {
            guard Self.isHexDigit(byte) else { throw .damaged }
            unit = unit << 4 | UInt16(Self.isDigit(byte) ? byte - UInt8(ascii: "0") : (byte | 0x20) - UInt8(ascii: "a") + 10)
        }
        return unit
    }

    /// Whether a number's digits before its exponent are all zeros (`0`, `-0.000e5`): the only
    /// numbers that may read as zero.
    private static func isZeroMantissa(_ json: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        json.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }.allSatisfy { !isDigit($0) || $0 == UInt8(ascii: "0") }
    }

    /// A JSON number at `index`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
    private mutating func number() throws(UnavailableValue) -> Slice<UnsafeBufferPointer<UInt8>> {
        let start = index
        if next == UInt8(ascii: "-") { index += 1 }
        guard let first = next, Self.isDigit(first) else { throw .damaged }
        index += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if next == UInt8(ascii: ".") {
            index += 1
            guard digitsFollow() else { throw .damaged }
        }
        if next == UInt8(ascii: "e") || next == UInt8(ascii: "E") {
            index += 1
            if next == UInt8(ascii: "+") || next == UInt8(ascii: "-") { index += 1 }
            guard digitsFollow() else { throw .damaged }
        }
        return bytes[start..<index]
    }

    private mutating func digitsFollow() -> Bool {
        guard let byte = next, Self.isDigit(byte) else { return false }
        skipDigits()
        return true
    }

    private mutating func skipDigits() {
        while let byte = next, Self.isDigit(byte) { index += 1 }
    }

    private mutating func literal(_ word: StaticString) throws(UnavailableValue) {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw .damaged }
        let matches = word.withUTF8Buffer { $0.elementsEqual(bytes[index..<index + count]) }
        guard matches else { throw .damaged }
        index += count
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }
}
