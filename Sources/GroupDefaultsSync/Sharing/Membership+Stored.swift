import Foundation
import GroupDefaultsWire

extension Membership {
    /// The text a member device's suite keeps of whose suite it is (`SyncSettings.shared`): three
    /// lines, owner, suite and role; a newline inside a name is kept as a NUL, which no name may
    /// hold.
    var storedText: String { [owner, suite, role.rawValue].map { $0.replacingOccurrences(of: "\n", with: "\u{0}") }.joined(separator: "\n") }

    /// The membership a stored text names; nil for a text this version cannot read.
    init?(storedText text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.replacingOccurrences(of: "\u{0}", with: "\n") }
        guard lines.count == 3, let role = SuiteRole(rawValue: lines[2]), role != .owner else { return nil }
        self.init(owner: lines[0], suite: lines[1], role: role)
    }
}
