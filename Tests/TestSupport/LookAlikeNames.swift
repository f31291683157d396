/// Pairs of names that are two names (their bytes differ) but look alike or are even equal as Swift
/// strings (canonical equivalence): the generator of every test that checks that names are compared
/// by their bytes.
public enum LookAlikeNames {
    /// How the second name of a pair is made from the first.
    public enum Kind: CaseIterable, Sendable {
        /// `é` as one code point, and as `e` + U+0301 (NFC and NFD): equal Swift strings.
        case decomposed
        /// `K` and KELVIN SIGN (U+212A): equal Swift strings.
        case kelvin
        /// `Å` (U+00C5) and ANGSTROM SIGN (U+212B): equal Swift strings.
        case angstrom
        /// A letter and its fullwidth form (`a`, U+FF41).
        case fullwidth
        /// `fi` and the ligature U+FB01.
        case ligature
        /// A zero-width character inserted (U+200B, U+200C, U+200D, U+2060 or U+FEFF).
        case zeroWidth
        /// One letter in the other case.
        case letterCase
    }

    /// One pair of each kind, with the accounts of the measured attacks among them.
    public static let pairs: [(String, String)] = [
        ("jos\u{E9}", "jose\u{301}"),
        ("Kim", "\u{212A}im"),
        ("\u{C5}sa", "\u{212B}sa"),
        ("ana", "\u{FF41}na"),
        ("file", "\u{FB01}le"),
        ("ana", "an\u{200B}a"),
        ("ana", "Ana"),
    ]

    /// Keys that Swift's `String ==` takes for one or that look alike, one pair of each kind (a
    /// key may stand in two pairs: a test that writes several pairs to one suite makes them unique,
    /// with a prefix).
    public static let keyPairs: [(String, String)] = [
        ("caf\u{E9}", "cafe\u{301}"),  // NFC / NFD
        ("\u{C5}", "\u{212B}"),  // Å / ANGSTROM SIGN (canonically equivalent)
        ("\u{212B}", "A\u{30A}"),  // ANGSTROM SIGN / A + COMBINING RING ABOVE
        ("\u{212A}", "K"),  // KELVIN SIGN / K (canonically equivalent)
        ("\u{FF4B}", "k"),  // FULLWIDTH k / k
        ("\u{FB01}", "fi"),  // ligature / two letters
        ("ab", "a\u{200B}b"),  // ZERO WIDTH SPACE inserted
        ("Sound", "sound"),  // case
    ]

    /// A random pair: a short name of ASCII letters and digits, and its look-alike of a random kind.
    public static func pair(using rng: inout some RandomNumberGenerator) -> (String, String) {
        pair(of: Kind.allCases.randomElement(using: &rng)!, using: &rng)
    }

    /// A random pair of `kind`.
    public static func pair(of kind: Kind, using rng: inout some RandomNumberGenerator) -> (String, String) {
        let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var base = String((0..<Int.random(in: 2...8, using: &rng)).map { _ in letters.randomElement(using: &rng)! })
        func insert(_ text: String) -> String {
            let index = base.index(base.startIndex, offsetBy: Int.random(in: 0...base.count, using: &rng))
            var copy = base
            copy.insert(contentsOf: text, at: index)
            return copy
        }
        func spliced(_ a: String, _ b: String) -> (String, String) {
            let index = base.index(base.startIndex, offsetBy: Int.random(in: 0...base.count, using: &rng))
            var first = base
            var second = base
            first.insert(contentsOf: a, at: index)
            second.insert(contentsOf: b, at: second.index(second.startIndex, offsetBy: base.distance(from: base.startIndex, to: index)))
            return (first, second)
        }
        switch kind {
        case .decomposed: return spliced("\u{E9}", "e\u{301}")
        case .kelvin: return spliced("K", "\u{212A}")
        case .angstrom: return spliced("\u{C5}", "\u{212B}")
        case .fullwidth:
            base = "a" + base
            let scalar = Unicode.Scalar(base.unicodeScalars.first!.value + 0xFEE0)!
            return (base, String(scalar) + base.dropFirst())
        case .ligature: return spliced("fi", "\u{FB01}")
        case .zeroWidth:
            let invisible = ["\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{FEFF}"].randomElement(using: &rng)!
            let original = base
            return (original, insert(invisible))
        case .letterCase:
            base = "q" + base
            return (base, "Q" + base.dropFirst())
        }
    }
}
