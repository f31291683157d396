/// What suite and account names may be: 1–255 UTF-8 bytes, no NUL, no '/' (the store keys both
/// with NUL as a separator; '/' would make paths ambiguous).
public enum Names {
    public static let maximumBytes = 255

    /// Why `name` is refused, or nil.
    public static func problem(with name: String, kind: String) -> String? {
        let bytes = name.utf8.count
        if bytes == 0 { return "a \(kind) name must not be empty" }
        if bytes > maximumBytes { return "a \(kind) name takes at most \(maximumBytes) bytes, this one \(bytes)" }
        if name.utf8.contains(0) { return "a \(kind) name must not contain NUL" }
        if name.contains("/") { return "a \(kind) name must not contain '/'" }
        return nil
    }
}
