import Foundation

/// The rule for a new account's or operator's name, after RFC 8265's UsernameCasePreserved profile
/// (PRECIS, RFC 8264): the name is mapped once, then checked, and refused if it looks like a name
/// that exists.
///
/// 1. **Mapping** (`map`): fullwidth and halfwidth forms become their usual width
///    (`ａｎａ` → `ana`), then the whole name is normalized to NFC (`e` + U+0301 → `é`, KELVIN
///    SIGN → `K`). Case is preserved: `Ana` stays `Ana`.
/// 2. **Characters** (`problem(withNew:kind:)`), after mapping: letters, combining marks (not
///    first) and decimal digits of any script, and the printable ASCII characters except `/` and
///    the space: PRECIS's IdentifierClass. Refused besides: characters that NFKC would change
///    (ligatures such as `ﬁ`, superscripts, circled letters), characters that render as nothing
///    (zero-width spaces and joiners, soft hyphens), non-ASCII spaces, symbols and punctuation,
///    unassigned code points. Operators take the stricter ASCII rule they always had.
/// 3. **Look-alikes** (`lookAlike`, `collision(of:among:)`): two names look alike when they are
///    equal after case folding and NFKC. A new name that looks like an existing one but is not
///    the same bytes is refused, so that `Kim`, `kim` and `\u{212A}im` cannot be three accounts.
///    This is stricter than RFC 8265, which would allow `Kim` beside `kim`: in a list or the
///    console they pass for one another.
///
/// Names stored before this rule keep working, compared by their bytes (`ExactName`);
/// `groupdefaults-server accounts list` and the server at start name those that look alike.
/// RFC 8265's bidirectional rule (RFC 5893) is not applied: right-to-left letters are letters here.
public enum Username {
    /// `name` as a new account or operator is stored: fullwidth and halfwidth forms mapped to their
    /// usual width, then NFC.
    public static func map(_ name: String) -> String {
        var widthMapped = String.UnicodeScalarView()
        for scalar in name.unicodeScalars {
            // The Halfwidth and Fullwidth Forms block: each one's compatibility decomposition is
            // its <wide> or <narrow> mapping, which is what RFC 8265 maps.
            if (0xFF00...0xFFEF).contains(scalar.value) {
                widthMapped.append(contentsOf: String(scalar).precomposedStringWithCompatibilityMapping.unicodeScalars)
            } else {
                widthMapped.append(scalar)
            }
        }
        return String(widthMapped).precomposedStringWithCanonicalMapping
    }

    /// Why `name`, once mapped (`map`), cannot name a new account or operator (`kind`), or nil.
    public static func problem(withNew name: String, kind: NameKind) -> String? {
        let mapped = map(name)
        if let problem = kind.problem(with: mapped) { return problem }
        if kind == .operator {
            let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-@".unicodeScalars)
            guard mapped.unicodeScalars.allSatisfy(allowed.contains) else {
                return "an operator's name has 1 to 64 characters: ASCII letters, digits, '.', '_', '-' and '@'"
            }
            return nil
        }
        for (index, scalar) in mapped.unicodeScalars.enumerated() {
            if let why = refusal(of: scalar, first: index == 0) {
                return "the \(kind.noun) must not contain \(why) (\(NameKind.codePoint(scalar)))"
            }
        }
        return nil
    }

    /// Why `scalar` may not stand in a new username (IdentifierClass), or nil.
    private static func refusal(of scalar: Unicode.Scalar, first: Bool) -> String? {
        if scalar.isASCII {
            return scalar == " " ? "spaces" : nil  // '/' and controls are NameKind's rules
        }
        let properties = scalar.properties
        if properties.isDefaultIgnorableCodePoint { return "characters that show as nothing" }
        if String(scalar).precomposedStringWithCompatibilityMapping.unicodeScalars.elementsEqual([scalar]) == false {
            return "compatibility characters (ligatures, superscripts, other widths and forms)"
        }
        switch properties.generalCategory {
        case .lowercaseLetter, .uppercaseLetter, .otherLetter, .modifierLetter, .decimalNumber:
            return nil
        case .nonspacingMark, .spacingMark:
            return first ? "a combining mark at its start" : nil
        case .spaceSeparator:
            return "spaces"
        case .unassigned:
            return "unassigned code points"
        default:
            return "symbols or punctuation other than ASCII's"
        }
    }

    /// The form under which two usernames look alike: mapped (`map`), case folded, then NFKC.
    public static func lookAlike(_ name: String) -> ExactName {
        ExactName(map(name).lowercased().precomposedStringWithCompatibilityMapping.lowercased().precomposedStringWithCanonicalMapping)
    }

    /// The first of `existing` that `name` looks like (`lookAlike`) without being the same bytes:
    /// the name a new `name` would be mistaken for. Nil if `name` is one of them exactly, or
    /// looks like none.
    public static func collision(of name: String, among existing: some Sequence<String>) -> String? {
        let key = lookAlike(name)
        var found: String?
        for other in existing {
            if other.isSameName(as: name) { return nil }
            if found == nil, lookAlike(other) == key { found = other }
        }
        return found
    }

    /// The names of `names` that look alike (`lookAlike`), in groups of two or more, each group and
    /// the groups in byte order: what an operator is told about names stored before this rule.
    public static func lookAlikeGroups(_ names: some Sequence<String>) -> [[String]] {
        var groups: [ExactName: Set<ExactName>] = [:]
        for name in names { groups[lookAlike(name), default: []].insert(ExactName(name)) }
        return groups.values.filter { $0.count > 1 }.map { $0.sorted().map(\.text) }.sorted { ExactName($0[0]) < ExactName($1[0]) }
    }
}
