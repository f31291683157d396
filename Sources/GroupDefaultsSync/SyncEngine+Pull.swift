import Foundation
import GroupDefaults
import GroupDefaultsWire
import Logging

// Server → suite: pages of changes after the cursor, the snapshot when there is none, and what a
// device does when the server lost what it held (a reset, a restore).
extension SyncEngine {
    func pullOnce() async throws(SyncError) -> SyncReport {
        await turns.enter(.pull)
        defer { turns.leave(.pull) }
        if keyring.needsSharedEpochs { _ = try await adoptSharedEpochs() }
        try await refreshPins()
        let state = try local { try defaults.syncState() }
        guard let cursor = state.cursor else {
            let report = try await join()
            try client.serverIncarnation.recordIfNew(known: state.serverIncarnation, in: defaults)
            return report
        }
        // Cursor 0 (after `reset`, or a suite the server had not written yet): the whole suite again.
        guard cursor > 0 else { return try await readSnapshotAgain(known: state.serverIncarnation) }
        var since = cursor
        var report = SyncReport()
        while true {
            let page: ChangesPage
            let answeredBefore = planner.answered
            do {
                page = try await client.changes(since: since, limit: options.pageSize)
            } catch  where error.isCursorExpired {
                logger.info("the cursor expired: reading the server's suite again", metadata: ["suite": "\(client.suite)"])
                return try await readSnapshotAgain(known: state.serverIncarnation)
            } catch  where error.code == .suiteReset {
                return try await joinAgain(after: .reset)
            }
            if since == cursor {
                if let restored = client.serverIncarnation.restored(since: state.serverIncarnation) {
                    return try await joinAgain(after: .restored(incarnation: restored))
                }
                try client.serverIncarnation.recordIfNew(known: state.serverIncarnation, in: defaults)
                if page.lastRev < cursor {
                    // The server went back in time without saying so (same incarnation): a backup
                    // put back by hand. A plain suite heals as after a restore; an encrypted one
                    // trusts no server to say what it lost, so it reads the suite again and reports
                    // what is older than it had or left out (rolled back), keeping what it holds.
                    logger.warning(
                        "the server's revisions went back from \(cursor) to \(page.lastRev): it was restored from a backup without a new incarnation",
                        metadata: ["suite": "\(client.suite)"]
                    )
                    if keyring.keys != nil { return try await readSnapshotAgain(known: state.serverIncarnation) }
                    return try await joinAgain(after: .restored(incarnation: state.serverIncarnation))
                }
            }
            if !page.entries.isEmpty || page.lastRev != since {
                report.add(try apply(page.entries, cursor: page.lastRev, detectingRollback: planner.answered == answeredBefore))
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
        keyring.anchored = try await KeyAnchoring.anchorOnce(keyring, client: client)
        let snapshot = try await client.wholeSnapshot(pageSize: options.pageSize, progress: options.progress)
        // Key ids, in an encrypted suite. An entry under a retired key epoch, which `Keyring.opened`
        // refuses: under the epoch before the current one, a rotation may not be finished yet, so
        // its key is the server's all the same, not uploaded, and the joining rule judges the key's
        // next entry (its seal under the new epoch, or a later write) as if it had come now; under
        // an older one it is history a rotation left (its device did not hold that version), and
        // its key counts as one the server lacks.
        let keys = keyring.keys
        let retired = snapshot.entries.filter { keyring.isRetired($0) }
        let unsealed = retired.filter { $0.sealed?.epoch == keys.map { $0.currentEpoch - 1 } }
        let history = Set(retired.map(\.key.exact)).subtracting(unsealed.map(\.key.exact))
        let serverKeys = Set(snapshot.entries.map(\.key.exact)).subtracting(history)
        let awaited = Set(unsealed.map(\.key.exact))
        try local {
            try rule.markKeysTheServerLacks(in: defaults) { serverKeys.contains((keys?.keyID(for: $0) ?? $0).exact) }
            if let newest = unsealed.map(\.hlc).max() {
                try defaults.keepJoiningRule(newest: newest) { awaited.contains((keys?.keyID(for: $0) ?? $0).exact) }
            }
        }
        var report = SyncReport()
        report.add(try apply(snapshot.entries, cursor: snapshot.head, policy: .joining(rule)))
        joinedSincePush = true
        logger.debug("joined the server's suite", metadata: ["suite": "\(client.suite)", "entries": "\(snapshot.entries.count)"])
        return report
    }

    /// Why the server lost what it held (`joinAgain`).
    enum Loss {
        /// The operator reset the suite (`suite_reset`): the server's copy started again, empty,
        /// and other devices may have uploaded theirs since.
        case reset
        /// The server was restored from a backup (its incarnation changed, or a plain suite's
        /// revisions went back): it may lack writes it acknowledged, of this device and of others,
        /// and its revisions may repeat ones this device has seen.
        case restored(incarnation: String?)
    }

    /// What a device does when the server lost what it held. The server's snapshot is merged by
    /// last writer wins (not by the joining rule: everything here was synced before; a value
    /// replaced here was acknowledged, so it is not a conflict), then every value and deletion this
    /// device holds is marked pending with its own stamp (with a restored server's incarnation,
    /// recorded in that same transaction), so that each key ends with its latest write, a deletion
    /// included, on the server and every device; `run` uploads at once. After a restore, an
    /// encrypted suite puts back the key bags the server lacks (`KeyRotation.restoreBags`) and
    /// reports nothing rolled back (the operator announced the restore).
    private func joinAgain(after loss: Loss) async throws(SyncError) -> SyncReport {
        var incarnation: String? = nil
        switch loss {
        case .reset:
            logger.warning(
                "the server's copy of the suite was reset by its operator: uploading what this device holds",
                metadata: ["suite": "\(client.suite)"]
            )
        case .restored(let restored):
            logger.warning(
                "the server was restored from a backup: uploading what this device holds",
                metadata: ["suite": "\(client.suite)", "incarnation": "\(restored ?? "unknown")"]
            )
            if let keys = keyring.keys { try await KeyRotation.restoreBags(self, keys: keys) }
            incarnation = restored
        }
        keyring.anchored = false
        keyring.anchored = try await KeyAnchoring.anchorOnce(keyring, client: client)
        let snapshot = try await client.wholeSnapshot(pageSize: options.pageSize, progress: options.progress)
        var entries = snapshot.entries
        if case .restored = loss, let oldest = keyring.keys?.oldestAppliedEpoch {
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

    /// After `cursor_expired` (the server purged tombstones this device had not seen) or `reset`:
    /// the whole suite merged by last writer wins, and clean local keys the server no longer has
    /// removed; pending local changes stay, to be pushed.
    ///
    /// No push runs meanwhile: a push that settled while the snapshot was read (clearing the marks
    /// of keys the snapshot predates, applying winners it does not have) would have those keys
    /// taken for ones the server dropped, and removed for good. Called holding `.pull`; pushes
    /// take `.pull` only before `.push` (`pushPending`), never while holding it.
    private func readSnapshotAgain(known incarnation: String?) async throws(SyncError) -> SyncReport {
        await turns.enter(.push)
        defer { turns.leave(.push) }
        let lock = try await defaults.takePushLock(suite: client.suite, logger: logger)  // nor in another process
        defer { lock.release() }
        let snapshot = try await client.wholeSnapshot(pageSize: options.pageSize, progress: options.progress)
        // A restored server lacks what it acknowledged: nothing is pruned for its sake.
        if let restored = client.serverIncarnation.restored(since: incarnation) {
            return try await joinAgain(after: .restored(incarnation: restored))
        }
        try client.serverIncarnation.recordIfNew(known: incarnation, in: defaults)
        var report = SyncReport()
        // An encrypted suite's server is not trusted to say what it no longer has: what it leaves
        // out is kept and reported rather than removed.
        report.add(
            try apply(
                snapshot.entries,
                cursor: snapshot.head,
                policy: .lastWriterWins,
                pruning: keyring.keys == nil,
                detectingRollback: true
            )
        )
        if keyring.keys != nil { report.omitted = try keyring.omitted(from: snapshot.entries, in: defaults) }
        return report
    }

    /// Opens `entries` (in an encrypted suite), applies those that check out with `cursor`, and
    /// reports the others (those whose value is unavailable too: `withoutUnavailable`). Refused
    /// entries do not hold the cursor back: they are not applied, and the server's next write of
    /// their key comes as a new entry.
    ///
    /// With `detectingRollback` (no push was answered since the entries were read), an encrypted
    /// suite's entry older than what this device already accepted from the server is reported as
    /// rolled back (last writer wins has already kept it out).
    func apply(
        _ entries: [SyncEntry],
        cursor: UInt64?,
        policy: RemotePolicy = .lastWriterWins,
        pruning: Bool = false,
        detectingRollback: Bool = false
    ) throws(SyncError) -> SyncReport {
        if let behind = client.serverClock.deviceBehind(defaults.wallClockMilliseconds(), taking: entries) { throw behind }
        let (available, unavailable) = keyring.withoutUnavailable(entries)
        let (sealedOpened, sealedRefused) = try keyring.opened(available)
        let (opened, tooDeep) = keyring.withoutUnavailable(sealedOpened)
        let refused = unavailable + sealedRefused + tooDeep
        let keepingStale = keyring.keys != nil && detectingRollback
        let records = refused.map { RefusedRecord(key: $0.key ?? $0.keyID, stamp: $0.stamp, reason: $0.reason) }
        let result = try local {
            try defaults.applyRemote(
                opened,
                cursor: cursor,
                policy: policy,
                pruning: pruning,
                refused: records,
                keepingStale: keepingStale,
                accounts: opened.otherAccountsWriters(device: defaults.origin, shared: shared)
            )
        }
        result.logReplacements(suite: client.suite, to: logger)
        var report = SyncReport()
        report.add(result)
        report.refused =
            refused
            + result.refused.map {
                RefusedEntry(keyID: keyring.keys?.keyID(for: $0.key) ?? $0.key, key: $0.key, stamp: $0.stamp, reason: $0.reason)
            }
        if !result.refused.isEmpty {
            logger.error(
                "refused entries stamped far ahead of this machine's clock",
                metadata: [
                    "suite": "\(client.suite)", "count": "\(result.refused.count)", "first": "\(result.refused[0].key)",
                ]
            )
        }
        if keepingStale, !result.stale.isEmpty {
            report.refused += keyring.rolledBack(result.stale, among: opened)
        }
        // Counted here, once per pull, whatever step reports it again.
        if !report.refused.isEmpty { board.update { $0.refused = SyncStatus.lastRefused($0.refused + report.refused) } }
        return report
    }

    /// Applies entries that arrived by the event stream or a long-poll, with their cursor.
    func applyPulled(_ entries: [SyncEntry], cursor: UInt64?) async throws(SyncError) {
        await turns.enter(.pull)
        defer { turns.leave(.pull) }
        // A stream or long-poll of a server restored since the last pull: its revisions may repeat
        // ones seen before. The pull that follows (`listenLoop`) uploads and reads the suite again.
        if client.serverIncarnation.restored(since: try local({ try defaults.syncState() }).serverIncarnation) != nil {
            throw SyncError(.unavailable, "the server was restored from a backup: reading the suite again")
        }
        if keyring.needsSharedEpochs { _ = try await adoptSharedEpochs() }
        _ = try apply(entries, cursor: cursor)
        succeeded()
        board.update { $0.cursor = cursor ?? $0.cursor }
    }
}

extension SyncClient {
    /// Every page of the snapshot; the head is the first page's (later pages may include newer
    /// writes, which the next pull delivers again, harmlessly).
    func wholeSnapshot(
        pageSize: Int,
        progress: (@Sendable (SyncProgress) -> Void)?
    ) async throws(SyncError) -> (entries: [SyncEntry], head: UInt64) {
        var entries: [SyncEntry] = []
        var after: String? = nil
        var head: UInt64? = nil
        repeat {
            let page = try await snapshot(after: after, limit: pageSize)
            head = head ?? page.headRev
            entries += page.entries
            after = page.next
            progress?(SyncProgress(phase: .readingSnapshot, done: entries.count, total: nil))
        } while after != nil
        return (entries, head ?? 0)
    }
}

extension ServerClock {
    /// Entries stamped far ahead of this machine's clock (`wall`) are refused one by one
    /// (`applyRemote`), unless the server's clock says they are not ahead at all: then this
    /// device's clock is behind, and refusing them would drop honest writes for good. The error a
    /// step fails with then, applying nothing until the clock is right (`run` tries again every
    /// 30 s and reports it meanwhile); nil when the clock is not behind.
    func deviceBehind(_ wall: UInt64, taking entries: [SyncEntry]) -> SyncError? {
        guard let server = milliseconds, HLC(milliseconds: server, counter: 0).isAhead(of: wall) else { return nil }
        // The server's clock is read to the second: a second of slack.
        guard entries.contains(where: { $0.hlc.isAhead(of: wall) && !$0.hlc.isAhead(of: server &+ 1000) }) else { return nil }
        // This device's fault, not the server's: a one-shot step fails at once; `run` tries again
        // after `retryAfter`.
        return SyncError(
            .local,
            code: .clockSkew,
            """
            this device's clock is \((server - wall) / 1000) s behind the server's: nothing was applied, so that no honest change \
            is refused as one from the future; set the clock right
            """,
            retryAfter: .seconds(30)
        )
    }
}

extension [SyncEntry] {
    /// The account of each device of another account among these entries' writers, as the server
    /// names it (`SyncEntry.account`; in a suite another account shares with this one, an entry
    /// naming none is the owner's), leaving out this `device`: what the change feed reports as
    /// `Change.Source.anotherAccount`.
    func otherAccountsWriters(device: UInt64, shared: Membership?) -> [UInt64: String] {
        var accounts: [UInt64: String] = [:]
        for entry in self where entry.origin != device {
            guard let account = entry.account ?? shared?.owner, !(shared?.account.isSameName(as: account) ?? false) else { continue }
            accounts[entry.origin] = account
        }
        return accounts
    }
}

extension RemoteApplyResult {
    /// Tells the log when local values were replaced (each is in the conflict journal).
    func logReplacements(suite: String, to logger: Logger) {
        var report = SyncReport()
        report.add(self)
        guard let summary = report.replacementSummary(suite: suite) else { return }
        // The first keys only: a pull may replace thousands, and a log line is for a person.
        let keys = replaced.prefix(20).joined(separator: ",") + (replaced.count > 20 ? ",…" : "")
        logger.notice("\(summary)", metadata: ["suite": "\(suite)", "keys": "\(keys)"])
    }
}

extension KeyAnchoring {
    /// Anchors an encrypted suite's keys once per engine: at the join, or after the first push of a
    /// new suite (which takes no anchor before its first sealed entry); whether the engine counts
    /// the suite as anchored from now on (`Keyring.anchored`). Only an anchor of other keys is an
    /// error; a suite this device cannot anchor (one an older version rotated, whose epochs it does
    /// not all hold) is anchored by a device that can, said once here.
    static func anchorOnce(_ keyring: Keyring, client: SyncClient) async throws(SyncError) -> Bool {
        guard let keys = keyring.keys, !keyring.anchored else { return keyring.anchored }
        do {
            try await ensure(keys, client: client)
        } catch  where error.code == .keyAnchorMismatch || error.kind == .unavailable || error.kind == .authenticationNeeded {
            throw error
        } catch  where error.code == .suiteNotEncrypted {
            return false  // no sealed entry yet: after the first push
        } catch {
            keyring.logger.warning(
                "the suite's keys are not anchored on the server yet",
                metadata: ["suite": "\(client.suite)", "reason": "\(error)"]
            )
        }
        return true
    }
}
