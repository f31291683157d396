import Foundation
import GroupDefaultsWire

/// What a restore keeps from the store it replaces rather than taking it from the backup: the
/// tokens (active and revoked), the console's operators and the audit log. A backup is older than
/// the store it replaces; its tokens, operators and accounts are the security state of that time,
/// and putting them back would make revoked tokens work again, bring back deleted accounts and
/// removed operators, stop the tokens made since, and erase the records of all of it.
package struct KeptSecurityState: Sendable {
    /// Every token of the current store, as it is.
    package var tokens: [StoredToken]
    /// The current store's operators (sessions are not kept: each operator signs in again).
    package var operators: [(name: String, value: [UInt8])]
    /// The current store's audit log, oldest first.
    package var audit: [AuditRecord]

    /// Reads the state to keep from `store`, the store about to be replaced.
    package static func read(from store: some TokenStore & ConsoleRecordStore & AuditStore) async throws -> KeptSecurityState {
        KeptSecurityState(
            tokens: try await store.tokens(account: nil),
            operators: try await store.consoleRecords(.operator),
            audit: try await store.auditRecords(account: nil, since: nil, limit: .max)
        )
    }

    /// Puts the state into `restored`, the backup's copy before it takes the store's place: each
    /// account that the kept audit log says was deleted after the backup is deleted again, then its
    /// tokens, operators and audit log are replaced and its sessions dropped (so an account made
    /// again since its deletion keeps its new tokens, and its data of before the deletion stays
    /// deleted). The backup's time is its newest audit record (a backup has no other clock:
    /// `backup` records itself only after the copy; a backup without records counts every
    /// deletion, and deleting again an account the backup does not hold changes nothing). Returns
    /// how many accounts were deleted again.
    package func apply(to restored: some TokenStore & ConsoleRecordStore & AuditStore & AccountStore) async throws -> Int {
        let backupTime = try await restored.auditRecords(account: nil, since: nil, limit: 1).last?.time
        var deletedAgain = 0
        for account in deletedSince(backupTime) {
            if try await restored.deleteAccount(account) { deletedAgain += 1 }
        }
        try await restored.replaceTokens(with: tokens)
        for kind in ConsoleRecordKind.allCases {
            for record in try await restored.consoleRecords(kind) { _ = try await restored.deleteConsoleRecord(kind, name: record.name) }
        }
        for record in operators {
            _ = try await restored.putConsoleRecord(.operator, name: record.name, value: record.value, onlyIfNew: false)
        }
        try await restored.replaceAudit(with: audit)
        return deletedAgain
    }

    /// The accounts deleted after `time` (at any time, for nil), once each.
    func deletedSince(_ time: Date?) -> [String] {
        var accounts: [String] = []
        for record in audit where record.act == .accountDelete && record.outcome == nil {
            guard let account = record.account, time.map({ record.time > $0 }) ?? true, !accounts.contains(where: account.isSameName(as:)) else {
                continue
            }
            accounts.append(account)
        }
        return accounts
    }
}
