public import Foundation
public import GroupDefaults
import GroupDefaultsWire

/// How sync of a suite goes, as the last engine to work on it saw it, kept in the suite (its sync
/// note) so that another process can tell: what `groupdefaults-sync status` prints while `run`
/// works in another process. Written when the condition or its words change, and at each failure.
public struct SyncHealth: Sendable, Equatable, Codable {
    /// What needs attention, if anything: the first that applies, in this order.
    public enum Condition: String, Sendable, Codable {
        /// The last step succeeded and nothing is set aside or refused.
        case ok
        /// The token was refused: nothing is sent until it is replaced (exit status 3 territory).
        case paused
        /// The suite is another account's, and no longer shared with this one (removed, or it
        /// left): nothing is sent; a new invitation brings it back.
        case notShared = "not_shared"
        /// The account the suite synced with was deleted on the server, and its name is now a new
        /// account's: nothing is sent, and everything here is kept, until the suite is set up again
        /// (which starts over in the new account) or stops syncing.
        case accountDeleted = "account_deleted"
        /// The server could not be reached, or said it is busy or unavailable: retried with backoff.
        case offline
        /// This device's clock is behind the server's: nothing is applied until it is set right.
        case clockBehind = "clock_behind"
        /// Another failure: an answer this client does not understand, or the local suite failed.
        case failing
        /// Local changes the server refused (too large, over quota, stamped by a wrong clock): kept here, pending.
        case setAside = "set_aside"
        /// Entries from the server this device refused: tampered (an encrypted suite's), or
        /// stamped far ahead of this machine's clock; each is in the conflict journal.
        case refused
        /// Keys of an encrypted suite the server's snapshot left out although it had acknowledged them.
        case omitted
    }

    /// What needs attention, if anything.
    public var condition: Condition
    /// The condition in words (the error, the first refused change or entry); nil when ok.
    public var detail: String?
    /// The server's error code of the failure, when it gave one: tells a refused token
    /// (`unauthorized`) from a permission the token lacks (`forbidden`, such as writing with a
    /// read-only token). Nil for a record of an older version.
    public var code: SyncErrorCode?
    /// When the condition began (for `offline`: when the server was first found unreachable).
    public var since: Date
    /// When a pull or push last succeeded, as far as any engine recorded it.
    public var lastSuccess: Date?
    /// When a pull or push last failed (the last failed contact, for `offline`).
    public var lastFailure: Date?

    /// A record of `condition` since `since`.
    public init(
        condition: Condition,
        detail: String? = nil,
        code: SyncErrorCode? = nil,
        since: Date,
        lastSuccess: Date? = nil,
        lastFailure: Date? = nil
    ) {
        self.condition = condition
        self.detail = detail
        self.code = code
        self.since = since
        self.lastSuccess = lastSuccess
        self.lastFailure = lastFailure
    }

    /// Whether a person must do something or wait: every condition but `ok`.
    public var needsAttention: Bool { condition != .ok }

    /// Whether only a new token helps (`groupdefaults-sync configure` with a new token file, or a
    /// new token in the same file).
    public var needsToken: Bool { condition == .paused }

    /// The condition in words, as `status` prints it after `state: `: "ok", "paused: authentication
    /// needed (the token was revoked)", "offline: cannot reach https://sync.example.com: connection refused".
    public var summary: String {
        switch condition {
        case .ok: "ok"
        case .paused: "paused: authentication needed (\(detail ?? "the token was refused")); sync waits for a new token"
        case .notShared: "not shared: \(detail ?? "the suite is no longer shared with this account"); nothing is sent until it is shared again"
        case .accountDeleted:
            "account deleted: \(detail ?? "the account this suite synced with was deleted on the server"); sync is paused and this device keeps its data"
        case .offline: "offline: \(detail ?? "the server cannot be reached")"
        case .clockBehind: "clock behind: \(detail ?? "this device's clock is behind the server's")"
        case .failing: "failing: \(detail ?? "the last step failed")"
        case .setAside, .refused, .omitted: detail ?? condition.rawValue
        }
    }

    /// The condition of an engine's `status`, its words, and the server's code of the failure.
    static func assess(_ status: SyncStatus) -> (condition: Condition, detail: String?, code: SyncErrorCode?) {
        if status.isPausedForAuthentication {
            let error = status.lastError
            if error?.code == .notAMember { return (.notShared, error?.detail, error?.code) }
            if error?.code == .accountDeleted { return (.accountDeleted, error?.detail, error?.code) }
            return (.paused, error?.detail, error?.code)
        }
        if let error = status.lastError {
            if error.code == .clockSkew && error.kind == .local { return (.clockBehind, error.detail, error.code) }
            return (error.kind == .unavailable ? .offline : .failing, error.description, error.code)
        }
        if let first = status.rejected.first {
            let count = status.rejected.count
            return (
                .setAside,
                "not pushed: \(count) local change\(count == 1 ? "" : "s") set aside (\(first.key.map { "'\($0)': " } ?? "")\(first.detail))",
                nil
            )
        }
        if let first = status.refused.first {
            return (.refused, "refused \(status.refused.count) entr\(status.refused.count == 1 ? "y" : "ies") from the server (\(first))", nil)
        }
        if !status.omitted.isEmpty {
            return (.omitted, "the server's snapshot left out \(status.omitted.count) acknowledged key(s), kept here", nil)
        }
        return (.ok, nil, nil)
    }

    /// The record kept in `defaults`; nil when none is (never synced, or not since sync was
    /// configured). A note of an older version, in words only, reads as `failing` with those words.
    public static func stored(in defaults: SharedDefaults) -> SyncHealth? {
        guard let note = try? defaults.syncState().note else { return nil }
        if let health = try? decoder.decode(SyncHealth.self, from: Data(note.utf8)) { return health }
        return SyncHealth(condition: .failing, detail: note, since: Date(timeIntervalSince1970: 0))
    }

    /// Records that an engine for `defaults` could not even start (its token or key file cannot be
    /// read, or is readable by others): `paused` when a new token is needed, else `failing`, with
    /// the error's words, so that `status` in another process says so instead of "ok". The last
    /// success is kept. A failure to record is ignored: the caller reports `error` itself.
    static func recordStartFailure(_ error: SyncError, in defaults: SharedDefaults) {
        let previous = stored(in: defaults)
        let condition: Condition =
            error.code == .notAMember
            ? .notShared : error.code == .accountDeleted ? .accountDeleted : error.kind == .authenticationNeeded ? .paused : .failing
        let now = Date()
        let health = SyncHealth(
            condition: condition,
            detail: error.kind == .authenticationNeeded ? error.detail : error.description,
            code: error.code,
            since: previous?.condition == condition ? previous?.since ?? now : now,
            lastSuccess: previous?.lastSuccess,
            lastFailure: now
        )
        try? health.store(in: defaults)
    }

    /// Keeps this record in `defaults`.
    func store(in defaults: SharedDefaults) throws {
        try defaults.setSyncNote(String(decoding: try Self.encoder.encode(self), as: UTF8.self))
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        encoder.outputFormatting = .sortedKeys
        return encoder
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .millisecondsSince1970
        return decoder
    }
}
