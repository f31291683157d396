public import Foundation

/// A value a suite can store: the property-list types, as in `UserDefaults`.
///
/// ```swift
/// try defaults.write { tx in
///     try tx.set(.string("ring.caf"), forKey: "sound")
///     try tx.set(["volume": 0.8, "muted": false], forKey: "audio")
/// }
/// ```
/// Its `Codable` form is the lossless *typed JSON* that sync carries and `groupdefaults export --format json` writes: `{"string":"ring.caf"}`,
/// `{"integer":3}`, `{"date":"2026-11-21T10:00:00.000Z"}`, `{"data":"<base64>"}`, and so on.
public enum PropertyListValue: Sendable, Hashable {
    /// A string: `{"string": "ring.caf"}` in typed JSON.
    case string(String)
    /// An integer, a signed 64-bit one on the wire: `{"integer": 3}`.
    case integer(Int)
    /// A floating-point number (`float` to `defaults`); typed JSON writes NaN and the infinities as
    /// the strings "nan", "inf" and "-inf".
    case double(Double)
    /// A Boolean: `{"bool": true}`.
    case bool(Bool)
    /// A moment in time; typed JSON carries it to the millisecond, in UTC, for years 0 to 9999.
    case date(Date)
    /// Raw bytes, in base64 in typed JSON.
    case data(Data)
    /// An ordered list of values, whose types may differ.
    case array([PropertyListValue])
    /// Values by string key.
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
    /// The string, if this is a `.string`; nil for any other case (no coercion).
    public var stringValue: String? { if case .string(let v) = self { v } else { nil } }
    /// The integer, if this is an `.integer`; nil for any other case (no coercion).
    public var intValue: Int? { if case .integer(let v) = self { v } else { nil } }
    /// The double, if this is a `.double`; nil for any other case (no coercion).
    public var doubleValue: Double? { if case .double(let v) = self { v } else { nil } }
    /// The Boolean, if this is a `.bool`; nil for any other case (no coercion).
    public var boolValue: Bool? { if case .bool(let v) = self { v } else { nil } }
    /// The date, if this is a `.date`; nil for any other case (no coercion).
    public var dateValue: Date? { if case .date(let v) = self { v } else { nil } }
    /// The bytes, if this is a `.data`; nil for any other case (no coercion).
    public var dataValue: Data? { if case .data(let v) = self { v } else { nil } }
    /// The array, if this is an `.array`; nil for any other case (no coercion).
    public var arrayValue: [PropertyListValue]? { if case .array(let v) = self { v } else { nil } }
    /// The dictionary, if this is a `.dictionary`; nil for any other case (no coercion).
    public var dictionaryValue: [String: PropertyListValue]? { if case .dictionary(let v) = self { v } else { nil } }
}

// MARK: Literals

extension PropertyListValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    /// A `.string`, from a string literal.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An `.integer`, from an integer literal.
    public init(integerLiteral value: Int) { self = .integer(value) }
    /// A `.double`, from a floating-point literal.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// A `.bool`, from `true` or `false`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// An `.array`, from an array literal.
    public init(arrayLiteral elements: PropertyListValue...) { self = .array(elements) }
    /// A `.dictionary`, from a dictionary literal; of a key written twice, the last value is kept.
    public init(dictionaryLiteral elements: (String, PropertyListValue)...) {
        self = .dictionary(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
