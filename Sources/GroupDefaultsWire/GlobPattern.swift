/// A glob over names: `*` matches any run of characters (dots and slashes included), every other
/// character matches itself. The syntax of a token's suite patterns and of a synced suite's
/// local-only keys (`groupdefaults-sync configure --exclude 'draft.*'`).
///
/// ```swift
/// let drafts = try GlobPattern("draft.*")
/// drafts.matches("draft.message")   // true
/// drafts.matches("drafts")          // false
/// ```
public struct GlobPattern: Sendable, Hashable, CustomStringConvertible {
    /// The pattern as written.
    public let text: String
    private let scalars: [Unicode.Scalar]

    /// The longest pattern accepted, in bytes of UTF-8 (a key's own limit).
    public static let maximumLength = 511

    /// A pattern from its text.
    ///
    /// - Throws: `GlobPattern.Invalid` for an empty pattern, one longer than `maximumLength` bytes,
    ///   or one holding a control character (a line break could never match a key).
    public init(_ text: String) throws(Invalid) {
        guard !text.isEmpty else { throw Invalid(pattern: text, reason: "a pattern must not be empty") }
        guard text.utf8.count <= Self.maximumLength else {
            throw Invalid(pattern: text, reason: "a pattern takes at most \(Self.maximumLength) bytes of UTF-8")
        }
        if let control = text.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw Invalid(
                pattern: text,
                reason: "a pattern must not hold a control character (U+\(String(control.value, radix: 16, uppercase: true)))"
            )
        }
        self.text = text
        self.scalars = Array(text.unicodeScalars)
    }

    /// Whether `name` matches the whole pattern.
    public func matches(_ name: String) -> Bool {
        Self.matches(scalars, Array(name.unicodeScalars))
    }

    /// Whether `name` matches `pattern`, taken as it is (no validation: a suite pattern stored by an
    /// older version is still honoured).
    public static func matches(_ pattern: String, _ name: String) -> Bool {
        matches(Array(pattern.unicodeScalars), Array(name.unicodeScalars))
    }

    /// Greedy wildcard matching, backtracking to the last `*`: linear in practice, quadratic at worst.
    private static func matches(_ p: [Unicode.Scalar], _ s: [Unicode.Scalar]) -> Bool {
        var pi = 0
        var si = 0
        var star = -1
        var mark = 0
        while si < s.count {
            if pi < p.count, p[pi] != "*", p[pi] == s[si] {
                pi += 1
                si += 1
            } else if pi < p.count, p[pi] == "*" {
                star = pi
                mark = si
                pi += 1
            } else if star >= 0 {
                pi = star + 1
                mark += 1
                si = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    /// The pattern as written.
    public var description: String { text }

    /// Why a pattern was refused.
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        /// The pattern refused.
        public var pattern: String
        /// What is wrong with it, in a sentence.
        public var reason: String

        /// "the pattern '…' is refused: …".
        public var description: String { "the pattern '\(pattern)' is refused: \(reason)" }
    }
}
