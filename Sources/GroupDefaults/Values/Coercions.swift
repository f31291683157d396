import Foundation

/// UserDefaults' reading rules: what each typed getter returns for a value stored as another type,
/// as Foundation's `UserDefaults` answers on this platform (measured against it, value by value, by
/// `FoundationDifferentialTests`).
///
/// - A string reads as a number the way `NSString` reads one: leading blanks skipped, then the
///   longest prefix that spells a number (`integerValue`: a sign and decimal digits, clamped to
///   `Int`; `doubleValue`: also a fraction and an exponent; never hexadecimal, `nan` or `inf`), and
///   as a boolean as `boolValue` does: `Y`, `y`, `T` or `t` first, or a sign, zeros, blanks and a
///   digit 1 to 9. A string with no such prefix reads as 0 or false (nil here, so that
///   typed keys can report it).
/// - A number reads as a string as Swift prints it (`42.0`, `0.1`, `1e+16`), a boolean as `1` or
///   `0`; a floating-point number reads as an integer truncated toward zero, and one beyond `Int`
///   (or NaN, an infinity) as `Int.min`, as the processor's conversion gives it.
extension PropertyListValue {
    var coercedInteger: Int? {
        switch self {
        case .integer(let v): return v
        case .double(let v): return Self.truncated(v)
        case .bool(let v): return v ? 1 : 0
        case .string(let v): return NumberPrefix.integer(v)
        default: return nil
        }
    }

    var coercedDouble: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .double(let v): return v
        case .bool(let v): return v ? 1 : 0
        case .string(let v): return NumberPrefix.double(v)
        default: return nil
        }
    }

    var coercedBool: Bool? {
        switch self {
        case .bool(let v): return v
        case .integer(let v): return v != 0
        case .double(let v): return v != 0
        case .string(let v): return NumberPrefix.bool(v)
        default: return nil
        }
    }

    /// Consuming: a stored string is moved out of the value, not copied (a retain and a release
    /// per `string(forKey:)`).
    var coercedString: String? {
        consuming get {
            switch consume self {
            case .string(let v): return v
            case .integer(let v): return String(v)
            case .double(let v): return "\(v)"
            case .bool(let v): return v ? "1" : "0"
            default: return nil
            }
        }
    }

    /// A string holding a URL with a scheme reads as that whole URL (Foundation on Linux keeps only
    /// the path); any other string is a file path, with `~` expanded, as `UserDefaults` does.
    var coercedURL: URL? {
        switch self {
        case .string(let v):
            guard !v.isEmpty else { return nil }
            // A URL has a scheme before its colon (`":"` has none: a path, as Foundation reads it).
            if let url = URL(string: v), url.scheme?.isEmpty == false { return url }
            return URL(fileURLWithPath: (v as NSString).expandingTildeInPath)
        case .data(let v):
            return String(data: v, encoding: .utf8).flatMap { PropertyListValue.string($0).coercedURL }
        default:
            return nil
        }
    }

    /// `v` truncated toward zero, or `Int.min` for NaN, an infinity or a value beyond `Int` (what
    /// x86-64's conversion, and so Foundation here, gives).
    private static func truncated(_ v: Double) -> Int {
        guard v.isFinite, v > -0x1p63 - 1, v < 0x1p63 else { return .min }
        return Int(v)
    }
}

/// `NSString`'s `integerValue`, `doubleValue` and `boolValue`, as Foundation reads them here: the
/// rules are Foundation's; this is our own reading of them, nil where Foundation gives 0 or false
/// for want of any number or boolean.
enum NumberPrefix {
    /// Blanks skipped before an integer or a boolean, and around an integer's sign: every Unicode
    /// white space and line break, and U+200B ZERO WIDTH SPACE (Foundation counts it as a space).
    private static func skipped(_ c: Unicode.Scalar) -> Bool { c.properties.isWhitespace || c == "\u{200B}" }
    /// Blanks skipped before a floating-point number: the same but line breaks.
    private static func skippedBeforeDouble(_ c: Unicode.Scalar) -> Bool {
        (c.properties.isWhitespace && !Character(c).isNewline) || c == "\u{200B}"
    }

    private static func isDigit(_ c: Unicode.Scalar) -> Bool { c >= "0" && c <= "9" }

    static func integer(_ text: String) -> Int? {
        var scalars = Substring(text).unicodeScalars.drop(while: skipped)
        let negative = scalars.first == "-"
        if negative || scalars.first == "+" { scalars = scalars.dropFirst().drop(while: skipped) }
        guard let first = scalars.first, isDigit(first) else { return nil }
        var value = 0
        for c in scalars {
            guard isDigit(c) else { break }
            let digit = Int(c.value - 48)
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = negative ? times.subtractingReportingOverflow(digit) : times.addingReportingOverflow(digit)
            if o1 || o2 { return negative ? .min : .max }
            value = sum
        }
        return value
    }

    static func double(_ text: String) -> Double? {
        var scalars = Substring(text).unicodeScalars.drop(while: skippedBeforeDouble)
        var spelled = ""
        if let sign = scalars.first, sign == "-" || sign == "+" {
            spelled.unicodeScalars.append(sign)
            scalars = scalars.dropFirst().drop(while: skippedBeforeDouble)
        }
        var digits = 0
        func take(_ set: (Unicode.Scalar) -> Bool) -> Int {
            var count = 0
            while let c = scalars.first, set(c) {
                spelled.unicodeScalars.append(c)
                scalars = scalars.dropFirst()
                count += 1
            }
            return count
        }
        digits += take(isDigit)
        if scalars.first == "." {
            spelled += "."
            scalars = scalars.dropFirst()
            digits += take(isDigit)
        }
        guard digits > 0 else { return nil }
        if let e = scalars.first, e == "e" || e == "E" {
            // An exponent without digits spoils the whole number (Foundation reads 0).
            spelled += "e"
            scalars = scalars.dropFirst()
            if let sign = scalars.first, sign == "-" || sign == "+" {
                spelled.unicodeScalars.append(sign)
                scalars = scalars.dropFirst()
            }
            guard take(isDigit) > 0 else { return nil }
        }
        return spelled.withCString { strtod($0, nil) }
    }

    static func bool(_ text: String) -> Bool? {
        let scalars = Substring(text).unicodeScalars.drop(while: skipped)
        guard let first = scalars.first else { return nil }
        switch first {
        case "Y", "y", "T", "t": return true
        case "N", "n", "F", "f": return false
        default: break
        }
        var rest = scalars
        if first == "-" || first == "+" { rest = rest.dropFirst().drop(while: skipped) }
        guard let digit = rest.first, isDigit(digit) else { return nil }
        // Zeros, then blanks ("0 9" is true, "0 09" false), then a digit 1 to 9.
        return rest.drop { $0 == "0" }.drop(while: skipped).first.map { $0 >= "1" && $0 <= "9" } ?? false
    }
}
