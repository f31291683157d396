import Foundation
import GroupDefaultsWire

extension Membership {
    /// The text a member device's suite keeps of whose suite it is (`SyncSettings.shared`): owner,
    /// suite, role and, when known, the member's own account, a line each; a newline inside a name
    /// is kept as a NUL, which no name may hold.
    var storedText: String {
        ([owner, suite, role.rawValue] + (account.map { [$0] } ?? [])).map { $0.replacingOccurrences(of: "\n", with: "\u{0}") }
            .joined(separator: "\n")
    }

    /// The membership a stored text names (three lines, without the account, from the first
    /// version of sharing); nil for a text this version cannot read.
    init?(storedText text: String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.replacingOccurrences(of: "\u{0}", with: "\n") }
        guard lines.count == 3 || lines.count == 4, let role = SuiteRole(rawValue: lines[2]), role != .owner else { return nil }
        self.init(owner: lines[0], suite: lines[1], role: role, account: lines.count == 4 ? lines[3] : nil)
    }
}
