import Foundation
public import GroupDefaultsWire

/// Where a suite that another account shares lives on the server: its owner's account, its name
/// there (which the local suite's name may differ from), and this account's role. Stored with the
/// suite's sync settings (`SyncSettings.shared`) when a device joins it with an invitation.
public struct SharedSuite: Sendable, Hashable {
    /// The account that owns the suite (sent as the `owner` parameter of its requests).
    public var owner: String
    /// The suite's name on the server, as its owner names it.
    public var suite: String
    /// This account's role: `read`, `write` or `admin`.
    public var role: SuiteRole

    /// A shared suite as described.
    public init(owner: String, suite: String, role: SuiteRole) {
        self.owner = owner
        self.suite = suite
        self.role = role
    }

    /// The text the suite's settings keep: three lines, owner, suite and role; a newline inside a
    /// name is kept as a NUL, which no name may hold.
    var storedText: String { [owner, suite, role.rawValue].map { $0.replacingOccurrences(of: "\n", with: "\u{0}") }.joined(separator: "\n") }

    /// The shared suite a stored text names; nil for a text this version cannot read.
    init?(storedText text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.replacingOccurrences(of: "\u{0}", with: "\n") }
        guard lines.count == 3, let role = SuiteRole(rawValue: lines[2]), role != .owner else { return nil }
        self.init(owner: lines[0], suite: lines[1], role: role)
    }
}
