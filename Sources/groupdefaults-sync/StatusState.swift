import Foundation
import GroupDefaultsSync
import GroupDefaultsWire

/// What `groupdefaults-sync status` found about a suite, gathered once: the suite's own records
/// (its sync settings, pending changes, the health the last engine recorded) and one answer of the
/// server. Every line `status` prints, its JSON and its exit status come from this snapshot,
/// through its one `state`.
struct StatusSnapshot {
    /// What the server answered `status`'s questions (`SuiteSharing.checkAccess`, then `devices`).
    enum ServerAnswer {
        /// The suite is not synced: nothing was asked.
        case notAsked
        /// The token works for the suite: this device as the server lists it (nil before the
        /// server has seen it), and the key rotation due, if any.
        case answered(device: DeviceInfo?, rotationDue: KeyRotationDue?)
        /// A question failed: refused, not reached, not answered in time.
        case failed(SyncError)
    }

    var suite: String
    var isSynced: Bool
    /// The suite another account shares that this copy was of before this account left it.
    var left: Membership?
    /// For a suite another account shares: whose it is and the role, as configured.
    var membership: Membership?
    var pendingCount: Int
    /// What the last engine to work on the suite recorded (`SyncHealth`).
    var health: SyncHealth?
    var answer: ServerAnswer
    var now: Date

    /// The one state of the suite.
    var state: StatusState { StatusState.of(self) }

    /// The failure of the server's answer, if it failed.
    var failure: SyncError? {
        if case .failed(let error) = answer { return error }
        return nil
    }

    /// Whether the server accepted the token for the suite just now.
    var answered: Bool {
        if case .answered = answer { return true }
        return false
    }
}

/// The one state of a suite that `status` reports: which one applies (the first, in the order
/// `of(_:)` checks), its words, and its exit status. The table of states in docs/guide/sync.md lists each
/// `Kind`, by its raw value, with its exit status.
struct StatusState {
    /// Which state: its raw value is `status --json`'s `state`.
    enum Kind: String, CaseIterable {
        /// The suite does not sync (never configured, unconfigured, or a copy of a suite this
        /// account left).
        case notSynced = "not_synced"
        /// Nothing needs attention.
        case ok
        /// The token was refused (or its file cannot be read): nothing is sent until it is replaced.
        case paused
        /// The suite is another account's and no longer shared with this one.
        case notShared = "not_shared"
        /// The account the suite synced with was deleted on the server.
        case accountDeleted = "account_deleted"
        /// The server cannot be reached, or says it is busy or unavailable.
        case offline
        /// This device's clock is behind the server's.
        case clockBehind = "clock_behind"
        /// Another failure: an answer this client does not understand, or the local suite failed.
        case failing
        /// A read member's local changes stay on this device, never sent.
        case keptLocal = "kept_local"
        /// Local changes the server refused, kept here pending.
        case setAside = "set_aside"
        /// Entries from the server this device refused.
        case refused
        /// Keys of an encrypted suite the server's snapshot left out.
        case omitted
        /// A key rotation is due (an encrypted suite's member that held its keys was removed).
        case rotationDue = "rotation_due"

        /// 0: nothing needs attention; 3: sync is paused until a person acts (a new token, a new
        /// invitation, `configure` again); 1: anything else that needs attention.
        var exitStatus: Int32 {
            switch self {
            case .notSynced, .ok: 0
            case .paused, .notShared, .accountDeleted: 3
            case .offline, .clockBehind, .failing, .keptLocal, .setAside, .refused, .omitted, .rotationDue: 1
            }
        }

        /// Whether the state is a failure with a history (`when:`: since when, the last failed
        /// contact, the last success).
        var hasTimes: Bool {
            switch self {
            case .notSynced, .ok, .keptLocal, .rotationDue: false
            case .paused, .notShared, .accountDeleted, .offline, .clockBehind, .failing, .setAside, .refused, .omitted: true
            }
        }
    }

    var kind: Kind
    /// What the state is about, in words (the error, the first change set aside, …).
    var detail: String?
    /// When it began, when known.
    var since: Date?
    /// When a pull, push or `status`'s question last failed.
    var lastFailure: Date?
    /// When a pull or push last succeeded, as far as any engine recorded it.
    var lastSuccess: Date?
    /// For `rotationDue`: what is due.
    var rotationDue: KeyRotationDue?

