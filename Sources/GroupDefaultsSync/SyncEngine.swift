import Foundation
public import GroupDefaults
import GroupDefaultsWire
public import Logging

/// Mirrors one suite to a `groupdefaults-server`: offline first, last writer wins by HLC, no echo,
/// nothing lost (ARCHITECTURE.md tells how a change travels).
///
/// Local changes are found through the suite's pending marks, written by whichever process made
/// the change in the change's own transaction; pulled entries are applied with `applyRemote`
/// (their own stamps, never marked pending, the cursor saved with them). The batch being pushed
/// is stored before it is sent, so that a retry after a crash sends the same body under the same
/// id, and an acknowledgement clears a mark only if the key did not change meanwhile.
///
/// ```swift
/// let engine = try SyncEngine(configured: defaults, http: http)   // the suite's own settings
/// let report = try await engine.syncOnce()
/// try await engine.run()                                        // until the task is cancelled
/// ```
public actor SyncEngine {
    /// How the engine paces itself.
    public struct Options: Sendable {
        /// How remote changes arrive in `run()`.
        public enum Transport: String, Sendable {
            /// Server-Sent Events (`/events`): one open request, woken at once.
            case eventStream = "events"
            /// Long-polls of `/changes?wait=`, for networks that break streams.
            case longPoll = "long-poll"
        }

        /// How remote changes arrive in `run()`: the event stream (the default) or long-polls.
        public var transport: Transport = .eventStream
        /// How long `run()` waits after a local change before pushing, to coalesce a burst.
        public var debounce: Duration = .milliseconds(2)
        /// Entries per page of `changes` and `snapshot`.
        public var pageSize = 1000
        /// The `wait` of a long-poll, in seconds.
        public var longPollWait = 30
        /// The ceiling of the first wait between retries of transient failures. Each wait is random
        /// between half its ceiling and the ceiling, which doubles after each retry.
        public var initialBackoff: Duration = .milliseconds(200)
        /// The highest ceiling of a wait between retries; a server's longer `Retry-After` is cut to it.
        public var maximumBackoff: Duration = .seconds(30)
        /// How many times a one-shot step (`syncOnce`, `pull`, `push`) tries through transient
        /// failures before it reports one.
        public var oneShotAttempts = 4
        /// How often a paused engine looks (locally) for a new token.
        public var tokenCheckInterval: Duration = .seconds(1)
        /// Called with the progress of long steps (snapshot reads, large pushes).
        public var progress: (@Sendable (SyncProgress) -> Void)?
        /// How long a request may wait for its answer's head, for an engine made with
        /// `init(configured:http:options:)` (long-polls add their wait).
        public var answerTimeout: Duration = .seconds(30)
        /// The connect timeout the HTTP client was made with (`SyncClient.makeHTTPClient(caFile:connectTimeout:)`),
        /// for an engine made with `init(configured:http:options:)`: named when it expires.
        public var connectTimeout: Duration = SyncClient.defaultConnectTimeout

        /// Options with every setting at its default.
        public init() {}
    }

    /// The suite this engine mirrors.
    public nonisolated let defaults: SharedDefaults
    /// The server API the engine talks to, for this suite.
    public nonisolated let client: SyncClient
    /// Seals and opens entries in an end-to-end encrypted suite; nil for a plain suite.
    var sealer: EntrySealer?
    /// Where the keys were read from, to read them again after a rotation (`reloadKeys`).
    var keyFile: String?
    /// Whether a step found entries sealed under an epoch this device lacks, in a shared suite:
    /// the next one takes it from the key bags first (`adoptSharedEpochs`).
    var needsSharedEpochs = false
    /// Above which the key bags handed this device no epoch when it last looked (`.max` when they
    /// handed none): an entry sealed under such an epoch is reported, not retried.
    var unadoptableEpoch: UInt32?
    /// For a suite another account shares with this one: whose it is and this account's role (a
    /// `read` member's engine never pushes); nil for the account's own suite.
    public nonisolated let shared: Membership?
    /// This account's role in the suite another account shares with it, as the server last said:
    /// `shared`'s, until a push is refused for a read member's or a read member's server says
    /// otherwise (`adoptRole`).
    var role: SuiteRole?
    let options: Options
    let logger: Logger
    /// The status, as of the last step.
    public private(set) var status = SyncStatus()

    /// What goes in the next batch, what is set aside, what a push's answer settles: the rules of
    /// pushing, without I/O.
    private var planner = PushPlanner()
    private var limits: SyncLimits?
    /// How many pushes got an answer: a pull during which none did can tell a rollback from a race.
    private var pushesAnswered = 0
    /// Whether this engine looked for pending changes its suite's index lacks (once).
    private var pendingIndexChecked = false
    /// Pushes run one at a time (one in-flight batch), and so do pulls (the cursor only advances).
    private var busy: Set<Step> = []
    private var waiting: [Step: [CheckedContinuation<Void, Never>]] = [:]
    private var statusObservers: [UUID: AsyncStream<SyncStatus>.Continuation] = [:]
    /// Whether a join marked keys pending that no push has sent yet (`run` pushes them at once).
    var joinedSincePush = false
    /// The key rotation the owner's event stream announced and `run` has not tried yet: its pushes
    /// wait for it (`SyncEngine+Run.swift`), so that nothing more goes out under the old key.
    var announcedRotation: KeyRotationDue?
    /// The last announced rotation `run` tried: announced again (it failed, or this device cannot
    /// make it), it is not tried again until the next connection.
    var triedRotation: KeyRotationDue?
    /// Pushes of `run` waiting for `announcedRotation` to be tried.
    var rotationWaiters: [CheckedContinuation<Void, Never>] = []
    /// While `run` is paused for authentication (`waitForNewToken`): the other loop, waiting for
    /// the same outcome; nil when not paused.
    var pausedLoops: [CheckedContinuation<Void, Never>]?
    /// Whether this engine found the suite anchored to its keys, or anchored it (`anchorIfNeeded`).
    private var anchored = false
    /// The record this engine last wrote to the suite (`recordHealth`); nil before its first.
    private var recordedHealth: SyncHealth?

    /// An engine for `defaults` through `client`, whatever the suite's stored settings say (see
    /// `init(configured:http:options:)` for a suite set up with `groupdefaults-sync configure`).
    ///
    /// The suite must be marked synced (`SyncSettings.store(in:)`) for the changes its processes
    /// make to be recorded as pending.
    ///
    /// - Parameters:
    ///   - defaults: The suite to mirror.
    ///   - client: The server and token for the suite.
    ///   - options: Pacing: transport, debounce, page size, backoff.
    ///   - logger: Where the engine logs; nil for one labelled "GroupDefaultsSync".
    ///   - keys: The suite's end-to-end encryption keys, for an encrypted suite; nil for a plain one.
    ///   - shared: For a suite another account shares with this one, whose it is and this
    ///     account's role (the client must name the same owner and suite); nil for the account's own.
    ///
    /// A client that names no device (`SyncClient.deviceID`) is given the suite's origin, so that
    /// the server lists this device as one.
    public init(
        defaults: SharedDefaults,
        client: SyncClient,
        options: Options = Options(),
        logger: Logger? = nil,
        keys: SuiteKeys? = nil,
        shared: Membership? = nil
    ) {
        self.init(defaults: defaults, client: client, options: options, logger: logger, keys: keys, keyFile: nil, shared: shared)
    }

    /// An engine whose keys came from `keyFile`, read again when the suite is rotated.
    init(
        defaults: SharedDefaults,
        client: SyncClient,
        options: Options,
        logger: Logger?,
        keys: SuiteKeys?,
        keyFile: String?,
        shared: Membership?
    ) {
        self.defaults = defaults
        self.sealer = keys.map(EntrySealer.init(keys:))
        self.keyFile = keyFile
        self.shared = shared
        self.role = shared?.role
        var client = client
        if client.deviceID == nil { client.deviceID = defaults.origin }
        // The owner account's incarnation the suite remembers, sent with every request and
        // compared with every answer's (`AccountIncarnation`).
        client.accountIncarnation.know((try? defaults.syncState())?.accountIncarnation)
        self.client = client
        self.options = options
        self.logger = logger ?? Logger(label: "GroupDefaultsSync")
    }

    /// The status each time it changes, starting with the current one.
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: SyncStatus.self, bufferingPolicy: .bufferingNewest(1))
        let id = UUID()
        statusObservers[id] = continuation
        continuation.yield(status)
        continuation.onTermination = { _ in Task { await self.removeObserver(id) } }
        return stream
    }

    private func removeObserver(_ id: UUID) { statusObservers[id] = nil }

    private func updateStatus(_ change: (inout SyncStatus) -> Void) {
        var next = status
        change(&next)
        guard next != status else { return }
        status = next
        for observer in statusObservers.values { observer.yield(next) }
        recordHealth()
    }

    /// Keeps the suite's sync note (`SyncHealth`: what `groupdefaults-sync status` shows other
    /// processes) in step with the status: written when the condition or its words change, at each
    /// failure (the last failed contact), and once by each engine, not at every success.
    private func recordHealth() {
        let (condition, detail, code) = SyncHealth.assess(status)
        let previous = recordedHealth ?? SyncHealth.stored(in: defaults)
        let failedAgain = condition != .ok && status.lastFailure != nil && status.lastFailure != previous?.lastFailure
        guard recordedHealth == nil || previous?.condition != condition || previous?.detail != detail || failedAgain else { return }
        let health = SyncHealth(
            condition: condition,
            detail: detail,
            code: code,
            // A failure began at the failed step; anything else now.
            since: previous.flatMap { $0.condition == condition ? $0.since : nil } ?? (status.lastError != nil ? status.lastFailure : nil) ?? Date(),
            lastSuccess: status.lastSuccess ?? previous?.lastSuccess,
            lastFailure: status.lastFailure ?? previous?.lastFailure
        )
        recordedHealth = health
        do { try health.store(in: defaults) } catch {
            logger.warning("could not record the sync status in the suite", metadata: ["error": "\(error)"])
        }
    }

    // MARK: One-shot steps

    /// Pulls, pushes what is pending, and pulls again: afterwards the suite and the server agree
    /// unless the report says otherwise (`isInAgreement`).
    ///
    /// - Throws: `SyncError`: `authenticationNeeded` (nothing pending is lost), `unavailable` after
    ///   `oneShotAttempts` tries (at once when the server cannot be reached or does not answer in
    ///   time: `SyncError.isUnreached`), `local`, `protocolError`. Refused keys are in the report, not thrown.
    @discardableResult
    public func syncOnce() async throws(SyncError) -> SyncReport {
        var report = try await pull()
        report.add(try await push())
        report.add(try await pull())
        return finish(report)
    }

    /// Pulls what the server has beyond the cursor (the snapshot for a device that never synced,
    /// or after the cursor expired or the suite was reset) and applies it.
    @discardableResult
    public func pull() async throws(SyncError) -> SyncReport {
        finish(try await retryingTransientFailures { () async throws(SyncError) in try await self.pullOnce() })
    }

    /// Pushes every pending change (in batches), then clears what the server acknowledged.
    @discardableResult
    public func push() async throws(SyncError) -> SyncReport {
        finish(try await retryingTransientFailures { () async throws(SyncError) in try await self.pushPending() })
    }

    private func finish(_ report: SyncReport) -> SyncReport {
        var report = report
        report.rejected = planner.rejected
        if let pending = try? defaults.pendingCount() { report.pendingCount = pending }
        let cursor = try? defaults.syncCursor()
        updateStatus {
            $0.pendingCount = report.pendingCount
            $0.cursor = cursor ?? $0.cursor
            $0.rejected = report.rejected
            $0.omitted = report.omitted.isEmpty ? $0.omitted : report.omitted
        }
        return report
    }

    private func retryingTransientFailures(_ step: () async throws(SyncError) -> SyncReport) async throws(SyncError) -> SyncReport {
        var backoff = Backoff(initial: options.initialBackoff, maximum: options.maximumBackoff)
        var attempt = 1
        while true {
            do {
                let report = try await step()
                succeeded()
                return report
            } catch {
                failed(error)
                guard error.isTransient, !error.isUnreached, !error.isRetriedByClient, attempt < options.oneShotAttempts else { throw error }
                attempt += 1
                do { try await Task.sleep(for: backoff.next(retryAfter: error.retryAfter)) } catch { throw SyncError.cancelled }
            }
        }
    }

    private func succeeded() {
        rememberAccountIncarnation()
        updateStatus {
            $0.lastSuccess = Date()
            $0.lastError = nil
            $0.isPausedForAuthentication = false
        }
    }

    /// Records the owner account's incarnation the server named, if the suite remembers none yet
    /// (trust on first use: its first sync, or a suite synced before servers named one). From then
    /// on an answer about another account of that name is refused (`AccountIncarnation`).
    private func rememberAccountIncarnation() {
        guard client.accountIncarnation.known == nil, let named = client.accountIncarnation.latest else { return }
        do { client.accountIncarnation.know(try defaults.setAccountIncarnationIfNew(named)) } catch {
            logger.warning("could not record the account's incarnation in the suite", metadata: ["error": "\(error)"])
        }
    }

    /// After the suite was set up again (`configure`, starting over after its account was deleted):
    /// the incarnation it remembers now, none after a start over.
    func reloadAccountIncarnation() {
        client.accountIncarnation.know((try? defaults.syncState())?.accountIncarnation)
    }

    /// Notes a failed step: the status says what and when, and pauses for a refused token. A step
    /// cut short because the task was cancelled (`run` stopping) is no failure.
    func failed(_ error: SyncError) {
        guard !Task.isCancelled else { return }
        updateStatus {
            $0.lastFailure = Date()
            // The account's deletion stands until the suite is set up again: what a step fails
            // with after it (a refused token, an unreachable server) follows from it, and must not
            // hide it from `status` or from the next `configure`, which starts over because of it.
            if $0.isPausedForAuthentication, $0.lastError?.code == .accountDeleted { return }
            $0.lastError = error
            if error.kind == .authenticationNeeded { $0.isPausedForAuthentication = true }
        }
    }

    // MARK: Pulling

    private func pullOnce() async throws(SyncError) -> SyncReport {
        await enter(.pull)
        defer { leave(.pull) }
        try await adoptSharedEpochsIfNeeded()
        let state = try local { try defaults.syncState() }
        guard let cursor = state.cursor else {
            let report = try await join()
            try recordIncarnationIfNew(known: state.serverIncarnation)
            return report
        }
        // Cursor 0 (after `reset`, or a suite the server had not written yet): the whole suite again.
        guard cursor > 0 else { return try await readSnapshotAgain(known: state.serverIncarnation) }
        var since = cursor
        var report = SyncReport()
        while true {
            let page: ChangesPage
            let answeredBefore = pushesAnswered
            do {
                page = try await client.changes(since: since, limit: options.pageSize)
            } catch  where error.isCursorExpired {
                logger.info("the cursor expired: reading the server's suite again", metadata: ["suite": "\(client.suite)"])
                return try await readSnapshotAgain(known: state.serverIncarnation)
            } catch  where error.code == .suiteReset {
                return try await joinAgainAfterReset()
            }
            if since == cursor {
                if let restored = restoredIncarnation(known: state.serverIncarnation) {
                    return try await joinAgainAfterRestore(incarnation: restored)
                }
                try recordIncarnationIfNew(known: state.serverIncarnation)
                if page.lastRev < cursor {
                    // The server went back in time without saying so (same incarnation): a backup
                    // put back by hand. A plain suite heals as after a restore; an encrypted one
                    // trusts no server to say what it lost, so it reads the suite again and reports
                    // what is older than it had or left out (rolled back), keeping what it holds.
                    logger.warning(
                        "the server's revisions went back from \(cursor) to \(page.lastRev): it was restored from a backup without a new incarnation",
                        metadata: ["suite": "\(client.suite)"]
                    )
                    if sealer != nil { return try await readSnapshotAgain(known: state.serverIncarnation) }
                    return try await joinAgainAfterRestore(incarnation: state.serverIncarnation)
                }
            }
            if !page.entries.isEmpty || page.lastRev != since {
                report.add(try apply(page.entries, cursor: page.lastRev, detectingRollback: pushesAnswered == answeredBefore))
                options.progress?(SyncProgress(phase: .pulling, done: report.applied, total: nil))
            }
            since = page.lastRev
            if !page.hasMore { return report }
        }
    }

    /// A device's first sync of a suite, by the joining rule (`JoiningRule` in the core, which
    /// states it): the server's snapshot, the keys it lacks marked for upload.
    private func join() async throws(SyncError) -> SyncReport {
        let rule = try local { try JoiningRule(joining: defaults) }
        try await anchorIfNeeded()
        let snapshot = try await readSnapshot()
        let serverKeys = Set(snapshot.entries.map(\.key.exact))  // key ids, in an encrypted suite
        try local { try rule.markKeysTheServerLacks(in: defaults) { serverKeys.contains((sealer?.keys.keyID(for: $0) ?? $0).exact) } }
        var report = SyncReport()
        report.add(try apply(snapshot.entries, cursor: snapshot.head, policy: .joining(rule)))
        joinedSincePush = true
        logger.debug("joined the server's suite", metadata: ["suite": "\(client.suite)", "entries": "\(snapshot.entries.count)"])
        return report
    }

    /// After the operator reset the suite (`suite_reset`): the server's copy started again, empty,
    /// and other devices may have uploaded theirs since. The server's snapshot is merged by last
    /// writer wins (not by the joining rule: everything here was synced before; a value replaced
    /// here was acknowledged, so it is not a conflict), then every value and deletion this device
    /// holds is marked pending with its own stamp, so that each key ends with its latest write, a
    /// deletion included, on every device; `run` uploads at once.
    private func joinAgainAfterReset() async throws(SyncError) -> SyncReport {
        logger.warning(
            "the server's copy of the suite was reset by its operator: uploading what this device holds",
            metadata: ["suite": "\(client.suite)"]
        )
        return try await joinAgain(incarnation: nil)
    }

    /// What a device does when the server lost what it held (a reset, a restore): the server's
    /// snapshot merged by last writer wins, then every value and deletion this device holds marked
    /// pending with its own stamp (with `incarnation`, recorded in that same transaction).
    private func joinAgain(incarnation: String?, restored: Bool = false) async throws(SyncError) -> SyncReport {
        anchored = false
        try await anchorIfNeeded()
        let snapshot = try await readSnapshot()
        var entries = snapshot.entries
        if restored, let oldest = sealer?.keys.oldestAppliedEpoch {
            // A restored server holds what it held before this device's last rotation, sealed
            // under an epoch retired since (all but the epoch before an unfinished one): what the
            // device sealed again when it rotated, and the upload below seals it again.
            entries.removeAll { ($0.sealed?.epoch ?? oldest) < oldest }
        }
        var report = SyncReport()
        report.add(try apply(entries, cursor: snapshot.head))
        try local { _ = try defaults.markEverythingPending(serverIncarnation: incarnation) }
        joinedSincePush = true
        return report
    }

    /// After the server was restored from a backup (its incarnation changed, or a plain suite's
    /// revisions went back): it may lack writes it acknowledged, of this device and of others, and
    /// its revisions may repeat ones this device has seen. As after a reset (`joinAgain`), the new
    /// incarnation recorded with the marks; an encrypted suite reports nothing rolled back (the
    /// operator announced the restore). `run` uploads at once. Each key ends with the latest write
    /// any device holds, on the server and every device.
    private func joinAgainAfterRestore(incarnation: String?) async throws(SyncError) -> SyncReport {
        logger.warning(
            "the server was restored from a backup: uploading what this device holds",
            metadata: ["suite": "\(client.suite)", "incarnation": "\(incarnation ?? "unknown")"]
        )
        if let keys = sealer?.keys { try await restoreKeyBags(keys) }
        return try await joinAgain(incarnation: incarnation, restored: true)
    }

    /// Puts back the key bags of the epochs a restored server lacks (this device rotated the
    /// suite's key after the backup was taken, or began a rotation it has not finished), each
    /// signed by the epoch before: else the server would refuse every push under the current
    /// epoch. In a suite shared with other accounts, each with the members' part, sealed to the
    /// members the restored server lists (the present's, unless the backup brought its own
    /// authority), never to one whose removal is still due.
    private func restoreKeyBags(_ keys: SuiteKeys) async throws(SyncError) {
        let bags = try await client.keyBags()
        let held = max(bags.newestEpoch, 1)
        guard keys.currentEpoch > held else { return }
        var removed: [String] = []
        if keys.sharing?.isOwner == true, let due = try await rotationDue() { removed = try await stillRemoved(due) }
        for epoch in (held + 1)...keys.currentEpoch {
            var bag = try keys.signedKeyBag(epoch: epoch)
            bag.shared = try await KeyRotation.membersPart(self, keys: keys, epoch: epoch, bags: bags, excluding: removed)
            try await client.putKeyBag(epoch: epoch, bag: bag)
        }
    }

    /// The server's incarnation if it differs from the one this suite last synced with: the server
    /// was restored from a backup. Nil when it is the same, or either is unknown.
    func restoredIncarnation(known: String?) -> String? {
        guard let known, let current = client.serverIncarnation.current, current != known else { return nil }
        return current
    }

    /// Records the server's incarnation when the suite has none yet (its first sync, or a suite
    /// synced before servers named one).
    private func recordIncarnationIfNew(known: String?) throws(SyncError) {
        guard known == nil, let current = client.serverIncarnation.current else { return }
        try local { try defaults.setServerIncarnation(current) }
    }

    /// Anchors an encrypted suite's keys (`KeyAnchoring`) once per engine: at the join, or after
    /// the first push of a new suite (which takes no anchor before its first sealed entry). Only an
    /// anchor of other keys is an error; a suite this device cannot anchor (one an older version
    /// rotated, whose epochs it does not all hold) is anchored by a device that can, said once here.
    func anchorIfNeeded() async throws(SyncError) {
        guard let keys = sealer?.keys, !anchored else { return }
        do {
            try await KeyAnchoring.ensure(keys, client: client)
            anchored = true
        } catch  where error.code == .keyAnchorMismatch || error.kind == .unavailable || error.kind == .authenticationNeeded {
            throw error
        } catch  where error.code == .suiteNotEncrypted {
            return  // no sealed entry yet: after the first push
        } catch {
            anchored = true
            logger.warning("the suite's keys are not anchored on the server yet", metadata: ["suite": "\(client.suite)", "reason": "\(error)"])
        }
    }

    /// After `cursor_expired` (the server purged tombstones this device had not seen) or `reset`:
    /// the whole suite merged by last writer wins, and clean local keys the server no longer has
    /// removed; pending local changes stay, to be pushed.
    ///
    /// No push runs meanwhile: a push that settled while the snapshot was read (clearing the marks
    /// of keys the snapshot predates, applying winners it does not have) would have those keys
    /// taken for ones the server dropped, and removed for good. Called holding `.pull`; pushes
    /// take `.pull` only before `.push` (`pushPending`), never while holding it.
    private func readSnapshotAgain(known incarnation: String?) async throws(SyncError) -> SyncReport {
        await enter(.push)
        defer { leave(.push) }
        let lock = try await pushLock()  // nor in another process
        defer { lock.release() }
        let snapshot = try await readSnapshot()
        // A restored server lacks what it acknowledged: nothing is pruned for its sake.
        if let restored = restoredIncarnation(known: incarnation) { return try await joinAgainAfterRestore(incarnation: restored) }
        try recordIncarnationIfNew(known: incarnation)
        var report = SyncReport()
        // An encrypted suite's server is not trusted to say what it no longer has: what it leaves
        // out is kept and reported rather than removed.
        report.add(
            try apply(
                snapshot.entries,
                cursor: snapshot.head,
                policy: .lastWriterWins,
                pruning: sealer == nil,
                detectingRollback: true
            )
        )
        if sealer != nil { report.omitted = try omitted(from: snapshot.entries) }
        return report
    }

    /// Every page of the snapshot; the head is the first page's (later pages may include newer
    /// writes, which the next pull delivers again, harmlessly).
    private func readSnapshot() async throws(SyncError) -> (entries: [SyncEntry], head: UInt64) {
        var entries: [SyncEntry] = []
        var after: String? = nil
        var head: UInt64? = nil
        repeat {
            let page = try await client.snapshot(after: after, limit: options.pageSize)
            head = head ?? page.headRev
            entries += page.entries
            after = page.next
            options.progress?(SyncProgress(phase: .readingSnapshot, done: entries.count, total: nil))
        } while after != nil
        return (entries, head ?? 0)
    }

    /// Opens `entries` (in an encrypted suite), applies those that check out with `cursor`, and
    /// reports the others (those whose value is unavailable too: `withoutUnavailable`). Refused
    /// entries do not hold the cursor back: they are not applied, and the server's next write of
    /// their key comes as a new entry.
    ///
    /// With `detectingRollback` (no push was answered since the entries were read), an encrypted
    /// suite's entry older than what this device already accepted from the server is reported as
    /// rolled back (last writer wins has already kept it out).
    private func apply(
        _ entries: [SyncEntry],
        cursor: UInt64?,
        policy: RemotePolicy = .lastWriterWins,
        pruning: Bool = false,
        detectingRollback: Bool = false
    ) throws(SyncError) -> SyncReport {
        try checkClockNotBehind(entries)
        let (available, unavailable) = withoutUnavailable(entries)
        let (sealedOpened, sealedRefused) = try opened(available)
        let (opened, tooDeep) = withoutUnavailable(sealedOpened)
        let refused = unavailable + sealedRefused + tooDeep
        let keepingStale = sealer != nil && detectingRollback
        let records = refused.map { RefusedRecord(key: $0.key ?? $0.keyID, stamp: $0.stamp, reason: $0.reason) }
        let result = try local {
            try defaults.applyRemote(
                opened,
                cursor: cursor,
                policy: policy,
                pruning: pruning,
                refused: records,
                keepingStale: keepingStale,
                accounts: otherAccounts(opened)
            )
        }
        noteReplacements(result)
        var report = SyncReport()
        report.add(result)
        report.refused =
            refused
            + result.refused.map {
                RefusedEntry(keyID: sealer?.keys.keyID(for: $0.key) ?? $0.key, key: $0.key, stamp: $0.stamp, reason: $0.reason)
            }
        if !result.refused.isEmpty {
            logger.error(
                "refused entries stamped far ahead of this machine's clock",
                metadata: [
                    "suite": "\(client.suite)", "count": "\(result.refused.count)", "first": "\(result.refused[0].key)",
                ]
            )
        }
        if let sealer, keepingStale, !result.stale.isEmpty {
            report.refused += rolledBack(result.stale, among: opened, sealer: sealer)
        }
        // Counted here, once per pull, whatever step reports it again.
        if !report.refused.isEmpty { updateStatus { $0.refused = SyncStatus.lastRefused($0.refused + report.refused) } }
        return report
    }

    /// The account of each device of another account among `entries`' writers, as the server names
    /// it (`SyncEntry.account`; in a suite another account shares with this one, an entry naming
    /// none is the owner's): what the change feed reports as `Change.Source.anotherAccount`.
    private func otherAccounts(_ entries: [SyncEntry]) -> [UInt64: String] {
        var accounts: [UInt64: String] = [:]
        for entry in entries where entry.origin != defaults.origin {
            guard let account = entry.account ?? shared?.owner, !(shared?.account.isSameName(as: account) ?? false) else { continue }
            accounts[entry.origin] = account
        }
        return accounts
    }

    /// Entries stamped far ahead of this machine's clock are refused one by one (`applyRemote`),
    /// unless the server's clock says they are not ahead at all: then this device's clock is
    /// behind, and refusing them would drop honest writes for good. Nothing is applied until the
    /// clock is right (`run` tries again every 30 s and reports it meanwhile).
    private func checkClockNotBehind(_ entries: [SyncEntry]) throws(SyncError) {
        let wall = defaults.wallClockMilliseconds()
        guard let server = client.serverClock.milliseconds, HLC(milliseconds: server, counter: 0).isAhead(of: wall) else { return }
        // The server's clock is read to the second: a second of slack.
        guard entries.contains(where: { $0.hlc.isAhead(of: wall) && !$0.hlc.isAhead(of: server &+ 1000) }) else { return }
        // This device's fault, not the server's: a one-shot step fails at once; `run` tries again
        // after `retryAfter`.
        throw SyncError(
            .local,
            code: .clockSkew,
            """
            this device's clock is \((server - wall) / 1000) s behind the server's: nothing was applied, so that no honest change \
            is refused as one from the future; set the clock right
            """,
            retryAfter: .seconds(30)
        )
    }

    /// Tells the log when local values were replaced (each is in the conflict journal).
    private func noteReplacements(_ result: RemoteApplyResult) {
        var report = SyncReport()
        report.add(result)
        guard let summary = report.replacementSummary(suite: client.suite) else { return }
        // The first keys only: a pull may replace thousands, and a log line is for a person.
        let keys = result.replaced.prefix(20).joined(separator: ",") + (result.replaced.count > 20 ? ",…" : "")
        logger.notice("\(summary)", metadata: ["suite": "\(client.suite)", "keys": "\(keys)"])
    }

    // MARK: Pushing

    private func pushPending() async throws(SyncError) -> SyncReport {
        var report = SyncReport()
        // A device that never synced reads the snapshot before its first push (the joining rule);
        // before taking `.push`, which a pull may need (`readSnapshotAgain`).
        if try local({ try defaults.syncCursor() }) == nil { report = try await pullOnce() }
        if role == .read {
            // A read member changes nothing on the server: its local changes stay here, reported.
            // Unless the account writes again (invited back as a writer from another device).
            let pending = try local { try defaults.pendingCount() }
            let now = pending > 0 ? try await client.members().you : .read
            guard now != .read else {
                report.keptLocal = pending
                return report
            }
            try adoptRole(now)
        }
        await enter(.push)
        defer { leave(.push) }
        // One push of the suite at a time across processes and engines: a second waits, then finds
        // pending only what the first did not send (and reports only what it sent itself).
        let lock = try await pushLock()
        defer { lock.release() }
        if !pendingIndexChecked {
            // Changes a process of an older version marked without indexing them would wait forever.
            let indexed = try local { try defaults.indexUnindexedPending() }
            if indexed > 0 {
                logger.warning(
                    "\(indexed) pending change(s) marked by an older version of GroupDefaults were indexed",
                    metadata: ["suite": "\(client.suite)"]
                )
            }
            pendingIndexChecked = true
        }
        planner.cap = nil
        joinedSincePush = false
        while role != .read, let batch = try await nextBatch() {
            report.add(try await send(batch))
        }
        if report.pushed > 0 { try await anchorIfNeeded() }
        return report
    }

    /// The batch to send: the stored in-flight one (a retry sends the same body under the same id),
    /// else pending changes in key order from after the last batch's last key, round again,
    /// stored before they are sent; nil when nothing is pending.
    private func nextBatch() async throws(SyncError) -> OutgoingBatch? {
        if let inFlight = try local({ try defaults.inFlightBatch() }) {
            // Stored by an earlier attempt (this process's or one that ended): read back once.
            let request: PushRequest
            do { request = try JSONDecoder().decode(PushRequest.self, from: Data(inFlight.body)) } catch {
                // Not what this engine writes: drop it; the marks are still there.
                try local { try defaults.setInFlightBatch(nil) }
                throw SyncError(.local, "the stored in-flight batch was damaged and was dropped: \(error)")
            }
            // A batch stored before the suite's encryption changed (plain, and now sealed, or the
            // reverse) is never sent: the server refuses it, and a plain one would show the values.
            guard (request.ops.first?.sealed != nil) != (sealer == nil) else {
                try local { try defaults.setInFlightBatch(nil) }
                return try await nextBatch()
            }
            do {
                return OutgoingBatch(stored: inFlight, pushed: try pushedKeys(of: request), keyIDs: request.ops.map(\.key))
            } catch {
                try local { try defaults.setInFlightBatch(nil) }
                throw error
            }
        }
        let limits = try await serverLimits()
        // A device whose clock was wrong when it wrote stamps again what it wrote then, before
        // pushing it (the server would refuse those stamps).
        let restamped = try local { try defaults.recoverClockIfAhead() }
        if restamped > 0 {
            logger.warning("this device's clock had run ahead: \(restamped) change(s) were stamped again", metadata: ["suite": "\(client.suite)"])
        }
        // A change set aside that is no longer pending (another device's write replaced it) or
        // changed since is no longer this device's concern.
        planner.forgetChanged(stillPending: try local { try defaults.pendingStamps(forKeys: planner.setAside.keys) })
        // What is set aside on the way is journaled even if a page read or a seal throws.
        defer { journal(planner.takeNewlySetAside()) }
        let planned = try planner.nextBatch(
            limits: limits,
            now: .now,
            page: { after throws(SyncError) in try self.local { try self.defaults.pendingChanges(after: after, limit: PushPlanner.pageSize) } },
            encode: { change throws(SyncError) in try self.op(for: change) }
        )
        guard let planned else { return nil }
        let batchID = UUID().uuidString.lowercased()
        let batch = InFlightBatch(id: batchID, body: WireJSON.pushBody(deviceID: defaults.origin, batchID: batchID, encodedOps: planned.ops))
        try local { try defaults.setInFlightBatch(batch) }
        return OutgoingBatch(stored: batch, pushed: planned.pushed, keyIDs: planned.keyIDs)
    }

    /// Takes `role` as this account's role in the suite another account shares with it, in this
    /// engine and in the suite's stored settings (what `status` shows), when the server says it
    /// changed: an account that left and joined again with another role from another device.
    func adoptRole(_ role: SuiteRole) throws(SyncError) {
        guard var membership = shared, self.role != role else { return }
        logger.notice(
            "this account is now a \(role.rawValue) member of \(membership.owner)'s suite \(membership.suite)",
            metadata: ["suite": "\(client.suite)"]
        )
        self.role = role
        membership.role = role
        try local { try defaults.replaceSyncShare(membership.storedText) }
    }

    /// A batch about to be sent: its stored form (id and exact body), and, in the ops' order, the
    /// keys and stamps it pushes and the keys as the server sees them (names, or an encrypted
    /// suite's key ids), known when it was built (read back once when it was stored by an
    /// earlier attempt).
    struct OutgoingBatch {
        var stored: InFlightBatch
        var pushed: [(key: String, stamp: Stamp)]
        var keyIDs: [String]
    }

    /// Sends one batch and settles it; reports how many of its changes were acknowledged, and the
    /// local values that other devices' newer writes replaced.
    private func send(_ batch: OutgoingBatch) async throws(SyncError) -> SyncReport {
        let pushed = batch.pushed
        let response: PushResponse
        do {
            response = try await client.push(body: batch.stored.body)
        } catch  where error.kind == .rejected {
            let outcome = PushPlanner.outcome(of: error, isShared: shared != nil)
            // Sent again under its id only when thrown as it is; else the batch goes (its marks stay).
            if outcome != .rethrow { try local { try defaults.setInFlightBatch(nil) } }
            switch outcome {
            case .dropBatchAndThrow, .rethrow:
                throw error
            case .settle:
                logger.warning("the server refused a push", metadata: ["error": "\(error)"])
                planner.settle(refusal: error, pushed: pushed, keyIDs: batch.keyIDs, now: .now)
                journal(planner.takeNewlySetAside())
                return SyncReport()
            case .becomeReadMember:
                // A read member now (it joined again as one, from another device): its changes
                // stay here, reported, as any read member's.
                try adoptRole(.read)  // which ends the push loop
                var report = SyncReport()
                report.keptLocal = try local { try defaults.pendingCount() }
                return report
            case .sealAgain:
                // Sealed again (marks kept) once this device has the new key; at once if the key
                // file has it already (rotated here).
                if try await adoptSharedEpochs() || reloadKeys() {
                    throw SyncError(.unavailable, code: .staleKeyEpoch, "the suite's keys were rotated: sealing the changes again")
                }
                let serverEpoch = max((try? await client.keyBags().newestEpoch) ?? 0, 1)
                let mine = sealer?.keys.currentEpoch ?? 0
                if let failure = PushPlanner.staleEpochFailure(error, mine: mine, serverEpoch: serverEpoch) { throw failure }
                throw SyncError(.unavailable, code: .staleKeyEpoch, "the batch was sealed under an older key: sealing the changes again")
            case .retryLater:
                throw PushPlanner.clockAhead(error)
            }
        }
        pushesAnswered += 1
        // An op the server refused on its own stays pending, set aside until the key changes
        // again; the others were applied, or lost to a newer write, which is taken now rather than
        // at the next pull (the local change it replaces, still pending, goes to the conflict
        // journal).
        let (settled, winners) = planner.settle(response, pushed: pushed, now: .now)
        journal(planner.takeNewlySetAside())
        var report = SyncReport()
        if !winners.isEmpty {
            do {
                report.add(try apply(winners, cursor: nil))
            } catch {
                logger.warning("could not apply the winners of a push", metadata: ["error": "\(error)"])
            }
            report.applied = 0  // counted when the pull brings them
        }
        try local { _ = try defaults.clearPending(settled) }
        options.progress?(SyncProgress(phase: .pushing, done: pushed.count, total: nil))
        report.pushed = settled.count
        return report
    }

    /// Logs each change just set aside and keeps it in the conflict journal, with why (once per
    /// stamp: `PushPlanner.setAside` says which are new).
    private func journal(_ setAside: [PushPlanner.NewlySetAside]) {
        for change in setAside {
            logger.warning(
                "a change was not pushed",
                metadata: ["suite": "\(client.suite)", "key": "\(change.key)", "error": "\(change.error.detail)"]
            )
            do {
                try defaults.journalUnpushed(RefusedRecord(key: change.key, stamp: change.stamp, reason: "not pushed: \(change.error.detail)"))
            } catch {
                logger.warning("could not keep the refused change in the conflict journal", metadata: ["error": "\(error)"])
            }
        }
    }

    private func serverLimits() async throws(SyncError) -> SyncLimits {
        if let limits { return limits }
        let fetched = try await client.limits()
        limits = fetched
        return fetched
    }

    /// Applies entries that arrived by the event stream or a long-poll, with their cursor.
    func applyPulled(_ entries: [SyncEntry], cursor: UInt64?) async throws(SyncError) {
        await enter(.pull)
        defer { leave(.pull) }
        // A stream or long-poll of a server restored since the last pull: its revisions may repeat
        // ones seen before. The pull that follows (`listenLoop`) uploads and reads the suite again.
        if restoredIncarnation(known: try local({ try defaults.syncState() }).serverIncarnation) != nil {
            throw SyncError(.unavailable, "the server was restored from a backup: reading the suite again")
        }
        try await adoptSharedEpochsIfNeeded()
        _ = try apply(entries, cursor: cursor)
        succeeded()
        updateStatus { $0.cursor = cursor ?? $0.cursor }
    }

    func updateStatusListening(_ listening: Bool) { updateStatus { $0.isListening = listening } }

    func resumeAfterAuthentication() {
        updateStatus {
            $0.isPausedForAuthentication = false
            if $0.lastError?.kind == .authenticationNeeded { $0.lastError = nil }
        }
    }

    // MARK: Local work

    /// Runs a store operation, its failure as a `SyncError` of kind `local`.
    private func local<T>(_ body: () throws -> T) throws(SyncError) -> T {
        do { return try body() } catch { throw SyncError.local(error) }
    }

    enum Step { case push, pull }

    /// The suite's push lock (`SyncPushLock`), waited for while another process or engine holds it.
    private func pushLock() async throws(SyncError) -> SyncPushLock {
        let suite = client.suite
        let logger = self.logger
        do {
            return try await defaults.takePushLock {
                logger.info("another sync of this suite is pushing: waiting for it to finish", metadata: ["suite": "\(suite)"])
            }
        } catch is CancellationError {
            throw SyncError.cancelled
        } catch {
            throw SyncError.local(error)
        }
    }

    /// Waits until no other `step` runs; then this one does, until `leave`.
    private func enter(_ step: Step) async {
        guard busy.contains(step) else {
            _ = busy.insert(step)
            return
        }
        await withCheckedContinuation { waiting[step, default: []].append($0) }
    }

    private func leave(_ step: Step) {
        if waiting[step, default: []].isEmpty { busy.remove(step) } else { waiting[step]!.removeFirst().resume() }
    }
}

extension SyncError {
    /// A change set aside because a push may not carry it (`SyncLimits.breach`).
    init(_ breach: PushLimitBreach, key: String) {
        self.init(.rejected, code: breach.code, breach.message, key: key, limit: breach.limit)
    }
}
