import Foundation
import GroupDefaultsWire

/// What a restore keeps from the store it replaces: its authority (`StoredTables`: accounts,
/// tokens, operators, members, invitations, pinned keys, key bags, pairings, devices, the audit log), never the
/// backup's. A backup is older than the store it replaces; its authority is that of its time, and
/// putting it back would make revoked tokens work again, bring back removed members, revoked
/// invitations, deleted accounts and removed operators, stop the tokens made since, and erase the
/// records of all of it.
///
/// Besides copying the tables (each backend's own: `LMDBSyncStorage.takeAuthority(from:)`,
/// PostgreSQL's `restore --prepare` and `--announce`), the data of each account that the present's
/// audit log says was deleted after the backup is deleted again, before the authority is put in.
package enum KeptAuthority {
    /// Deletes again, in `restored` (the backup's copy before it takes the store's place), each
    /// account deleted since the backup, and returns how many it deleted. An account was deleted
    /// since when its incarnation in the backup (`backupIncarnations`) is not the present's
    /// (`presentIncarnations`: gone, or made again under a new one, whose data must not be the old
    /// one's), whatever the clocks said; and, for accounts the backup holds no incarnation of (a
    /// store from before them), when `presentAudit` records its deletion after the backup's time,
    /// its newest audit record. Deleting again an account the backup does not hold changes
    /// nothing.
    package static func deleteAgain(
        in restored: some AuditStore & AccountStore,
        presentAudit: [AuditRecord],
        backupIncarnations: [(account: String, id: String)],
        presentIncarnations: [(account: String, id: String)]
    ) async throws -> Int {
        let backupTime = try await restored.auditRecords(account: nil, since: nil, limit: 1).last?.time
        var present: [ExactName: String] = [:]
        for (account, id) in presentIncarnations { present[account.exact] = id }
        var accounts = backupIncarnations.filter { present[$0.account.exact] != $0.id }.map(\.account)
        for account in accountsDeleted(after: backupTime, in: presentAudit) where !accounts.contains(where: account.isSameName(as:)) {
            accounts.append(account)
        }
        var deletedAgain = 0
        for account in accounts {
            if try await restored.deleteAccount(account) { deletedAgain += 1 }
        }
        return deletedAgain
    }

    /// The accounts that `audit` says were deleted after `time` (at any time, for nil), once each.
    static func accountsDeleted(after time: Date?, in audit: [AuditRecord]) -> [String] {
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
