import Foundation

/// Any JSON value; integers kept apart from other numbers, so that a document survives the round
/// trip (`"badge": 3` stays `3`) and two texts compare by meaning.
package enum JSONValue: Equatable, Codable, Sendable, CustomStringConvertible {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number that decodes as a 64-bit integer.
    case integer(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object.
    case object([String: JSONValue])

    /// Decodes any JSON value.
    package init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let int = try? container.decode(Int64.self) {
            self = .integer(int)
        } else if let double = try? container.decode(Double.self) {
            self = .double(double)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value as it was decoded.
    package func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let bool): try container.encode(bool)
        case .integer(let int): try container.encode(int)
        case .double(let double): try container.encode(double)
        case .string(let string): try container.encode(string)
        case .array(let array): try container.encode(array)
        case .object(let object): try container.encode(object)
        }
    }

    /// Parses a JSON text.
    package static func parse(_ text: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// An object's member; nil for a missing key or a value that is not an object.
    package subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    /// A compact rendering for test messages, object keys sorted.
    package var description: String {
        switch self {
        case .null: "null"
        case .bool(let bool): "\(bool)"
        case .integer(let int): "\(int)"
        case .double(let double): "\(double)"
        case .string(let string): string.debugDescription
        case .array(let elements): "[" + elements.map(\.description).joined(separator: ", ") + "]"
        case .object(let object):
            "{" + object.sorted { $0.key < $1.key }.map { "\($0.key.debugDescription): \($0.value)" }.joined(separator: ", ") + "}"
        }
    }
}
