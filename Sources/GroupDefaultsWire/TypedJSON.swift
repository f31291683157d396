package import Foundation

/// `PropertyListValue`'s `Codable` form: the design's lossless typed JSON, one single-key object
/// per value. Doubles that JSON cannot carry (NaN, ±infinity) travel as the strings "nan",
/// "inf" and "-inf"; dates as ISO 8601 in UTC, to the microsecond (`TypedJSONDate`).
extension PropertyListValue: Codable {
    private enum Tag: String, CodingKey, CaseIterable {
        case string, integer, double, bool, date, data, array, dictionary
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Tag.self)
        guard container.allKeys.count == 1, let tag = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "a typed JSON value is an object with exactly one of the keys "
                        + Tag.allCases.map(\.rawValue).joined(separator: ", ")
                )
            )
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
                        forKey: tag,
                        in: container,
                        debugDescription: "expected a number, \"nan\", \"inf\" or \"-inf\""
                    )
                }
            } else {
                self = .double(try container.decode(Double.self, forKey: tag))
            }
        case .bool: self = .bool(try container.decode(Bool.self, forKey: tag))
        case .date:
            let text = try container.decode(String.self, forKey: tag)
            guard let date = TypedJSONDate.parse(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: tag,
                    in: container,
                    debugDescription: "expected an ISO 8601 date such as 2026-11-21T10:00:00.000Z, got \(text)"
                )
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
        case .date(let v):
            guard let text = TypedJSONDate.valueText(v) else {
                throw EncodingError.invalidValue(
                    v,
                    .init(
                        codingPath: container.codingPath + [Tag.date],
                        debugDescription: "typed JSON carries dates from year 0000 to 9999; this one is \(v.timeIntervalSince1970) s from 1970"
                    )
                )
            }
            try container.encode(text, forKey: .date)
        case .data(let v): try container.encode(v.base64EncodedString(), forKey: .data)
        case .array(let v): try container.encode(v, forKey: .array)
        case .dictionary(let v): try container.encode(v, forKey: .dictionary)
        }
    }
}

