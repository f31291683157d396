import Glibc

/// The rule for a file that holds a secret (a token, a key, a password, a pairing code): only its
/// owner may read it, so no permission bit of its group or of others is set. Every tool that reads
/// such a file asks here, and says the same thing when the rule is broken.
package enum PrivateFileRule {
    /// The permission bits a private file must not have: any of its group's or others'.
    package static let forbiddenBits: UInt32 = 0o077

    /// Whether a file of mode `mode` (`st_mode`) keeps the rule.
    package static func isPrivate(mode: UInt32) -> Bool { mode & forbiddenBits == 0 }

    /// What is wrong with the file at `path` of mode `mode` (`st_mode`), said for a person ("PATH can be
    /// read by its group or others (mode 644); run chmod 600 PATH"), or nil when it keeps the
    /// rule. `what` names the file in the sentence ("the token file"), when given.
    package static func exposure(of path: String, mode: UInt32, what: String? = nil) -> String? {
        guard !isPrivate(mode: mode) else { return nil }
        let bits = String(mode & 0o777, radix: 8)
        return "\(what.map { "\($0) " } ?? "")\(path) can be read by its group or others (mode \(bits)); run chmod 600 \(path)"
    }

    /// `exposure(of:mode:what:)` for the file at `path` as it is now; nil too when it cannot be
    /// examined (missing: the caller's read reports that).
    package static func exposure(of path: String, what: String? = nil) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return exposure(of: path, mode: info.st_mode, what: what)
    }
}
