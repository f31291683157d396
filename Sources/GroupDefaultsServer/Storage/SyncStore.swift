package import GroupDefaultsWire
import ServiceLifecycle

/// The bounds storage enforces inside a push: the quotas, and how many versions of each key the
/// history keeps.
package struct SuiteQuota: Sendable, Hashable {
    package var maxKeys: Int
    package var maxBytes: Int
    /// How many versions of each key the history keeps (the current one included); 0 keeps none.
    /// History does not count against `maxKeys` or `maxBytes`.
    package var historyDepth: Int

    package init(maxKeys: Int, maxBytes: Int, historyDepth: Int = 10) {
        self.maxKeys = maxKeys
        self.maxBytes = maxBytes
        self.historyDepth = historyDepth
    }
}

/// A suite's entries: pushes, the reads that follow them, waiting for the next one, the purge of
/// old tombstones, and each key's history (the semantics: `ServerStorage.swift`).
package protocol SyncStore: Sendable {
    /// Applies a push: loads what `PushStep` needs, runs it, and persists its output in one
    /// transaction. `serverTime` is written into the response.
    func push(account: String, suite: String, push: PreparedPush, quota: SuiteQuota, serverTime: String) async throws -> PushResponse

    /// The latest entry of each key changed after `since`, in revision order, at most `limit`.
    func changes(account: String, suite: String, since: UInt64, limit: Int) async throws -> StoredChanges

    /// Every live entry and unexpired tombstone after `after`, in key order, at most `limit`.
    func snapshot(account: String, suite: String, after: String?, limit: Int) async throws -> StoredSnapshot

    /// The account's written suites, by name, with head revision and live key count.
    func suites(account: String) async throws -> SuiteList

    /// The suite's head revision; 0 for a suite nobody has written.
    func headRevision(account: String, suite: String) async throws -> UInt64

    /// Returns when the suite's head passes `revision`, `timeout` ends, or the task is cancelled.
    func waitForChange(account: String, suite: String, after revision: UInt64, timeout: Duration) async

    /// Calls `wake` once, on any thread, when the suite's head may have passed `revision` (a push
    /// here or on another instance, or a listener that reconnected and may have missed one), or
    /// with `.ended` when waits are ended (at once if they are). A parked event stream waits this
    /// way, with no task (`ParkedEventStream`); it runs a turn at each wake, so a wake that finds
    /// nothing new costs a read. The watch reads the head once after it is in place, so that a push
    /// committed just before is not missed; a read that fails wakes it too (the turn then finds out).
    /// After `cancel`, a wake already on its way may still arrive.
    func watchForChange(
        account: String,
        suite: String,
        after revision: UInt64,
        wake: @escaping @Sendable (ChangeWatch.Wake) -> Void
    ) -> ChangeWatch

    /// Whether every change a stream's turn would find wakes the watches (`watchForChange`) of this
    /// instance, whichever process made it. Then a parked stream's heartbeat need not read the
    /// changes (its quiet turn, `ParkedEventStream`). PostgreSQL: yes, every writer notifies every
    /// instance. The embedded store: no, its waiters hear only this process's writes, and a command
    /// run beside the server (`suites reset`, `suites repair-clock`) is found by the next full turn.
    var watchesHearEveryWriter: Bool { get }

    /// Wakes every `waitForChange` now, and makes later ones return at once (graceful shutdown:
    /// event streams and long-polls end instead of waiting out their time).
    func endWaits()

    /// Removes tombstones whose HLC is older than `horizon`, raising each affected suite's oldest
    /// valid revision to the highest purged revision, and the history versions older than it that
    /// are not their key's current entry. Returns how many tombstones were removed.
    func purgeTombstones(olderThan horizon: HLC) async throws -> Int

    /// The versions of `key` the history keeps, newest first; empty for a key never written, purged,
    /// or written while history was off.
    func history(account: String, suite: String, key: String) async throws -> [StoredVersion]

    /// A page of the history of every key of the suite: the keys after `after` that the history
    /// keeps versions of, in key order (UTF-8 bytes), each with all its versions, newest first. A
    /// key is never split: the page takes whole keys while their versions number at most `limit`
    /// in all, and at least one key (which may hold more). `next` is the page's last key when a key
    /// follows (or may: the page after a key with more than `limit` versions can be empty), nil on
    /// the last page. Empty for a suite nobody wrote, or a server that keeps no history.
    func history(account: String, suite: String, after: String?, limit: Int) async throws -> StoredHistoryPage
}

/// A watch of `SyncStore.watchForChange`, until it wakes or is cancelled.
package struct ChangeWatch: Sendable {
    /// Why a watch woke.
    package enum Wake: Sendable {
        /// The suite's head may have moved.
        case changed
        /// Waits were ended (graceful shutdown).
        case ended
    }

    /// Ends the watch: its `wake` is not called for later changes.
    package let cancel: @Sendable () -> Void
}

extension SyncStore {
    /// `waitForChange`, ended early by graceful shutdown (which ends every wait: `endWaits`).
    /// Returns whether the server is shutting down.
    func waitForChangeUntilShutdown(account: String, suite: String, after revision: UInt64, timeout: Duration) async -> Bool {
        await withGracefulShutdownHandler {
            await waitForChange(account: account, suite: suite, after: revision, timeout: timeout)
        } onGracefulShutdown: {
            endWaits()
        }
        return Task.isShuttingDownGracefully
    }

    /// Applies a push given as a plain request (its values encoded here).
    package func push(account: String, suite: String, request: PushRequest, quota: SuiteQuota, serverTime: String) async throws -> PushResponse {
        try await push(account: account, suite: suite, push: PreparedPush(request), quota: quota, serverTime: serverTime)
    }
}
