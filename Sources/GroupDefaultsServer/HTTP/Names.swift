/// What suite and account names may be: 1–255 UTF-8 bytes, no NUL, no '/' (the store keys both
/// with NUL as a separator; '/' would make paths ambiguous).
package enum Names {
    package static let maximumBytes = 255

    /// Why `name` is refused, or nil.
    package static func problem(with name: String, kind: String) -> String? {
        let bytes = name.utf8.count
        if bytes == 0 { return "the \(kind) name must not be empty" }
        if bytes > maximumBytes { return "the \(kind) name may take at most \(maximumBytes) bytes, this one \(bytes)" }
        if name.utf8.contains(0) { return "the \(kind) name must not contain NUL" }
        if name.contains("/") { return "the \(kind) name must not contain '/'" }
        return nil
    }
}
