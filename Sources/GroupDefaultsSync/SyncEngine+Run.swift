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

    /// The key rotation due after a removal (`rotateIfDue`), at each (re)connection of the
    /// listening loop; a failure is logged and tried again at the next.
    private func rotateIfDueLogged() async {
        do {
            if let (due, rotation) = try await rotateIfDue() {
                logger.notice(
                    "rotated the suite's keys to epoch \(rotation.keys.currentEpoch): \(due.removed.joined(separator: ", ")) held them when removed",
                    metadata: ["suite": "\(client.suite)"]
                )
            }
        } catch {
            if Task.isCancelled { return }
            logger.warning("the key rotation due after a removal failed; tried again at the next connection", metadata: ["error": "\(error)"])
        }
    }

    private func listenToEvents() async throws(SyncError) {
        guard let cursor = try? defaults.syncCursor() else { return }
        do {
            try await client.events(after: cursor, onOpen: { await self.updateStatusListening(true) }) { events in
                try await self.applyEvents(events)
            }
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
            case nil:
                continue
            }
        }
        if !entries.isEmpty { try await applyPulled(entries, cursor: cursor) }
    }

    // MARK: Authentication

    /// The account the suite synced with was deleted, and its name is a new account's: sends
    /// nothing, whatever token the file holds, until the suite is set up again (`configure`, which
    /// starts over: `SyncSetup`), or the task is cancelled. Everything the suite holds stays.
    private func waitForStartOver() async {
        let suite = defaults.suiteName
        logger.error(
            "this account was deleted on the server, and its name is now a new account's: sync is paused, keeping this device's data, until the suite is set up again",
            metadata: ["suite": "\(suite)"]
        )
        while !Task.isCancelled {
            do { try await Task.sleep(for: options.tokenCheckInterval) } catch { return }
            if SyncHealth.stored(in: defaults)?.condition != .accountDeleted {
                logger.notice("the suite was set up again: sync starts over", metadata: ["suite": "\(suite)"])
                reloadAccountIncarnation()
                resumeAfterAuthentication()
                return
            }
        }
    }

    /// Sends nothing until the token differs from the one refused (checked locally every
    /// `tokenCheckInterval`), or the task is cancelled.
    func waitForNewToken() async {
        let refused = try? client.token()
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
        while !Task.isCancelled {
            do { try await Task.sleep(for: options.tokenCheckInterval) } catch { return }
            if let current = try? client.token(), current != refused {
                logger.notice("the token file holds a new token: sync resumes", metadata: ["suite": "\(suite)"])
                resumeAfterAuthentication()
                return
            }
            // `configure` (a new token file, or joining again with a new invitation) clears the
            // paused state it leaves in the suite.
            if let health = SyncHealth.stored(in: defaults), health.condition != .paused, health.condition != .notShared {
                logger.notice("the suite was configured again: sync resumes", metadata: ["suite": "\(suite)"])
                resumeAfterAuthentication()
                return
            }
        }
    }
}
