import Foundation
import GroupDefaultsWire

/// What a restore keeps from the store it replaces: its authority (`StoredTables`: accounts,
/// tokens, operators, members, invitations, key bags, pairings, devices, the audit log), never the
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
    /// account that `presentAudit` says was deleted after the backup, and returns how many it
    /// deleted. The backup's time is its newest audit record (a backup has no other clock:
    /// `backup` records itself only after the copy; a backup without records counts every
    /// deletion, and deleting again an account the backup does not hold changes nothing).
    package static func deleteAgain(in restored: some AuditStore & AccountStore, presentAudit: [AuditRecord]) async throws -> Int {
        let backupTime = try await restored.auditRecords(account: nil, since: nil, limit: 1).last?.time
        var deletedAgain = 0
        for account in accountsDeleted(after: backupTime, in: presentAudit) {
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
