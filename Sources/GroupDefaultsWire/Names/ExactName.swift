/// A name as the bytes it is made of: two `ExactName`s are equal when their UTF-8 bytes are, and
/// hash and order by those bytes.
///
/// Swift's `String ==` is canonical equivalence: `"caf\u{E9}"` and `"cafe\u{301}"` are one string
/// to it, and so are `"\u{212A}im"` (KELVIN SIGN) and `"Kim"`. That is right for text and wrong for
/// identity: LMDB, PostgreSQL and Apple's property lists keep both spellings as two records, so a
/// rule that decides who may do what, or which record is meant, must compare what the stores
/// compare. Wherever a name decides identity (an account, an operator, a suite, a key, a device
/// name), compare or key by `ExactName`, never by `String`:
///
/// ```swift
/// ExactName("caf\u{E9}") == ExactName("cafe\u{301}")   // false: two keys
/// var owners: Set<ExactName> = [ExactName("Kim")]
/// owners.contains(ExactName("\u{212A}im"))             // false: another account
/// ```
public struct ExactName: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The name's text, exactly as given.
    public let text: String

    /// The name `text`, as its bytes.
    public init(_ text: String) {
        self.text = text
    }

    /// The name `value`, as its bytes.
    public init(stringLiteral value: String) {
        self.text = value
    }

    /// Whether the two names are the same bytes of UTF-8.
    public static func == (a: ExactName, b: ExactName) -> Bool {
        a.text.isSameName(as: b.text)
    }

    /// Hashes the name's bytes as one buffer (and their count, so that no name is a prefix of
    /// another's hash input): keys of every push and every registered-default lookup are hashed.
    public func hash(into hasher: inout Hasher) {
        var text = self.text  // `withUTF8` may make a bridged string native: a copy's, not ours
        text.withUTF8 { bytes in
            hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            hasher.combine(bytes.count)
        }
    }

    /// Byte order, as LMDB and PostgreSQL's `COLLATE "C"` order keys.
    public static func < (a: ExactName, b: ExactName) -> Bool {
        a.text.utf8.lexicographicallyPrecedes(b.text.utf8)
    }

    /// The name's text.
    public var description: String { text }
}

extension String {
    /// This string as a name compared by its bytes (`ExactName`).
    public var exact: ExactName { ExactName(self) }

    /// Whether this string and `other` are the same bytes of UTF-8: the comparison for names
    /// (`ExactName`), never `==`, which is canonical equivalence.
    public func isSameName(as other: String) -> Bool {
        utf8.count == other.utf8.count && utf8.elementsEqual(other.utf8)
    }
}

extension Optional where Wrapped == String {
    /// Whether both are nil, or both are the same bytes of UTF-8 (`String.isSameName(as:)`).
    public func isSameName(as other: String?) -> Bool {
        switch (self, other) {
        case (nil, nil): true
        case (let a?, let b?): a.isSameName(as: b)
        default: false
        }
    }
}
