public import Foundation
import GroupDefaults
import GroupDefaultsWire

/// What a sync engine is doing and how it last went: what an app shows in its settings screen
/// and `groupdefaults-sync status` prints.
public struct SyncStatus: Sendable, Equatable {
    /// Local changes not yet acknowledged by the server (every process's).
    public var pendingCount = 0
    /// The last server revision applied; nil before the first pull.
    public var cursor: UInt64?
    /// When a pull or push last succeeded.
    public var lastSuccess: Date?
    /// The last failure, until a later success.
    public var lastError: SyncError?
    /// When a pull or push last failed (kept after a later success).
    public var lastFailure: Date?
    /// The token was refused: sync waits for a new one and sends nothing meanwhile.
    public var isPausedForAuthentication = false
    /// Local changes that were not pushed, each with why: refused by the server (too large, over
    /// quota, stamped by a wrong clock) or unsendable (nested too deeply). Their local values are
    /// kept, they stay pending until they change again, and each is in the conflict journal.
    public var rejected: [SyncError] = []
    /// Whether the event stream (or long-poll) is connected, in `run()`.
    public var isListening = false
    /// Entries the server sent that this device refused (an encrypted suite's tampered ones, and
    /// any stamped far ahead of this machine's clock), since
    /// the engine started: the last 100 (the conflict journal keeps them all, within its bounds).
    public var refused: [RefusedEntry] = []
    /// Keys of an encrypted suite that the server's last snapshot left out although it had
    /// acknowledged them: kept here, reported.
    public var omitted: [String] = []

    /// The status of an engine that has not run yet: nothing pending, no cursor, no error.
    public init() {}

    /// The newest 100 of `refused`.
    static func lastRefused(_ refused: [RefusedEntry]) -> [RefusedEntry] { Array(refused.suffix(100)) }
}

/// What one `syncOnce()` (or `pull`/`push`) did.
public struct SyncReport: Sendable, Equatable {
    /// Entries pulled from the server and applied (stored because they were newer).
    public var applied = 0
    /// Local changes the server acknowledged.
    public var pushed = 0
    /// Keys removed because the server no longer has them (after an expired cursor).
    public var pruned = 0
    /// Local changes that were not pushed, with why (see `SyncStatus.rejected`).
    public var rejected: [SyncError] = []
    /// Local changes still pending afterwards.
    public var pendingCount = 0
    /// Local values (or deletions) replaced by another device's newer write, or by the server's on
    /// joining: each is kept in the conflict journal (`SharedDefaults.conflicts()`).
    public var replaced = 0
    /// Of `replaced`, those the server's value replaced on joining although the local one was
    /// written later (it was held before sync was turned on: the joining rule).
    public var replacedOnJoining = 0
    /// Of `replaced`, those the owner's value of a pinned key replaced (this device is a member's).
    public var replacedByPin = 0
    /// The devices (origin ids) whose newer writes replaced the others.
    public var replacedBy: Set<UInt64> = []
    /// Pulled entries not applied because their key is local-only here.
    public var ignored = 0
    /// Entries the server sent that this device refused: stamped far ahead of this machine's
    /// clock, or, in an encrypted suite, they did not
    /// open, or opened to another key, HLC or deletion than their envelope said (tampered). Not
    /// applied, not pushed back.
    public var refused: [RefusedEntry] = []
    /// Keys of an encrypted suite that a snapshot left out although this device holds them and the
    /// server had acknowledged them: kept, not removed.
    public var omitted: [String] = []
    /// Local changes kept on this device and not sent because this account is a `read` member of
    /// the shared suite (`Membership.role`): they stay pending, and a newer value from the server
    /// replaces each (kept in the conflict journal).
    public var keptLocal = 0

    /// A report of a step that did nothing.
    public init() {}

    /// What to tell a person when local values were replaced, nil when none was: "1 local value
    /// replaced by a newer one from device 42; see groupdefaults-sync conflicts group.t", or "1 local
    /// value replaced by the server's on joining (the suite held it before sync was turned on); …".
    public func replacementSummary(suite: String) -> String? {
        guard replaced > 0 else { return nil }
        var parts: [String] = []
        let newer = replaced - replacedOnJoining - replacedByPin
        if newer > 0 {
            let devices = replacedBy.sorted().map(String.init).joined(separator: ", ")
            let what = newer == 1 ? "1 local value replaced by a newer one" : "\(newer) local values replaced by newer ones"
            parts.append("\(what) from device\(replacedBy.count == 1 ? "" : "s") \(devices)")
        }
        if replacedOnJoining > 0 {
            let what = replacedOnJoining == 1 ? "1 local value" : "\(replacedOnJoining) local values"
            parts.append("\(what) replaced by the server's on joining (held before sync was turned on, the server's wins)")
        }
        if replacedByPin > 0 {
            let what = replacedByPin == 1 ? "1 local change of a pinned key" : "\(replacedByPin) local changes of pinned keys"
            parts.append("\(what) replaced by the owner's value (only the owner's devices change a pinned key)")
        }
        return parts.joined(separator: "; ") + "; see `groupdefaults-sync conflicts \(suite)`"
    }

    /// Whether the suite and the server agreed when the report was made.
    public var isInAgreement: Bool { pendingCount == 0 && rejected.isEmpty && refused.isEmpty && omitted.isEmpty }

    mutating func add(_ other: SyncReport) {
        applied += other.applied
        pushed += other.pushed
        pruned += other.pruned
        replaced += other.replaced
        replacedOnJoining += other.replacedOnJoining
        replacedByPin += other.replacedByPin
        replacedBy.formUnion(other.replacedBy)
        ignored += other.ignored
        // An entry refused by a pull comes again in a push's answer (the winner of a key it pushed): once.
        refused += other.refused.filter { !refused.contains($0) }
        omitted += other.omitted
        keptLocal = max(keptLocal, other.keptLocal)
    }

    /// Counts what `applyRemote` did.
    mutating func add(_ result: RemoteApplyResult) {
        applied += result.applied.count
        pruned += result.pruned.count
        replaced += result.replaced.count
        replacedOnJoining += result.replacedOnJoining.count
        replacedByPin += result.replacedByPin.count
        replacedBy.formUnion(result.replacedBy)
        ignored += result.ignored.count
    }
}

/// Progress of a long step, for a terminal or a progress bar.
public struct SyncProgress: Sendable, Equatable {
    /// Which step is under way; the raw value says it in words, for a terminal.
    public enum Phase: String, Sendable {
        /// Reading every entry of the server's suite: a device's first sync, or after an expired
        /// cursor.
        case readingSnapshot = "reading the server's snapshot"
        /// Reading the server's changes after the cursor.
        case pulling = "pulling changes"
        /// Sending pending local changes, batch by batch.
        case pushing = "pushing changes"
    }

    /// Which step is under way.
    public var phase: Phase
    /// Entries received or changes sent so far in this step.
    public var done: Int
    /// How many there are in all, when known.
    public var total: Int?
}
