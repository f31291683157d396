import Foundation
import GroupDefaults
import GroupDefaultsWire
import Logging

/// What `SyncEngine.run()` does: keeps the suite and the server in agreement until the task is
/// cancelled, through the engine's steps. Local changes (from any process, through the change feed)
/// are pushed after `debounce`, coalesced per key; remote changes arrive through the event stream
/// (or long-polls) and are applied as they come. With nothing changing, the one open stream is the
/// only request. Transient failures are retried with backoff; a refused token pauses both
/// directions, sending nothing, until the token changes.
///
/// The two loops share what this actor holds: a key rotation the stream announced, which pushes
/// wait for, and a pause, which both wait out together.
actor SyncRunner {
    let engine: SyncEngine
    /// The key rotation the owner's event stream announced and `run` has not tried yet: its pushes
    /// wait for it, so that nothing more goes out under the old key.
    private var announcedRotation: KeyRotationDue?
    /// The last announced rotation `run` tried: announced again (it failed, or this device cannot
    /// make it), it is not tried again until the next connection.
    private var triedRotation: KeyRotationDue?
    /// Pushes waiting for `announcedRotation` to be tried.
    private var rotationWaiters: [CheckedContinuation<Void, Never>] = []
    /// While paused for authentication (`waitForNewToken`): the other loop, waiting for the same
    /// outcome; nil when not paused.
    private var pausedLoops: [CheckedContinuation<Void, Never>]?

    init(_ engine: SyncEngine) { self.engine = engine }

    private nonisolated var defaults: SharedDefaults { engine.defaults }
    private nonisolated var client: SyncClient { engine.client }
    private nonisolated var options: SyncEngine.Options { engine.options }
    private nonisolated var logger: Logger { engine.logger }
    private nonisolated var board: StatusBoard { engine.board }

    /// Runs both loops until the task is cancelled.
    func run() async {
        // Watch from now, so that nothing committed during the first sync is missed.
        let localChanges = defaults.suiteChanges()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.pushLoop(localChanges) }
            group.addTask { await self.listenLoop() }
            await group.waitForAll()
        }
        board.update { $0.isListening = false }
    }

    // MARK: Local → server

    private func pushLoop(_ localChanges: SharedDefaults.Changes) async {
        await pushUntilDone()
        for await change in localChanges {
            if change.isRemote { continue }  // applied from the server: never pushed back
            do { try await Task.sleep(for: options.debounce) } catch { break }
            await pushUntilDone()
        }
    }

    /// Pushes what is pending, retrying transient failures with backoff and waiting out a refused
    /// token; returns once nothing pushable is pending, or when the task is cancelled.
    private func pushUntilDone() async {
        var backoff = Backoff(initial: options.initialBackoff, maximum: options.maximumBackoff)
        while !Task.isCancelled {
            // A rotation the stream announced is made before anything more is pushed.
            await rotationTried()
            do {
                _ = try await engine.push()
                return
            } catch  where error.kind == .authenticationNeeded {
                await waitForNewToken()
            } catch {
                // Stopping (SIGTERM) cancels a push in flight: no failure to report.
                if Task.isCancelled || error == SyncError.cancelled { return }
                logger.warning("push failed, will retry", metadata: ["error": "\(error)"])
                do { try await Task.sleep(for: backoff.next(retryAfter: error.retryAfter)) } catch { return }
            }
        }
    }

    // MARK: Server → local

    private func listenLoop() async {
        defer { endRotationWait() }
        var backoff = Backoff(initial: options.initialBackoff, maximum: options.maximumBackoff)
        var transport = options.transport
        var failing = false  // logged "listening failed": the next pull that succeeds says so
        while !Task.isCancelled {
            do {
                _ = try await engine.pull()
                if failing {
                    logger.notice("reached the server again: sync goes on", metadata: ["suite": "\(client.suite)"])
                    failing = false
                }
                // A join (after the operator reset the suite) marks what this device holds
                // pending: uploaded now, not at the next local change.
                if await engine.joinedSincePush { _ = try await engine.push() }
                await rotateIfDueLogged()
                switch transport {
                case .eventStream:
                    try await listenToEvents()
                    backoff.reset()  // the server ended the stream (a restart): catch up and reconnect
                case .longPoll:
                    try await longPoll()
                    backoff.reset()
                }
            } catch  where error.kind == .authenticationNeeded {
                // Also when the event stream says so: the status (and `status`) shows the pause.
                board.update { $0.isListening = false }
                board.failed(error)
                await waitForNewToken()
            } catch  where error.kind == .protocolError && transport == .eventStream && [404, 405, 406].contains(error.status) {
                logger.warning("the server has no event stream: falling back to long-polls", metadata: ["error": "\(error)"])
                transport = .longPoll
            } catch  where error == SyncError.cancelled {
                break
            } catch  where error.code == .suiteReset || error.isCursorExpired {
                // Said by the event stream: the next pull reads the suite again (and says so); a
                // backoff all the same, should the server say it again at once.
                board.update { $0.isListening = false }
                do { try await Task.sleep(for: backoff.next(retryAfter: nil)) } catch { break }
            } catch {
                board.update { $0.isListening = false }
                if Task.isCancelled { break }
                board.failed(error)
                logger.warning("listening failed, will retry", metadata: ["error": "\(error)"])
                failing = true
                do { try await Task.sleep(for: backoff.next(retryAfter: error.retryAfter)) } catch { break }
            }
        }
    }

    /// A rotation this device began and did not finish (`finishRotation`), then the key rotation
    /// due after a removal (`rotateIfDue`), at each (re)connection of the listening loop; a
    /// failure is logged and tried again at the next.
    private func rotateIfDueLogged() async {
        do {
            if let rotation = try await engine.sharing.finishRotation() {
                logger.notice(
                    "finished rotating the suite's keys to epoch \(rotation.keys.currentEpoch), begun before",
                    metadata: ["suite": "\(client.suite)"]
                )
            }
            if let (due, rotation) = try await engine.sharing.rotateIfDue() {
                logger.notice(
                    "rotated the suite's keys to epoch \(rotation.keys.currentEpoch): \(due.removed.joined(separator: ", ")) held them when removed",
                    metadata: ["suite": "\(client.suite)"]
                )
            }
        } catch {
            if !Task.isCancelled {
                logger.warning("the key rotation due after a removal failed; tried again at the next connection", metadata: ["error": "\(error)"])
            }
        }
        endRotationWait()
    }

    /// The announcement ending the event stream (`applyEvents`), so that the listening loop makes
    /// the rotation at once, as at a new connection.
    private static let rotationAnnounced = SyncError(.local, "the server announced a key rotation due")

    /// Whether this engine could make a rotation the stream announces: the owner key's holder.
    private var mayRotate: Bool {
        get async {
            guard engine.shared == nil else { return false }
            return await engine.keyring.keys?.sharing?.isOwner == true
        }
    }

    /// Waits until the rotation the stream announced (if any) was tried, or the task is cancelled.
    private func rotationTried() async {
        while announcedRotation != nil, !Task.isCancelled {
            await withCheckedContinuation { rotationWaiters.append($0) }
        }
    }

    /// The announced rotation was tried (or `run` stops listening): the pushes waiting go on.
    private func endRotationWait() {
        if let announcedRotation { triedRotation = announcedRotation }
        announcedRotation = nil
        let waiters = rotationWaiters
        rotationWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    private func listenToEvents() async throws(SyncError) {
        guard let cursor = try? defaults.syncCursor() else { return }
        do {
            try await client.events(after: cursor, onOpen: { self.board.update { $0.isListening = true } }) { events in
                try await self.applyEvents(events)
            }
        } catch let error as SyncError where error == Self.rotationAnnounced {
            // Not a failure: the loop rotates and listens again.
        } catch let error as SyncError {
            throw error
        } catch is CancellationError {
            throw SyncError.cancelled
        } catch {
            throw SyncError(.unavailable, "the event stream failed: \(error)")
        }
        board.update { $0.isListening = false }
    }

    private func longPoll() async throws(SyncError) {
        board.update { $0.isListening = true }
        guard let cursor = try? defaults.syncCursor() else { return }
        let page = try await client.changes(since: cursor, limit: options.pageSize, wait: options.longPollWait)
        if !page.entries.isEmpty {
            try await engine.applyPulled(page.entries, cursor: page.lastRev)
        }
    }

    /// Events of the stream: entries (`id:` = revision), or the server saying the token stopped
    /// working or the cursor expired.
    private func applyEvents(_ events: [ServerSentEvent]) async throws(SyncError) {
        var entries: [SyncEntry] = []
        var cursor: UInt64?
        for event in events {
            let decoded: SyncStreamEvent?
            do { decoded = try SyncStreamEvent(event) } catch {
                throw SyncError(.protocolError, "an event is not an entry: \(error)")
            }
            switch decoded {
            case .entry(let entry, let revision)?:
                entries.append(entry)
                if let revision { cursor = revision }
            case .refusal(let code, let detail)?:
                // The same meaning as the answer to a request (a cursor that expired makes the next
                // pull re-read the snapshot).
                throw SyncError(refusal: code, status: nil, detail)
            case .rotationDue(let due)?:
                // A removal made it due: rotated now, before anything more is pushed, unless this
                // device cannot or tried this one already (then the next connection tries again).
                guard await mayRotate, due != triedRotation else { continue }
                if !entries.isEmpty { try await engine.applyPulled(entries, cursor: cursor) }
                logger.notice(
                    "the server says a key rotation is due: \(due.removed.joined(separator: ", ")) held the suite's keys when removed",
                    metadata: ["suite": "\(client.suite)"]
                )
                announcedRotation = due
                throw Self.rotationAnnounced
            case nil:
                continue
            }
        }
        if !entries.isEmpty { try await engine.applyPulled(entries, cursor: cursor) }
    }

    // MARK: Authentication

    /// Sends nothing until sync can go on, or the task is cancelled. Both loops of `run` may come
    /// here: the first waits (`waitUntilResumable`) and logs, the other waits for the same outcome.
    func waitForNewToken() async {
        if pausedLoops != nil {
            await withCheckedContinuation { pausedLoops?.append($0) }
            return
        }
        pausedLoops = []
        await waitUntilResumable()
        let waiting = pausedLoops ?? []
        pausedLoops = nil
        for loop in waiting { loop.resume() }
    }

    /// The pause of a refused token, or of a suite no longer shared: until the token file holds a
    /// token the server takes (tried when the file changes, and every `tokenProbeBackoff` in case
    /// it changed before the refusal was seen), another process resets the suite's sync state
    /// (`configure`, or a one-shot sync that succeeded), or the task is cancelled. A refusal that
    /// says the account was deleted goes on as that pause (`waitForStartOver`).
    private func waitUntilResumable() async {
        if engine.status.lastError?.code == .accountDeleted {
            await waitForStartOver()
            return
        }
        let suite = defaults.suiteName
        if engine.status.lastError?.code == .notAMember, let shared = engine.shared {
            logger.error(
                "\(shared.owner)'s suite \(shared.suite) is no longer shared with this account: sync is paused until it joins again with a new invitation",
                metadata: ["suite": "\(suite)"]
            )
        } else {
            logger.error("authentication needed: sync is paused until the token is replaced", metadata: ["suite": "\(suite)"])
        }
        var seen = try? client.token()
        var backoff = Backoff(initial: Self.tokenProbeBackoff.initial, maximum: Self.tokenProbeBackoff.maximum)
        var nextProbe = ContinuousClock.now + backoff.next(retryAfter: nil)
        var unconfigured = false
        while !Task.isCancelled {
            do { try await Task.sleep(for: options.tokenCheckInterval) } catch { return }
            guard stillSyncs(noted: &unconfigured) else { continue }
            if resumedElsewhere() { return }
            let current = try? client.token()
            let changed = current != nil && current != seen
            seen = current ?? seen
            guard changed || ContinuousClock.now >= nextProbe else { continue }
            nextProbe = ContinuousClock.now + backoff.next(retryAfter: nil)
            switch await tokenWorks() {
            case .refused: continue
            case .accountDeleted:
                await waitForStartOver()
                return
            case .works:
                logger.notice(
                    changed ? "the token file holds a new token: sync resumes" : "the token file's token works: sync resumes",
                    metadata: ["suite": "\(suite)"]
                )
                board.resumedAfterAuthentication()
                return
            }
        }
    }

    /// Whether the pause ended without this loop: a request of the other loop or of this engine
    /// succeeded with the token file's token, or another process cleared the pause this engine
    /// recorded (`configure`: a new token file, joining again with a new invitation; or a one-shot
    /// sync with a working token).
    private func resumedElsewhere() -> Bool {
        let suite = defaults.suiteName
        if !engine.status.isPausedForAuthentication {
            logger.notice("a request with the token file's token succeeded: sync resumes", metadata: ["suite": "\(suite)"])
            return true
        }
        guard let health = SyncHealth.stored(in: defaults), ![.paused, .notShared].contains(health.condition) else { return false }
        logger.notice(
            "the suite's sync state was reset by another process (configure or sync): sync resumes",
            metadata: ["suite": "\(suite)"]
        )
        board.resumedAfterAuthentication()
        return true
    }

    /// What a request with the token file's token says of it. A token that does not work keeps the
    /// pause, in silence; a failure that is no refusal of the token (offline, an expired cursor) is
    /// left to the loops.
    private func tokenWorks() async -> TokenProbe {
        do {
            _ = try await client.changes(since: (try? defaults.syncCursor()) ?? 0, limit: 1)
        } catch  where error.kind == .authenticationNeeded {
            board.failed(error)
            return error.code == .accountDeleted ? .accountDeleted : .refused
        } catch {}
        return .works
    }

    private enum TokenProbe { case works, refused, accountDeleted }

    /// How often a paused engine tries its token file's token with a request even if the file did
    /// not change (it may have changed before the refusal was seen): after 3 to 6 s, then about twice
    /// as long each time, at most every minute (`Backoff`).
    static let tokenProbeBackoff = (initial: Duration.seconds(6), maximum: Duration.seconds(60))

    /// Whether the suite is still configured to sync; says so once (`noted`) when it no longer is
    /// (unconfigured while a pause waits).
    private func stillSyncs(noted: inout Bool) -> Bool {
        guard (try? SyncSettings.stored(in: defaults)) != nil else {
            if !noted {
                logger.notice("the suite no longer syncs (unconfigured): nothing is sent for it", metadata: ["suite": "\(defaults.suiteName)"])
            }
            noted = true
            return false
        }
        return true
    }

    /// The account the suite synced with was deleted, and its name is a new account's: sends
    /// nothing, whatever token the file holds, until the suite is set up again (`configure`, which
    /// starts over: `SyncSetup` turns sync off and on, which forgets the account incarnation the
    /// suite held and records a new moment it was configured), or the task is cancelled. Everything
    /// the suite holds stays. (Not the sync note: another process's failed step may rewrite it.)
    private func waitForStartOver() async {
        let suite = defaults.suiteName
        logger.error(
            "this account was deleted on the server, and its name is now a new account's: sync is paused, keeping this device's data, until the suite is set up again",
            metadata: ["suite": "\(suite)"]
        )
        let paused = try? defaults.syncState()
        let pausedSettings = try? SyncSettings.stored(in: defaults)
        var unconfigured = false
        var elsewhere = false
        while !Task.isCancelled {
            do { try await Task.sleep(for: options.tokenCheckInterval) } catch { return }
            guard stillSyncs(noted: &unconfigured), let now = try? defaults.syncState() else { continue }
            let setUpAgain = now.accountIncarnation != paused?.accountIncarnation || now.configuredAt != paused?.configuredAt
            // This engine talks to one server with one token file: set up with others, the suite
            // is synced by a `run` started anew, never by this one (it would send to the old ones).
            if setUpAgain, let settings = try? SyncSettings.stored(in: defaults), !settings.sameConnection(as: pausedSettings) {
                if !elsewhere {
                    logger.notice(
                        "the suite was set up again with another server, token file or keys: restart the run to sync it; this one sends nothing",
                        metadata: ["suite": "\(suite)"]
                    )
                }
                elsewhere = true
                continue
            }
            if setUpAgain, engine.status.isPausedForAuthentication {
                logger.notice("the suite was set up again (configure): sync starts over", metadata: ["suite": "\(suite)"])
                client.accountIncarnation.reload(from: defaults)
                board.resumedAfterAuthentication()
                return
            }
        }
    }
}
