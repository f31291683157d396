package import Foundation

/// One administrative act, as the audit log keeps it: when, who, what, on what, from where, and
/// how it ended. Never a value, a password or a token's secret: only names and ids.
package struct AuditRecord: Sendable, Hashable, Codable {
    /// The acts the log records.
    package enum Act: String, Sendable, Codable, CaseIterable {
        case tokenCreate = "token-create"
        case tokenRevoke = "token-revoke"
        case deviceRevoke = "device-revoke"
        case adminCreate = "admin-create"
        case adminRemove = "admin-remove"
        case signIn = "sign-in"
        case signInFailed = "sign-in-failed"
        case suiteReset = "suite-reset"
        case clockRepair = "clock-repair"
        case accountExport = "account-export"
        case accountDelete = "account-delete"
        case backup, restore
        /// Sharing: an invitation made or revoked, an account that became a member, one removed
        /// (or that left).
        case invitationCreate = "invitation-create"
        case invitationRevoke = "invitation-revoke"
        case memberAdd = "member-add"
        case memberRemove = "member-remove"
    }

    package var time: Date
    /// Who did it: an operator's name, `token tok_…`, or `command line`.
    package var actor: String
    package var act: Act
    /// The account it concerns, if any.
    package var account: String?
    /// What it was done to, beyond the account: a suite, a token id, a device id, an operator.
    package var target: String?
    /// Where from: a remote address (HTTP, console), or `command line (user NAME, uid N)`.
    package var source: String
    /// How it ended, where that is news (`failed`: a failed sign-in).
    package var outcome: String?

    package init(
        time: Date = Date(),
        actor: String,
        act: Act,
        account: String? = nil,
        target: String? = nil,
        source: String,
        outcome: String? = nil
    ) {
        self.time = time
        self.actor = actor
        self.act = act
        self.account = account
        self.target = target
        self.source = source
        self.outcome = outcome
    }

    /// Who and where for an act of a command run on this machine: `command line`, and the user
    /// who ran it.
    package static func commandLine(
        _ act: Act,
        account: String? = nil,
        target: String? = nil,
        time: Date = Date()
    ) -> AuditRecord {
        let uid = getuid()
        let user = getpwuid(uid).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "unknown"
        return AuditRecord(
            time: time,
            actor: "command line",
            act: act,
            account: account,
            target: target,
            source: "command line (user \(user), uid \(uid))"
        )
    }
}

extension AuditRecord {
    /// How both backends store a record: JSON, times in milliseconds.
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        encoder.outputFormatting = .sortedKeys
        return encoder
    }

    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}

/// The audit log: administrative acts (`AuditRecord`), kept for a bounded time.
package protocol AuditStore: Sendable {
    /// Appends a record.
    func appendAudit(_ record: AuditRecord) async throws
    /// The records of `account` (every account's and those of none, for nil) at or after `since`,
    /// oldest first, the last `limit` of them.
    func auditRecords(account: String?, since: Date?, limit: Int) async throws -> [AuditRecord]
    /// Removes the records older than `horizon`; returns how many.
    func purgeAudit(olderThan horizon: Date) async throws -> Int
    /// Replaces every record with `records`, in one transaction: a restore keeps the audit log of
    /// the store it replaces, so that no record of what was done since the backup is lost.
    func replaceAudit(with records: [AuditRecord]) async throws
}
