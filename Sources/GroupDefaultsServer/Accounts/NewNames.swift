package import GroupDefaultsWire

/// The one rule for naming an account or an operator when something is made for it (a token, an
/// operator): a name that is an existing one's exact bytes is that one; any other name is a new
/// name, mapped once (`Username.map`), checked (`Username.problem(withNew:kind:)`), and refused if
/// it looks like an existing name (`Username.collision(of:among:)`), so that no two accounts or
/// operators pass for one another. `groupdefaults-server token create`, `admin add` and the
/// console's forms call it; nothing is made when it throws.
package enum NewNames {
    /// Why a name is refused, in one sentence, and whether it is because it looks like an existing
    /// one (HTTP 409) or breaks the rule of names (422).
    package struct Refusal: Error, CustomStringConvertible, Sendable {
        package var description: String
        package var isCollision: Bool
    }

    /// The name `given` stands for among `existing` names of `kind` (`.account` or `.operator`):
    /// `given` itself if it is one of them (byte for byte), else its mapped form as a new name.
    package static func resolve(_ given: String, kind: NameKind, existing: [String]) throws(Refusal) -> (name: String, isNew: Bool) {
        if existing.contains(where: given.isSameName(as:)) { return (given, false) }
        if let problem = Username.problem(withNew: given, kind: kind) { throw Refusal(description: problem, isCollision: false) }
        let mapped = Username.map(given)
        if let same = existing.first(where: mapped.isSameName(as:)) {
            throw Refusal(
                description:
                    "\(shown(given)) is another spelling of the existing \(kind.rawValue) \(shown(same)): give that name exactly, as `\(kind == .account ? "accounts list" : "admin list")` prints it",
                isCollision: true
            )
        }
        if let other = Username.collision(of: mapped, among: existing) {
            throw Refusal(
                description:
                    "\(shown(given)) looks like the existing \(kind.rawValue) \(shown(other)) (names that differ only in case, width or Unicode spelling are one name): choose another name"
                    + (kind == .account ? ", or give that one exactly to add a token to it" : ""),
                isCollision: true
            )
        }
        return (mapped, true)
    }

    /// `'name'` as an error shows it, with its code points when it is not plain ASCII (two names
    /// that look alike on screen are told apart by them).
    package static func shown(_ name: String) -> String {
        let quoted = "'\(printable(name))'"
        guard !name.unicodeScalars.allSatisfy({ $0.isASCII }) else { return quoted }
        return quoted + " (" + name.unicodeScalars.map { NameKind.codePoint($0) }.joined(separator: " ") + ")"
    }

    /// What an operator is told of stored names of `kind` that look alike (`Username.lookAlike`):
    /// names made before this rule, which it no longer allows. One line per group, saying what to do.
    package static func lookAlikeNotes(_ names: [String], kind: NameKind) -> [String] {
        Username.lookAlikeGroups(names).map { group in
            let listed = group.map(shown).joined(separator: " and ")
            let remedy =
                kind == .account
                ? "accounts export then accounts delete the one that should not exist, or keep both knowingly"
                : "admin remove the one that should not exist"
            return
                "\(kind.rawValue)s \(listed) look alike: each is its own \(kind.rawValue) (names are compared byte for byte), but people can take one for the other; \(remedy)"
        }
    }
}
