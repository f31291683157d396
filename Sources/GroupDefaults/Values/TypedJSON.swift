import Foundation

/// `PropertyListValue`'s `Codable` form: the design's lossless typed JSON, one single-key object
/// per value. Doubles that JSON cannot carry (NaN, ±infinity) travel as the strings "nan",
/// "inf" and "-inf"; dates as ISO 8601 with milliseconds, in UTC.
extension PropertyListValue: Codable {
    private enum Tag: String, CodingKey, CaseIterable {
        case string, integer, double, bool, date, data, array, dictionary
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Tag.self)
        guard container.allKeys.count == 1, let tag = container.allKeys.first else {
            throw DecodingError.dataCorrupted(.init(
                codingPath: decoder.codingPath,
                debugDescription: "a typed JSON value is an object with exactly one of the keys "
                    + Tag.allCases.map(\.rawValue).joined(separator: ", ")))
        }
        switch tag {
        case .string: self = .string(try container.decode(String.self, forKey: tag))
        case .integer: self = .integer(try container.decode(Int.self, forKey: tag))
        case .double:
            if let text = try? container.decode(String.self, forKey: tag) {
                switch text {
                case "nan": self = .double(.nan)
                case "inf": self = .double(.infinity)
                case "-inf": self = .double(-.infinity)
                default:
                    throw DecodingError.dataCorruptedError(
                        forKey: tag, in: container, debugDescription: "expected a number, \"nan\", \"inf\" or \"-inf\"")
                }
            } else {
                self = .double(try container.decode(Double.self, forKey: tag))
            }
        case .bool: self = .bool(try container.decode(Bool.self, forKey: tag))
        case .date:
            let text = try container.decode(String.self, forKey: tag)
            guard let date = TypedJSONDate.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: tag, in: container, debugDescription: "expected an ISO 8601 date such as 2026-11-21T10:00:00.000Z, got \(text)")
            }
            self = .date(date)
        case .data:
            let text = try container.decode(String.self, forKey: tag)
            guard let data = Data(base64Encoded: text) else {
                throw DecodingError.dataCorruptedError(forKey: tag, in: container, debugDescription: "expected base64")
            }
            self = .data(data)
        case .array: self = .array(try container.decode([PropertyListValue].self, forKey: tag))
        case .dictionary: self = .dictionary(try container.decode([String: PropertyListValue].self, forKey: tag))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Tag.self)
        switch self {
        case .string(let v): try container.encode(v, forKey: .string)
        case .integer(let v): try container.encode(v, forKey: .integer)
        case .double(let v):
            if v.isNaN {
                try container.encode("nan", forKey: .double)
            } else if v.isInfinite {
                try container.encode(v > 0 ? "inf" : "-inf", forKey: .double)
            } else {
                try container.encode(v, forKey: .double)
            }
        case .bool(let v): try container.encode(v, forKey: .bool)
        case .date(let v): try container.encode(TypedJSONDate.format(v), forKey: .date)
        case .data(let v): try container.encode(v.base64EncodedString(), forKey: .data)
        case .array(let v): try container.encode(v, forKey: .array)
        case .dictionary(let v): try container.encode(v, forKey: .dictionary)
        }
    }
}

enum TypedJSONDate {
    static func format(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().dateSeparator(.dash)
            .time(includingFractionalSeconds: true).timeSeparator(.colon).timeZone(separator: .omitted))
    }

    static func parse(_ text: String) -> Date? {
        if let date = try? Date(text, strategy: .iso8601.year().month().day().dateSeparator(.dash)
            .time(includingFractionalSeconds: true).timeSeparator(.colon).timeZone(separator: .omitted)) {
            return date
        }
        return try? Date(text, strategy: .iso8601)
    }
}