    /// The state of `snapshot`: the first that applies, in the order of the table in docs/guide/sync.md.
    /// What the server answered now outranks what an engine recorded before about the same thing:
    /// an answer proves a token refused as unknown, expired or revoked (`unauthorized`), or a
    /// token file that could not be read, to work now, the membership to hold and the server to
    /// be reached; it does not prove a permission the question did not use (writing: a pause
    /// recorded with `forbidden` stands). A token refused now is `paused` before a membership
    /// recorded as ended (the one exception to the table's order: the membership cannot be asked
    /// with it). A deleted account stands until the suite is configured again, whatever the server
    /// says meanwhile.
    static func of(_ snapshot: StatusSnapshot) -> StatusState {
        guard snapshot.isSynced else { return StatusState(kind: .notSynced) }
        let health = snapshot.health
        let recorded = health?.condition ?? .ok
        let failure = snapshot.failure
        let refusal = failure?.kind == .authenticationNeeded ? failure : nil

        /// The state as the last engine recorded it.
        func fromRecord(_ kind: Kind) -> StatusState {
            StatusState(
                kind: kind,
                detail: health?.detail,
                since: health.flatMap { $0.since.timeIntervalSince1970 > 0 ? $0.since : nil },
                lastFailure: health?.lastFailure,
                lastSuccess: health?.lastSuccess
            )
        }
        /// The state of the server's answer now (a failure of `status`'s question), since the
        /// recorded condition began if it is the same.
        func fromAnswer(_ kind: Kind, _ condition: SyncHealth.Condition, _ detail: String) -> StatusState {
            StatusState(
                kind: kind,
                detail: detail,
                since: recorded == condition ? health.flatMap { $0.since.timeIntervalSince1970 > 0 ? $0.since : nil } : nil,
                lastFailure: snapshot.now,
                lastSuccess: health?.lastSuccess
            )
        }

        if recorded == .accountDeleted { return fromRecord(.accountDeleted) }
        if let refusal, refusal.code == .accountDeleted { return fromAnswer(.accountDeleted, .accountDeleted, refusal.detail) }
        if let refusal, refusal.code == .notAMember { return fromAnswer(.notShared, .notShared, refusal.detail) }
        // A token refused now outranks a membership recorded as ended: until the token is
        // replaced the server cannot say whether the account is a member again (invited back from
        // another device), and a new token is the first remedy either way.
        if let refusal { return fromAnswer(.paused, .paused, refusal.detail) }
        if recorded == .notShared, failure != nil { return fromRecord(.notShared) }
        if recorded == .paused, !(snapshot.answered && (health?.code == nil || health?.code == .unauthorized)) {
            return fromRecord(.paused)
        }
        if let failure, failure.kind == .unavailable { return fromAnswer(.offline, .offline, failure.description) }
        if recorded == .offline, !snapshot.answered { return fromRecord(.offline) }
        if let failure { return fromAnswer(.failing, .failing, failure.description(remedy: remedyWords)) }
        if recorded == .failing { return fromRecord(.failing) }
        if recorded == .clockBehind { return fromRecord(.clockBehind) }
        if let membership = snapshot.membership, membership.role == .read, snapshot.pendingCount > 0 {
            let count = snapshot.pendingCount
            return StatusState(
                kind: .keptLocal,
                detail: "\(count) local change(s) stay on this device, not sent: "
                    + "this account is a read member of \(membership.owner)'s suite \(membership.suite)"
            )
        }
        switch recorded {
        case .setAside: return fromRecord(.setAside)
        case .refused: return fromRecord(.refused)
        case .omitted: return fromRecord(.omitted)
        default: break
        }
        if case .answered(_, let due?) = snapshot.answer {
            var state = StatusState(kind: .rotationDue, detail: Self.rotationWords(due, suite: snapshot.suite))
            state.rotationDue = due
            return state
        }
        return StatusState(kind: .ok)
    }

    /// The state in words, as `status` prints it after `state: `: "ok", "paused: authentication
    /// needed (the token was revoked); sync waits for a new token", "local changes kept: …".
    var summary: String {
        switch kind {
        case .notSynced: "not synced"
        case .keptLocal: "local changes kept: \(detail ?? "")"
        case .rotationDue: "key rotation due: \(detail ?? "")"
        default:
            // The other states are the conditions an engine records, in the same words.
            SyncHealth.Condition(rawValue: kind.rawValue).map { SyncHealth(condition: $0, detail: detail, since: .now).summary } ?? kind.rawValue
        }
    }

    /// The one line on stderr that goes with the exit status (nil for 0): what stands and what to do.
    func failureLine(suite: String) -> String? {
        switch kind {
        case .notSynced, .ok: nil
        case .paused:
            "\(suite) is paused until its token is replaced (\(detail ?? "the token was refused")): "
                + "give it a new token with `groupdefaults-sync configure \(suite) --server URL --token-file PATH`"
        case .notShared:
            "\(suite) is no longer shared with this account: ask its owner for a new invitation and join again with "
                + "`groupdefaults-sync configure --invitation CODE --server URL --token-file PATH --as \(suite)`"
        case .accountDeleted:
            "\(suite) is paused: the account it synced with was deleted on the server, and its name is now a new account's; this device keeps its data. "
                + "To start over in the new account run `groupdefaults-sync configure \(suite) --server URL --token-file PATH` (what this device holds is uploaded there), "
                + "or keep it on this device only with `groupdefaults-sync unconfigure \(suite)`"
        case .keptLocal: "\(suite): \(detail ?? "local changes stay on this device")"
        case .offline, .clockBehind, .failing, .setAside, .refused, .omitted, .rotationDue: "\(suite) needs attention: \(summary)"
        }
    }

    /// A rotation due, in words: who was removed, since when, and what makes it.
    static func rotationWords(_ due: KeyRotationDue, suite: String) -> String {
        "\(due.removed.joined(separator: ", ")) held the suite's keys when removed (since \(due.since)); "
            + "the next `groupdefaults-sync sync \(suite)` (or `groupdefaults-sync run \(suite)`) on a device holding the owner key rotates them"
    }
}
