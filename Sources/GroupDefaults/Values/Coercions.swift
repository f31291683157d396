import Foundation

/// UserDefaults' reading rules: what each typed getter returns for a value stored as another type.
///
/// As on Apple's platforms: numbers and booleans convert among themselves, a string that spells a
/// number or a boolean reads as one ("42", "0.5", "YES", "true"), a number reads as a string, and a
/// boolean reads as the string "1" or "0". Anything else yields the getter's empty answer
/// (0, false, nil).
extension PropertyListValue {
    var coercedInteger: Int? {
        switch self {
        case .integer(let v): return v
        case .double(let v):
            if v.isNaN { return nil }
            if v >= 0x1p63 { return .max }
            if v < -0x1p63 { return .min }
            return Int(v)
        case .bool(let v): return v ? 1 : 0
        case .string(let v):
            let text = Self.trimmed(v)
            if let int = Int(text) { return int }
            if let double = Double(text), double.isFinite { return PropertyListValue.double(double).coercedInteger }
            return Self.booleanWord(text).map { $0 ? 1 : 0 }
        default: return nil
        }
    }

    var coercedDouble: Double? {
        switch self {
        case .integer(let v): return Double(v)
        case .double(let v): return v
        case .bool(let v): return v ? 1 : 0
        case .string(let v):
            let text = Self.trimmed(v)
            return Double(text) ?? Self.booleanWord(text).map { $0 ? 1 : 0 }
        default: return nil
        }
    }

    var coercedBool: Bool? {
        switch self {
        case .bool(let v): return v
        case .integer(let v): return v != 0
        case .double(let v): return v != 0
        case .string(let v):
            let text = Self.trimmed(v)
            if let word = Self.booleanWord(text) { return word }
            if let double = Double(text) { return double != 0 }
            return nil
        default: return nil
        }
    }

    var coercedString: String? {
        switch self {
        case .string(let v): return v
        case .integer(let v): return String(v)
        case .double(let v): return v.rounded() == v && abs(v) < 1e15 ? String(Int(v)) : String(v)
        case .bool(let v): return v ? "1" : "0"
        default: return nil
        }
    }

    /// A string holding a URL with a scheme reads as that whole URL (Foundation on Linux keeps only
    /// the path); any other string is a file path, with `~` expanded, as `UserDefaults` does.
    var coercedURL: URL? {
        switch self {
        case .string(let v):
            guard !v.isEmpty else { return nil }
            if let url = URL(string: v), url.scheme != nil { return url }
            return URL(fileURLWithPath: (v as NSString).expandingTildeInPath)
        case .data(let v):
            return String(data: v, encoding: .utf8).flatMap { PropertyListValue.string($0).coercedURL }
        default:
            return nil
        }
    }

    /// `text` without leading and trailing spaces and tabs (a cheap check first: most strings have none).
    private static func trimmed(_ text: String) -> Substring {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.first, let last = text.last, blank(first) || blank(last) else { return text[...] }
        let start = text.firstIndex { !blank($0) } ?? text.endIndex
        let end = text.lastIndex { !blank($0) }.map { text.index(after: $0) } ?? start
        return text[start..<max(start, end)]
    }

    private static func booleanWord(_ text: Substring) -> Bool? {
        guard text.utf8.count <= 5 else { return nil }
        switch text.lowercased() {
        case "yes", "true", "y": return true
        case "no", "false", "n": return false
        default: return nil
        }
    }
}
