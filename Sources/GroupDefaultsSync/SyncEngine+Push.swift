import Foundation
import GroupDefaults
import GroupDefaultsWire
import Logging

// Suite → server: pending changes in batches (`PushPlanner` says what goes in each and what a
// push's answer settles), one in-flight batch stored before it is sent.
extension SyncEngine {
    func pushPending() async throws(SyncError) -> SyncReport {
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
        await turns.enter(.push)
        defer { turns.leave(.push) }
        // One push of the suite at a time across processes and engines: a second waits, then finds
        // pending only what the first did not send (and reports only what it sent itself).
        let lock = try await defaults.takePushLock(suite: client.suite, logger: logger)
        defer { lock.release() }
        planner.cap = nil
        joinedSincePush = false
        while role != .read, let batch = try await nextBatch() {
            report.add(try await send(batch))
        }
        if report.pushed > 0 { keyring.anchored = try await KeyAnchoring.anchorOnce(keyring, client: client) }
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
            guard (request.ops.first?.sealed != nil) != (keyring.keys == nil) else {
                try local { try defaults.setInFlightBatch(nil) }
                return try await nextBatch()
            }
            do {
                return OutgoingBatch(stored: inFlight, pushed: try keyring.pushedKeys(of: request), keyIDs: request.ops.map(\.key))
            } catch {
                try local { try defaults.setInFlightBatch(nil) }
                throw error
            }
        }
        let limits: SyncLimits
        if let known = self.limits {
            limits = known
        } else {  // before this engine's first batch of pending changes
            try defaults.indexOlderPending(suite: client.suite, logger: logger)
            limits = try await client.limits()
            self.limits = limits
        }
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
        defer { defaults.journal(planner.takeNewlySetAside(), suite: client.suite, logger: logger) }
        let planned = try planner.nextBatch(
            limits: limits,
            now: .now,
            page: { after throws(SyncError) in try local { try self.defaults.pendingChanges(after: after, limit: PushPlanner.pageSize) } },
            encode: { change throws(SyncError) in try self.keyring.op(for: change, from: self.defaults.origin) }
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
            return try await settle(refusal: error, of: batch)
        }
        // An op the server refused on its own stays pending, set aside until the key changes
        // again; the others were applied, or lost to a newer write, which is taken now rather than
        // at the next pull (the local change it replaces, still pending, goes to the conflict
        // journal).
        let (settled, winners) = planner.settle(response, pushed: pushed, now: .now)
        defaults.journal(planner.takeNewlySetAside(), suite: client.suite, logger: logger)
        let pinned = zip(response.results, pushed).filter { $0.0.status == .refused && $0.0.error == .pinnedKey }
        var report = try settlePinned(pinned.map { (name: $0.1.key, winner: $0.0.winner) })
        if !winners.isEmpty {
            do {
                report.add(try apply(winners, cursor: nil))
            } catch {
                // Not taken (this device's clock is behind theirs, or it lacks their key): the
                // changes they beat stay pending, or this device would keep values the server
                // replaced, which no pull brings again (the cursor is past them). Pushed again
                // once the error is dealt with, they meet their winners again. The throw ends the
                // step: the batches loop would otherwise send them again at once, and again.
                let beaten = Set(zip(response.results, pushed).filter { $0.0.status == .superseded }.map { $0.1.key.exact })
                try local { _ = try defaults.clearPending(settled.filter { !beaten.contains($0.key.exact) }) }
                throw error
            }
            report.applied = 0  // counted when the pull brings them
        }
        try local { _ = try defaults.clearPending(settled) }
        options.progress?(SyncProgress(phase: .pushing, done: pushed.count, total: nil))
        report.pushed = settled.count - pinned.count  // a pinned key's change was settled, not pushed
        return report
    }

    /// What a batch the server refused as a whole comes to (`PushPlanner.outcome(of:isShared:)`):
    /// thrown as it is (then sent again under its id), or the batch dropped (its marks stay) and
    /// its changes set aside, or kept here as a read member's, or sealed again under a newer key.
    private func settle(refusal error: SyncError, of batch: OutgoingBatch) async throws(SyncError) -> SyncReport {
        let outcome = PushPlanner.outcome(of: error, isShared: shared != nil)
        if outcome != .rethrow { try local { try defaults.setInFlightBatch(nil) } }
        switch outcome {
        case .dropBatchAndThrow, .rethrow:
            throw error
        case .settle:
            logger.warning("the server refused a push", metadata: ["error": "\(error)"])
            planner.settle(refusal: error, pushed: batch.pushed, keyIDs: batch.keyIDs, now: .now)
            defaults.journal(planner.takeNewlySetAside(), suite: client.suite, logger: logger)
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
            let bags = try? await client.keyBags()
            // A rotation begun here: its bag stored (seal under its epoch now), or another's.
            if let bags, try keyring.settleRotation(with: bags) {
                throw SyncError(.unavailable, code: .staleKeyEpoch, "the suite's keys were rotated: sealing the changes again")
            }
            let serverEpoch = max(bags?.newestEpoch ?? 0, 1)
            let mine = keyring.keys?.currentEpoch ?? 0
            if let failure = PushPlanner.staleEpochFailure(error, mine: mine, serverEpoch: serverEpoch) { throw failure }
            throw SyncError(.unavailable, code: .staleKeyEpoch, "the batch was sealed under an older key: sealing the changes again")
        case .retryLater:
            throw PushPlanner.clockAhead(error)
        }
    }

}

/// Runs a store operation, its failure as a `SyncError` of kind `local`.
func local<T>(_ body: () throws -> T) throws(SyncError) -> T {
    do { return try body() } catch { throw SyncError.local(error) }
}

extension SharedDefaults {
    /// Logs each change just set aside and keeps it in the conflict journal, with why (once per
    /// stamp: `PushPlanner.takeNewlySetAside` says which are new).
    func journal(_ setAside: [PushPlanner.NewlySetAside], suite: String, logger: Logger) {
        for change in setAside {
            logger.warning(
                "a change was not pushed",
                metadata: ["suite": "\(suite)", "key": "\(change.key)", "error": "\(change.error.detail)"]
            )
            do {
                try journalUnpushed(RefusedRecord(key: change.key, stamp: change.stamp, reason: "not pushed: \(change.error.detail)"))
            } catch {
                logger.warning("could not keep the refused change in the conflict journal", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Indexes the pending changes a process of an older version of GroupDefaults marked without
    /// indexing them (else they would wait for ever), and says so.
    func indexOlderPending(suite: String, logger: Logger) throws(SyncError) {
        let indexed = try local { try indexUnindexedPending() }
        guard indexed > 0 else { return }
        logger.warning("\(indexed) pending change(s) marked by an older version of GroupDefaults were indexed", metadata: ["suite": "\(suite)"])
    }

    /// The suite's push lock (`SyncPushLock`), waited for while another process or engine holds it.
    func takePushLock(suite: String, logger: Logger) async throws(SyncError) -> SyncPushLock {
        do {
            return try await takePushLock {
                logger.info("another sync of this suite is pushing: waiting for it to finish", metadata: ["suite": "\(suite)"])
            }
        } catch is CancellationError {
            throw SyncError.cancelled
        } catch {
            throw SyncError.local(error)
        }
    }
}

extension SyncError {
    /// A change set aside because a push may not carry it (`SyncLimits.breach`).
    init(_ breach: PushLimitBreach, key: String) {
        self.init(.rejected, code: breach.code, breach.message, key: key, limit: breach.limit)
    }
}
