public import Foundation

/// A value a suite can store: the property-list types, as in `UserDefaults`.
///
/// ```swift
/// try defaults.write { tx in
///     try tx.set(.string("ring.caf"), forKey: "sound")
///     try tx.set(["volume": 0.8, "muted": false], forKey: "audio")
/// }
/// ```
/// Its `Codable` form is the lossless *typed JSON* of the design: `{"string":"ring.caf"}`,
/// `{"integer":3}`, `{"date":"2026-11-21T10:00:00.000Z"}`, `{"data":"<base64>"}`, and so on.
public enum PropertyListValue: Sendable, Hashable {
    case string(String)
    case integer(Int)
    case double(Double)
    case bool(Bool)
    case date(Date)
    case data(Data)
    case array([PropertyListValue])
    case dictionary([String: PropertyListValue])

    /// Shorthand for `.integer(value)`.
    public static func int(_ value: Int) -> PropertyListValue { .integer(value) }

    /// The type's name as `defaults read-type` prints it: string, integer, float, boolean, date,
    /// data, array, dictionary.
    public var typeName: String {
        switch self {
        case .string: "string"
        case .integer: "integer"
        case .double: "float"
        case .bool: "boolean"
        case .date: "date"
        case .data: "data"
        case .array: "array"
        case .dictionary: "dictionary"
        }
    }
}

// MARK: Exact accessors (no coercion; see Coercions.swift for UserDefaults' rules)

extension PropertyListValue {
    public var stringValue: String? { if case .string(let v) = self { v } else { nil } }
    public var intValue: Int? { if case .integer(let v) = self { v } else { nil } }
    public var doubleValue: Double? { if case .double(let v) = self { v } else { nil } }
    public var boolValue: Bool? { if case .bool(let v) = self { v } else { nil } }
    public var dateValue: Date? { if case .date(let v) = self { v } else { nil } }
    public var dataValue: Data? { if case .data(let v) = self { v } else { nil } }
    public var arrayValue: [PropertyListValue]? { if case .array(let v) = self { v } else { nil } }
    public var dictionaryValue: [String: PropertyListValue]? { if case .dictionary(let v) = self { v } else { nil } }
}

// MARK: Literals

extension PropertyListValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: PropertyListValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, PropertyListValue)...) {
        self = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
