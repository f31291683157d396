import Foundation
import GroupDefaultsWire

/// Conversions between `PropertyListValue` and the untyped values of the UserDefaults vocabulary.
extension PropertyListValue {
    /// The value for an `Any` handed to `set(_:forKey:)`: the property-list types, their Foundation
    /// counterparts (`NSNumber`, `NSString`, `NSArray`, `NSDictionary`, …), other integer and
    /// floating-point types, and `URL` (see `init(url:)`). Returns nil for anything else, an
    /// `NSObject` or a closure say.
    public init?(any value: Any) {
        switch value {
        // String first: the commonest value, and a cast to the enum below costs a conformance
        // lookup that a string never passes (a tenth of a string `set` in a profile).
        case let v as String: self = .string(v)
        case let v as PropertyListValue: self = v
        case let v as Bool where !(value is NSNumber): self = .bool(v)
        case let v as NSNumber:
            guard let converted = PropertyListValue(number: v) else { return nil }
            self = converted
        case let v as Int: self = .integer(v)
        case let v as Double: self = .double(v)
        case let v as Float: self.init(float: v)
        case let v as any BinaryInteger:
            guard let int = Int(exactly: v) else { return nil }
            self = .integer(int)
        case let v as any BinaryFloatingPoint: self = .double(Double(v))
        case let v as Date: self = .date(v)
        case let v as Data: self = .data(v)
        case let v as URL: self.init(url: v)
        case let v as NSDictionary where type(of: value) is NSDictionary.Type:
            // Before `[String: Any]`, which an NSDictionary casts to, keeping one of two keys Swift
            // strings take for one (canonically equivalent): such a dictionary is refused.
            var dictionary: [String: Any] = [:]
            for (key, element) in v {
                guard let key = key as? String, dictionary.updateValue(element, forKey: key) == nil else { return nil }
            }
            guard let c = PropertyListValue(any: dictionary) else { return nil }
            self = c
        case let v as [Any]:
            var array: [PropertyListValue] = []
            array.reserveCapacity(v.count)
            for element in v {
                guard let converted = PropertyListValue(any: element) else { return nil }
                array.append(converted)
            }
            self = .array(array)
        case let v as [String: Any]:
            var dictionary: [String: PropertyListValue] = [:]
            for (key, element) in v {
                guard let converted = PropertyListValue(any: element) else { return nil }
                dictionary[key] = converted
            }
            self = .dictionary(dictionary)
        case let v as NSString: self = .string(v as String)
        case let v as NSDate: self = .date(v as Date)
        case let v as NSData: self = .data(v as Data)
        case let v as NSArray:
            guard let c = PropertyListValue(any: Array(v)) else { return nil }
            self = c
        default:
            return nil
        }
    }

    /// Why `init?(any:)` refuses `value`, for a person: an unsigned number above `Int.max` (which
    /// Foundation's `UserDefaults` keeps, but reads back as 0 from every getter), or a type that is
    /// not a property-list type.
    static func refusal(of value: Any) -> String {
        if let (first, second) = equivalentKeys(in: value) {
            return "the value " + EquivalentKeys.words(first, second) + " (an NSDictionary can; rename one of them)"
        }
        let tooLarge: Bool
        if let number = value as? NSNumber {
            tooLarge = ["Q", "L", "I", "S"].contains(String(cString: number.objCType)) && number.uint64Value > UInt64(Int.max)
        } else if let integer = value as? any BinaryInteger {
            tooLarge = Int(exactly: integer) == nil
        } else {
            tooLarge = false
        }
        if tooLarge {
            return "\(value) is above Int.max, which no property-list integer holds (Foundation's UserDefaults keeps it but reads it "
                + "back as 0): store it as a String or a Double"
        }
        return "a value of type \(type(of: value)) cannot be stored; use String, Int, Double, Bool, Date, Data, URL, "
            + "or arrays and [String: Any] dictionaries of them"
    }

    /// Two keys of an `NSDictionary` in `value` (at any depth) that Swift's `String ==` takes for
    /// one, which `init?(any:)` refuses rather than keep one of them.
    private static func equivalentKeys(in value: Any) -> (String, String)? {
        switch value {
        case let dictionary as NSDictionary where type(of: value) is NSDictionary.Type:
            var keys: Set<String> = []
            for (key, element) in dictionary {
                if let key = key as? String {
                    let (inserted, earlier) = keys.insert(key)
                    if !inserted { return (earlier, key) }
                }
                if let found = equivalentKeys(in: element) { return found }
            }
        case let dictionary as [String: Any]:
            for element in dictionary.values {
                if let found = equivalentKeys(in: element) { return found }
            }
        case let array as [Any]:
            for element in array {
                if let found = equivalentKeys(in: element) { return found }
            }
        default:
            break
        }
        return nil
    }

    /// A URL as `set(_:forKey:)` stores it: a file URL as its path, as Foundation's `UserDefaults`
    /// stores it (so that `url(forKey:)` reads it back as the same file URL), any other whole, as
    /// its absolute string (where Foundation on Linux keeps only the path).
    init(url: URL) {
        self = .string(url.isFileURL ? url.path : url.absoluteString)
    }

    /// A `Float` as the one floating-point type holds it: the double nearest the decimal the float
    /// prints as, so that it reads back as the same text (`12.34`, not `12.34000015258789`) and the
    /// same `Float`, as Foundation's `UserDefaults` gives it.
    init(float v: Float) {
        self = .double(v.isFinite ? Double("\(v)") ?? Double(v) : Double(v))
    }

    /// nil for an unsigned number above `Int.max`, which no property-list integer can hold.
    private init?(number: NSNumber) {
        switch String(cString: number.objCType) {
        case "c", "B":
            // `NSNumber(value: true)` reports "c" on Linux; only 0 and 1 are booleans.
            let int = number.intValue
            self = int == 0 || int == 1 ? .bool(int == 1) : .integer(int)
        case "f": self.init(float: number.floatValue)
        case "d": self = .double(number.doubleValue)
        case "Q", "L", "I", "S":
            guard number.uint64Value <= UInt64(Int.max) else { return nil }
            self = .integer(number.intValue)
        default: self = .integer(number.intValue)
        }
    }

    /// The value as `object(forKey:)` returns it: `String`, `Int`, `Double`, `Bool`, `Date`, `Data`,
    /// `[Any]` or `[String: Any]`.
    var anyValue: Any {
        switch self {
        case .string(let v): v
        case .integer(let v): v
        case .double(let v): v
        case .bool(let v): v
        case .date(let v): v
        case .data(let v): v
        case .array(let v): v.map(\.anyValue)
        case .dictionary(let v): v.mapValues(\.anyValue)
        }
    }
}
