/// The kinds of names GroupDefaults keeps, each defined once here: the characters it may hold, its
/// length, and how two compare. Every layer (the core, the tools, the sync engine, the server and
/// its console) checks a name with `problem(with:)` and compares names by their bytes
/// (`ExactName`).
///
/// | kind | bytes of UTF-8 | besides no control characters |
/// |------|----------------|-------------------------------|
/// | account | 1–255 | no `/`, no white space at either end; a new one follows `Username` |
/// | operator | 1–64 | a new one: ASCII letters, digits, `.`, `_`, `-`, `@`, and `Username`'s look-alike rule |
/// | suite | 1–255 | no `/`, not `.` or `..` |
/// | key | 1–511 (LMDB's key limit) | none: any other text, exactly its bytes |
/// | device | 1–255 | no white space at either end |
///
/// A control character here is one of Unicode's control characters (U+0000–U+001F, U+007F–U+009F,
/// among them ESC, which starts a terminal's escape sequences), a line or paragraph separator
/// (U+2028, U+2029), or a character that reorders text on screen (the bidirectional embeddings,
/// overrides and isolates, U+202A–U+202E and U+2066–U+2069): any of them can make a printed name
/// pass for another line or another name.
public enum NameKind: String, Sendable, CaseIterable {
    /// An account: whose suites, tokens and devices they are.
    case account
    /// An operator of the server's console and commands.
    case `operator`
    /// A suite: one store of settings.
    case suite
    /// A key of a suite.
    case key
    /// A device's name, as `devices list` and `token list` show it.
    case device

    /// The most bytes of UTF-8 a name of this kind takes.
    public var maximumBytes: Int {
        switch self {
        case .account, .suite, .device: 255
        case .operator: 64
        case .key: 511
        }
    }

    /// What a person calls a name of this kind in a sentence ("the account name …").
    public var noun: String {
        switch self {
        case .account: "account name"
        case .operator: "operator name"
        case .suite: "suite name"
        case .key: "key"
        case .device: "device name"
        }
    }

    /// Why `name` cannot be a name of this kind, in one sentence, or nil: the rule for every name
    /// that is written, created or named in a request. A new account's or operator's name also
    /// passes `Username.problem(withNew:kind:)`.
    public func problem(with name: String) -> String? {
        if let problem = problem(withStored: name) { return problem }
        if let scalar = name.unicodeScalars.first(where: NameKind.isControl) {
            return "the \(noun) must not contain control characters (it holds \(NameKind.codePoint(scalar)))"
        }
        switch self {
        case .account, .operator, .device:
            if name.unicodeScalars.first!.properties.isWhitespace || name.unicodeScalars.last!.properties.isWhitespace {
                return "the \(noun) must not begin or end with white space"
            }
        case .suite:
            if name == "." || name == ".." { return "the suite name must not be '.' or '..'" }
        case .key:
            break
        }
        return nil
    }

    /// Why `name` cannot even be stored as a name of this kind, or nil: its length, and for the
    /// names that storage joins with a separator, no NUL and no `/`. The rule for an account or
    /// device name that was stored before `problem(with:)` refused control characters: such a name
    /// keeps working (and is printed escaped, `printable`).
    public func problem(withStored name: String) -> String? {
        let bytes = name.utf8.count
        if bytes == 0 { return "the \(noun) must not be empty" }
        if bytes > maximumBytes { return "the \(noun) may take at most \(maximumBytes) bytes of UTF-8, this one \(bytes)" }
        switch self {
        case .account, .operator, .suite:
            if name.utf8.contains(0) { return "the \(noun) must not contain NUL" }
            if name.utf8.contains(UInt8(ascii: "/")) { return "the \(noun) must not contain '/'" }
        case .key, .device:
            break
        }
        return nil
    }

    /// Whether `scalar` is a control character in the sense above: never in a name, and escaped
    /// wherever text is printed (`Printable`).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// `U+000A`: how an error names a code point.
    public static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
