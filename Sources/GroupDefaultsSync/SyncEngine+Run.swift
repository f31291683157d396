import Foundation
import GroupDefaults
import GroupDefaultsWire
import Logging

extension SyncEngine {
    /// Keeps the suite and the server in agreement until the task is cancelled: local changes (from
    /// any process, through the change feed) are pushed after `debounce`, coalesced per key; remote
    /// changes arrive through the event stream (or long-polls) and are applied as they come. With
    /// nothing changing, the one open stream is the only request. Transient failures are retried
    /// with backoff; a refused token pauses both directions, sending nothing, until the token
    /// changes.
    public func run() async {
        // Watch from now, so that nothing committed during the first sync is missed.
        let localChanges = defaults.changes()
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.pushLoop(localChanges) }
            group.addTask { await self.listenLoop() }
            await group.waitForAll()
        }
        updateStatusListening(false)
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
                _ = try await push()
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
        while !Task.isCancelled {
            do {
                _ = try await pull()
                // A join (after the operator reset the suite) marks what this device holds
                // pending: uploaded now, not at the next local change.
                if joinedSincePush { _ = try await push() }
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
                updateStatusListening(false)
                failed(error)
                await waitForNewToken()
            } catch  where error.kind == .protocolError && transport == .eventStream && [404, 405, 406].contains(error.status) {
                logger.warning("the server has no event stream: falling back to long-polls", metadata: ["error": "\(error)"])
                transport = .longPoll
            } catch  where error == SyncError.cancelled {
                break
            } catch  where error.code == .suiteReset || error.isCursorExpired {
                // Said by the event stream: the next pull reads the suite again (and says so); a
                // backoff all the same, should the server say it again at once.
                updateStatusListening(false)
                do { try await Task.sleep(for: backoff.next(retryAfter: nil)) } catch { break }
            } catch {
                updateStatusListening(false)
                if Task.isCancelled { break }
                failed(error)
                logger.warning("listening failed, will retry", metadata: ["error": "\(error)"])
                do { try await Task.sleep(for: backoff.next(retryAfter: error.retryAfter)) } catch { break }
            }
        }
    }

    /// A rotation this device began and did not finish (`finishRotation`), then the key rotation
    /// due after a removal (`rotateIfDue`), at each (re)connection of the listening loop; a
    /// failure is logged and tried again at the next.
    private func rotateIfDueLogged() async {
        do {
            if let rotation = try await finishRotation() {
                logger.notice(
                    "finished rotating the suite's keys to epoch \(rotation.keys.currentEpoch), begun before",
                    metadata: ["suite": "\(client.suite)"]
                )
            }
            if let (due, rotation) = try await rotateIfDue() {
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
    private var mayRotate: Bool { shared == nil && sealer?.keys.sharing?.isOwner == true }

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
            try await client.events(after: cursor, onOpen: { await self.updateStatusListening(true) }) { events in
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
        updateStatusListening(false)
    }

    private func longPoll() async throws(SyncError) {
        updateStatusListening(true)
        guard let cursor = try? defaults.syncCursor() else { return }
        let page = try await client.changes(since: cursor, limit: options.pageSize, wait: options.longPollWait)
        if !page.entries.isEmpty {
            try await applyPulled(page.entries, cursor: page.lastRev)
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
                guard mayRotate, due != triedRotation else { continue }
                if !entries.isEmpty { try await applyPulled(entries, cursor: cursor) }
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
        if !entries.isEmpty { try await applyPulled(entries, cursor: cursor) }
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
        let suite = defaults.suiteName
        if status.lastError?.code == .accountDeleted {
            await waitForStartOver()
            return
        }
        if status.lastError?.code == .notAMember, let shared {
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
            if !status.isPausedForAuthentication {
                logger.notice("a request with the token file's token succeeded: sync resumes", metadata: ["suite": "\(suite)"])
                return
            }
            // Another process cleared the pause this engine recorded: `configure` (a new token file,
            // joining again with a new invitation), or a one-shot sync with a working token.
            if let health = SyncHealth.stored(in: defaults), ![.paused, .notShared].contains(health.condition) {
                logger.notice(
                    "the suite's sync state was reset by another process (configure or sync): sync resumes",
                    metadata: ["suite": "\(suite)"]
                )
                resumeAfterAuthentication()
                return
            }
            let current = try? client.token()
            let changed = current != nil && current != seen
            seen = current ?? seen
            guard changed || ContinuousClock.now >= nextProbe else { continue }
            nextProbe = ContinuousClock.now + backoff.next(retryAfter: nil)
            // Tried with a request: a token that does not work keeps the pause, in silence.
            do {
                _ = try await client.changes(since: (try? defaults.syncCursor()) ?? 0, limit: 1)
            } catch  where error.kind == .authenticationNeeded {
                failed(error)
                if error.code == .accountDeleted {
                    await waitForStartOver()
                    return
                }
                continue
            } catch {
                // Not a refusal of the token (offline, an expired cursor): the loops deal with it.
            }
            logger.notice(
                changed ? "the token file holds a new token: sync resumes" : "the token file's token works: sync resumes",
                metadata: ["suite": "\(suite)"]
            )
            resumeAfterAuthentication()
            return
        }
    }

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
            if setUpAgain, status.isPausedForAuthentication {
                logger.notice("the suite was set up again (configure): sync starts over", metadata: ["suite": "\(suite)"])
                reloadAccountIncarnation()
                resumeAfterAuthentication()
                return
            }
        }
    }
}
