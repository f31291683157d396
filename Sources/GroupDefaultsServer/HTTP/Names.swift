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

    /// Why `name` is refused as a new account's name, or nil: besides `problem`'s rules, no
    /// control character (a name is printed in lists, where a line break or an escape would forge
    /// lines) and no space at either end (`' '` and `'ana '` would pass for `ana` in a list).
    /// Accounts made before this rule keep working; no new one breaks it.
    package static func accountProblem(with name: String) -> String? {
        if let problem = problem(with: name, kind: "account") { return problem }
        if name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
            return "the account name must not contain control characters"
        }
        if name.first?.isWhitespace == true || name.last?.isWhitespace == true {
            return "the account name must not begin or end with a space"
        }
        return nil
    }
}
