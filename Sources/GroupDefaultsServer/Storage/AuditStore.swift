package import Foundation
package import GroupDefaultsWire

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
        /// A key of a shared suite pinned for its members, or unpinned (`PinRule`).
        case keyPin = "key-pin"
        case keyUnpin = "key-unpin"
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
    /// How it ended, where that is news (`failed`: a failed sign-in; for a record that counts
    /// repeated acts, how many and until when).
    package var outcome: String?
    /// The invitation an act of sharing made or revoked (its id, suite and role), where it is
    /// one: what `AuditRepeats` compares, with the rest of the record, to count alike acts.
    package var invitation: AuditInvitation?
    /// How many acts alike this record counts, this one included (`AuditRepeats`: the same
    /// token's invitations for read or write made, or revoked, on the same suite from the same
    /// address group, alike in all but the invitation's id). Nil for a record of one act.
    package var repeats: Int?
    /// The time of the last act `repeats` counts.
    package var until: Date?

    package init(
        time: Date = Date(),
        actor: String,
        act: Act,
        account: String? = nil,
        target: String? = nil,
        source: String,
        outcome: String? = nil,
        invitation: AuditInvitation? = nil
    ) {
        // A whole millisecond, as both backends order and page the log (`AuditLogPage`).
        self.time = Date(timeIntervalSince1970: (time.timeIntervalSince1970 * 1000).rounded() / 1000)
        self.actor = actor
        self.act = act
        self.account = account
        self.target = target
        self.source = source
        self.outcome = outcome
        self.invitation = invitation
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

/// The invitation an audit record's act made or revoked: its public id, its suite (as its owner
/// names it) and the role it offers.
package struct AuditInvitation: Sendable, Hashable, Codable {
    /// Its public id (`inv_…`).
    package var id: String
    /// Its suite.
    package var suite: String
    /// The role it offers.
    package var role: SuiteRole

    /// The invitation `id` to `suite` for `role`.
    package init(id: String, suite: String, role: SuiteRole) {
        self.id = id
        self.suite = suite
        self.role = role
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
    /// The records of `account` (every account's and those of none, for nil) at or after `since`
    /// and before `before` (times to the millisecond), oldest first, the last `limit` of them.
    func auditRecords(account: String?, since: Date?, before: Date?, limit: Int) async throws -> [AuditRecord]
    /// Removes the records older than `horizon`; returns how many.
    func purgeAudit(olderThan horizon: Date) async throws -> Int
    /// Replaces every record with `records`, in one transaction: a restore keeps the audit log of
    /// the store it replaces, so that no record of what was done since the backup is lost.
    func replaceAudit(with records: [AuditRecord]) async throws
}

extension AuditStore {
    /// The last `limit` records of `account` at or after `since`, oldest first.
    package func auditRecords(account: String?, since: Date?, limit: Int) async throws -> [AuditRecord] {
        try await auditRecords(account: account, since: since, before: nil, limit: limit)
    }

    /// One page of the log, newest last: at most `limit` records of `account` at or after `since`
    /// and before `page` (nil: the latest), and where the page of the records before them starts
    /// (`AuditLogPage.earlier`, nil when there are none). A page never splits the records of one
    /// millisecond (unless more than `limit` share it), so that paging back shows every record once.
    package func auditPage(account: String?, since: Date?, before page: Date?, limit: Int) async throws -> AuditLogPage {
        // Records are made at whole milliseconds (`AuditRecord`): half a millisecond before the
        // page's bound is on the right side of every record whatever the rounding of stored times.
        let bound = page.map { $0.addingTimeInterval(-0.0005) }
        let records = try await auditRecords(account: account, since: since, before: bound, limit: limit)
        return AuditLogPage(records: records, limit: limit)
    }
}

/// A page of the audit log, and the cursor of the page before it.
package struct AuditLogPage: Sendable {
    /// Oldest first.
    package var records: [AuditRecord]
    /// The `before` of the page of earlier records, a whole millisecond (the one after the first
    /// record's, whose records are all on that page), or nil when this page holds the earliest.
    package var earlier: Date?

    init(records: [AuditRecord], limit: Int) {
        guard records.count >= limit, let first = records.first else {
            self.records = records
            return
        }
        // The page is full: records of its first millisecond may go on before it. They all go to
        // the earlier page, unless the whole page is that millisecond.
        let millisecond = AuditLogPage.millisecond(first.time)
        let later = records.drop { AuditLogPage.millisecond($0.time) == millisecond }
        if later.isEmpty {
            self.records = records
            earlier = Date(timeIntervalSince1970: Double(millisecond) / 1000)
        } else {
            self.records = Array(later)
            earlier = Date(timeIntervalSince1970: Double(millisecond + 1) / 1000)
        }
    }

    /// A time's millisecond since 1970, as both backends keep it.
    static func millisecond(_ time: Date) -> Int64 { Int64((time.timeIntervalSince1970 * 1000).rounded()) }
}

/// One token's repeated acts in the audit log, counted instead of recorded one by one, so that a
/// token making and revoking invitations in a loop adds a few records, not thousands. Only acts
/// that give or take no access of consequence are ever counted: a token's invitation for the
/// `read` or `write` role made (`invitation-create`) or revoked (`invitation-revoke`). Everything
/// else is always recorded one by one: an invitation for `admin`, an account that became a member
/// or was removed (or left), token, device and operator acts, and every act of an operator or of
/// the command line.
///
/// Acts are alike only when they are the same in everything but the invitation's id: the same
/// token (`actor`), act, account (the suite's owner), suite and role, the same rest of the target,
/// and the same client address group (`AddressGroup`: an IPv4 address, an IPv6 /64). Of the acts
/// alike within `window`, `individually` are recorded one by one and the rest are counted in one
/// more record (`AuditRecord.repeats`, `until`, said in `outcome`), which names the suite and role
/// they share. Both backends decide with `decide` inside the transaction that writes the record.
package enum AuditRepeats {
    /// Records of alike acts kept one by one per window.
    package static let individually = 20
    /// The window, in seconds.
    package static let window: TimeInterval = 600
    /// The acts that may be counted.
    package static let countedActs: Set<AuditRecord.Act> = [.invitationCreate, .invitationRevoke]
    /// The roles whose invitations may be counted: those that cannot invite, remove or grant.
    package static let countedRoles: Set<SuiteRole> = [.read, .write]

    /// Whether `record` may be counted with others: a token's (`token tok_…`) invitation for
    /// `read` or `write`, made or revoked.
    package static func applies(to record: AuditRecord) -> Bool {
        guard record.actor.hasPrefix("token "), countedActs.contains(record.act), let invitation = record.invitation else { return false }
        return countedRoles.contains(invitation.role)
    }

    /// Whether `other` is an act alike `record`, both countable (`applies`): the same actor, act,
    /// account, suite, role and address group (bytes), and the same target but for the
    /// invitation's id.
    package static func isLike(_ other: AuditRecord, _ record: AuditRecord) -> Bool {
        guard applies(to: other), applies(to: record), let mine = record.invitation, let theirs = other.invitation else { return false }
        return other.actor.isSameName(as: record.actor) && other.act == record.act && same(other.account, record.account)
            && theirs.suite.isSameName(as: mine.suite) && theirs.role == mine.role
            && AddressGroup(other.source) == AddressGroup(record.source)
            && same(other.target.map { $0.replacing(theirs.id, with: "") }, record.target.map { $0.replacing(mine.id, with: "") })
    }

    /// Two optional names, the same bytes (or both absent).
    private static func same(_ one: String?, _ other: String?) -> Bool {
        guard let one, let other else { return one == nil && other == nil }
        return one.isSameName(as: other)
    }

    /// What to write for `record`.
    package enum Decision: Equatable {
        /// Append this record.
        case append(AuditRecord)
        /// Replace the record at this index of `recent` with this one (the count of repeats, one more).
        case replace(Int, AuditRecord)
    }

    /// What to write for `record`, given `recent`: the records like it (`isLike`) since
    /// `record.time - window`, oldest first. Under `individually` of them: the record. Else, the
    /// latest count among them with one more act, or a new count from this act.
    package static func decide(_ record: AuditRecord, recent: [AuditRecord]) -> Decision {
        guard applies(to: record) else { return .append(record) }
        if let index = recent.lastIndex(where: { $0.repeats != nil }) {
            var counted = recent[index]
            counted.repeats = (counted.repeats ?? 1) + 1
            counted.until = record.time
            counted.outcome = outcome(counted)
            return .replace(index, counted)
        }
        guard recent.count >= individually else { return .append(record) }
        var counted = record
        counted.repeats = 1
        counted.until = record.time
        counted.outcome = outcome(counted)
        return .append(counted)
    }

    /// The start of the window of a record made at `time`.
    package static func windowStart(before time: Date) -> Date { time.addingTimeInterval(-window) }

    private static func outcome(_ counted: AuditRecord) -> String {
        let count = counted.repeats ?? 1
        return "repeated: \(count) like it from then" + (counted.until.flatMap(TypedJSONDate.format).map { " until \($0)" } ?? "")
    }
}
