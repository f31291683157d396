import Foundation
import GroupDefaults
import GroupDefaultsWire
import Logging
import Synchronization

/// An engine's status, the streams that watch it, and the suite's sync note (`SyncHealth`: what
/// `groupdefaults-sync status` shows other processes) kept in step with it.
///
/// Both loops of `run` and the one-shot steps report here, from any task; a watcher sees each
/// change once, in order.
final class StatusBoard: Sendable {
    private struct State {
        var status = SyncStatus()
        var observers: [UUID: AsyncStream<SyncStatus>.Continuation] = [:]
    }

    private let state = Mutex(State())
    /// The record this board last wrote to the suite (nil before its first), held while the next
    /// is written: a write to the suite may wait for another process's, and `current` must not.
    private let recorded = Mutex<SyncHealth?>(nil)
    private let defaults: SharedDefaults
    private let logger: Logger

    init(defaults: SharedDefaults, logger: Logger) {
        self.defaults = defaults
        self.logger = logger
    }

    /// The status, as of the last step.
    var current: SyncStatus { state.withLock { $0.status } }

    /// The status each time it changes, starting with the current one.
    func updates() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncStatus.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        state.withLock { state in
            state.observers[id] = continuation
            continuation.yield(state.status)  // before any later change
        }
        continuation.onTermination = { [weak self] _ in self?.state.withLock { _ = $0.observers.removeValue(forKey: id) } }
        return stream
    }

    /// Changes the status; the watchers and the sync note learn of it if it changed.
    /// Watchers are told under the lock, so that each sees the changes in order (a yield never
    /// calls back into the board: only a stream's end does, `updates()`).
    func update(_ change: (inout SyncStatus) -> Void) {
        let changed = state.withLock { state in
            var next = state.status
            change(&next)
            guard next != state.status else { return false }
            state.status = next
            for watcher in state.observers.values { watcher.yield(next) }
            return true
        }
        if changed { record() }
    }

    /// The status after a one-shot step: the suite's pending count and cursor, and the report's
    /// keys set aside (`rejected`, all of them) and omitted; returns `report` with them.
    func finished(_ report: SyncReport, rejected: [SyncError]) -> SyncReport {
        var report = report
        report.rejected = rejected
        if let pending = try? defaults.pendingCount() { report.pendingCount = pending }
        let cursor = try? defaults.syncCursor()
        update { [report] in
            $0.pendingCount = report.pendingCount
            $0.cursor = cursor ?? $0.cursor
            $0.rejected = report.rejected
            $0.omitted = report.omitted.isEmpty ? $0.omitted : report.omitted
        }
        return report
    }

    /// A step succeeded: no error, no pause.
    func succeeded() {
        update {
            $0.lastSuccess = Date()
            $0.lastError = nil
            $0.isPausedForAuthentication = false
        }
    }

    /// Notes a failed step: the status says what and when, and pauses for a refused token. A step
    /// cut short because the task was cancelled (`run` stopping) is no failure.
    func failed(_ error: SyncError) {
        guard !Task.isCancelled else { return }
        update {
            $0.lastFailure = Date()
            // The account's deletion stands until the suite is set up again: what a step fails
            // with after it (a refused token, an unreachable server) follows from it, and must not
            // hide it from `status` or from the next `configure`, which starts over because of it.
            if $0.isPausedForAuthentication, $0.lastError?.code == .accountDeleted { return }
            $0.lastError = error
            if error.kind == .authenticationNeeded { $0.isPausedForAuthentication = true }
        }
    }

    /// The pause for authentication is over.
    func resumedAfterAuthentication() {
        update {
            $0.isPausedForAuthentication = false
            if $0.lastError?.kind == .authenticationNeeded { $0.lastError = nil }
        }
    }

    /// Writes the sync note when the condition or its words change, at each failure (the last
    /// failed contact), and once by each engine, not at every success. The status recorded is the
    /// latest, read under the record's lock: of two updates at once, the note ends with the later.
    private func record() {
        recorded.withLock { recorded in
            let status = current
            let (condition, detail, code) = SyncHealth.assess(status)
            let previous = recorded ?? SyncHealth.stored(in: defaults)
            let failedAgain = condition != .ok && status.lastFailure != nil && status.lastFailure != previous?.lastFailure
            guard recorded == nil || previous?.condition != condition || previous?.detail != detail || failedAgain else { return }
            recorded = write(status, condition: condition, detail: detail, code: code, after: previous)
        }
    }

    /// Writes the sync note for `status`; the note written.
    private func write(
        _ status: SyncStatus,
        condition: SyncHealth.Condition,
        detail: String?,
        code: SyncErrorCode?,
        after previous: SyncHealth?
    ) -> SyncHealth {
        let health = SyncHealth(
            condition: condition,
            detail: detail,
            code: code,
            // A failure began at the failed step; anything else now.
            since: previous.flatMap { $0.condition == condition ? $0.since : nil } ?? (status.lastError != nil ? status.lastFailure : nil) ?? Date(),
            lastSuccess: status.lastSuccess ?? previous?.lastSuccess,
            lastFailure: status.lastFailure ?? previous?.lastFailure
        )
        do { try health.store(in: defaults) } catch {
            logger.warning("could not record the sync status in the suite", metadata: ["error": "\(error)"])
        }
        return health
    }
}