/// Dates in typed JSON: ISO 8601 in UTC with milliseconds, `2026-11-21T10:00:00.000Z` (a date
/// value with a fraction of a millisecond with microseconds, `2020-11-21T10:00:00.123456Z`), for
/// years 0000 to 9999 of the proleptic Gregorian calendar, as ISO 8601 and Python's `datetime`
/// count them, before 1582-10-15 too (`Date.distantPast` is 0000-12-30). Written by hand
/// (days-from-civil arithmetic): Foundation's formatters keep milliseconds only and switch to the
/// Julian calendar before 1582-10-15.
///
/// A `Date` is a `Double` of seconds since 2001: the text is the microsecond nearest to it, and
/// reading text gives the `Double` nearest to the microseconds written. So text → date → text
/// gives back the digits written (up to six) for years 1729 to 2272, where a `Double` resolves a
/// microsecond; further out a `Double` is coarser (8 µs apart in year 1, 31 µs in 9999), and the
/// text is the microsecond nearest to the one it holds, which reads back as that same `Double`.
package enum TypedJSONDate {
    /// 0000-01-01T00:00:00Z and 10000-01-01T00:00:00Z, in seconds since 2001-01-01.
    private static let firstSecond: Int64 = -63_145_526_400
    private static let endSecond: Int64 = 252_423_993_600
    /// Seconds from 1970-01-01 to 2001-01-01.
    private static let secondsFrom1970To2001: Int64 = 978_307_200

    /// The text of a date value (`PropertyListValue.date`) to the nearest microsecond: three
    /// digits when that is a whole millisecond, else six. Nil outside years 0…9999 (or not finite).
    package static func valueText(_ date: Date) -> String? {
        guard let (seconds, microseconds) = split(date, unitsPerSecond: 1_000_000) else { return nil }
        let fraction =
            microseconds % 1000 == 0
            ? "." + padded(microseconds / 1000, 3) : "." + padded(microseconds, 6)
        return text(seconds: seconds, fraction: fraction)
    }

    /// The text of a moment (a clock's time, when something happened) to the nearest millisecond,
    /// `2026-11-21T10:00:00.123Z`, or nil outside years 0…9999 (or not finite).
    package static func format(_ date: Date) -> String? {
        guard let (seconds, milliseconds) = split(date, unitsPerSecond: 1000) else { return nil }
        return text(seconds: seconds, fraction: "." + padded(milliseconds, 3))
    }

    /// The text for `date` rounded down to the whole second, `2026-11-21T10:00:00Z` (an XML
    /// property list's `<date>`), or nil outside years 0…9999 (or not finite).
    package static func formatWholeSeconds(_ date: Date) -> String? {
        let since2001 = date.timeIntervalSinceReferenceDate.rounded(.down)
        guard since2001.isFinite, since2001 >= Double(firstSecond), since2001 < Double(endSecond) else { return nil }
        return text(seconds: Int64(since2001), fraction: "")
    }

    /// The text for a moment given in milliseconds since 1970 (a server's clock, an HLC's time).
    package static func format(milliseconds: UInt64) -> String {
        let seconds = Int64(clamping: milliseconds / 1000) - secondsFrom1970To2001
        guard seconds < endSecond else { return String(milliseconds) }
        return text(seconds: seconds, fraction: "." + padded(Int64(milliseconds % 1000), 3))
    }

    /// `date` as whole seconds since 2001 and the nearest unit (a millisecond or a microsecond)
    /// after them, rounded exactly (the rounding error of `fraction * units` taken into account);
    /// nil outside years 0…9999.
    private static func split(_ date: Date, unitsPerSecond units: Int64) -> (seconds: Int64, units: Int64)? {
        let since2001 = date.timeIntervalSinceReferenceDate
        let whole = since2001.rounded(.down)
        guard whole.isFinite, whole >= Double(firstSecond), whole < Double(endSecond) else { return nil }
        let fraction = since2001 - whole  // exact
        let product = fraction * Double(units)
        let error = (-product).addingProduct(fraction, Double(units))  // fraction * units - product, exactly
        var rounded = product.rounded(.down)
        if (product - rounded - 0.5) + error >= 0 { rounded += 1 }
        var seconds = Int64(whole)
        var count = Int64(rounded)
        if count == units {
            seconds += 1
            count = 0
        }
        guard seconds < endSecond else { return nil }
        return (seconds, count)
    }

    /// `YYYY-MM-DDTHH:MM:SS` + `fraction` + `Z` for whole seconds since 2001.
    private static func text(seconds since2001: Int64, fraction: String) -> String {
        let total = since2001 + secondsFrom1970To2001
        let days = total.floorDivided(by: 86_400)
        let inDay = total - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        return "\(padded(year, 4))-\(padded(month, 2))-\(padded(day, 2))T\(padded(inDay / 3600, 2)):"
            + "\(padded(inDay / 60 % 60, 2)):\(padded(inDay % 60, 2))\(fraction)Z"
    }

    private static func padded(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`, years 0000 to 9999 once in UTC. The
    /// fraction is kept to the microsecond (a seventh digit rounds the sixth, later ones are
    /// ignored); the date is the `Double` nearest to it.
    package static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int64? {
            guard range.upperBound <= b.count else { return nil }
            var value: Int64 = 0
            for i in range {
                guard b[i] >= 48, b[i] <= 57 else { return nil }
                value = value * 10 + Int64(b[i] - 48)
            }
            return value
        }
        guard b.count >= 20, b[4] == 45, b[7] == 45, b[10] == 84 || b[10] == 116, b[13] == 58, b[16] == 58,
            let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
            (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var i = 19
        var microseconds: Int64 = 0
        if b[i] == 46 {  // '.'
            i += 1
            let start = i
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 6 {
                    microseconds = microseconds * 10 + Int64(b[i] - 48)
                } else if digits == 6, b[i] >= 53 {
                    microseconds += 1  // the seventh digit rounds (half up)
                }
                digits += 1
                i += 1
            }
            guard i > start else { return nil }
            for _ in digits..<max(digits, 6) { microseconds *= 10 }
        }
        guard i < b.count else { return nil }
        var offsetSeconds: Int64 = 0
        if b[i] == 90 || b[i] == 122 {  // 'Z'
            i += 1
        } else if b[i] == 43 || b[i] == 45, b.count == i + 6, b[i + 3] == 58,
            let h = number(i + 1..<i + 3), let m = number(i + 4..<i + 6), h < 24, m < 60
        {
            offsetSeconds = (b[i] == 43 ? 1 : -1) * (h * 3600 + m * 60)
            i += 6
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let seconds =
            days(fromCivil: year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
            - secondsFrom1970To2001
        // Within years 0…9999 (an offset can move a date out), a rounded-up 23:59:59.9999995 included.
        guard seconds >= firstSecond, seconds * 1_000_000 + microseconds < endSecond * 1_000_000 else { return nil }
        // The nearest Double to the microseconds (one rounding: the decimal text is read exactly).
        guard let since2001 = Double("\(seconds * 1_000_000 + microseconds)e-6") else { return nil }
        return Date(timeIntervalSinceReferenceDate: since2001)
    }

    private static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    private static func days(fromCivil year: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = y.floorDivided(by: 400)
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    private static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = z.floorDivided(by: 146_097)
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Int64 {
    fileprivate func floorDivided(by divisor: Int64) -> Int64 {
        let q = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? q - 1 : q
    }
}

extension PropertyListValue {
    /// The value's typed JSON as sync carries, measures and stores it: UTF-8, dictionary keys
    /// sorted, so that one value always has the same bytes. Its length is what the server's
    /// `max_value_bytes` and byte quota count (`SyncLimits`).
    ///
    /// - Throws: `EncodingError` for a date outside years 0 to 9999.
    public func typedJSON() throws -> [UInt8] {
        switch self {
        case .string, .integer, .bool:
            // The common values, written straight into bytes (the same bytes: `WireJSONTests`).
            var json = WireJSON(capacity: 16)
            try json.value(self)
            return json.bytes
        default:
            break
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return Array(try encoder.encode(self))
    }
}
