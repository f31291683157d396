package import GroupDefaultsWire

/// The push rule, once, for every backend: a pure function of what a suite holds and what arrives.
///
/// A backend loads the suite's counters, the batch record of the push's id (if any) and the entries
/// held for the push's keys, calls `run`, and persists what it returns in the same transaction:
///
/// - **Idempotency.** A batch id already recorded for this device answers with the recorded
///   response if the ops are the same (same digest), and changes nothing; other ops under the same
///   id are refused (`idempotencyMismatch`).
/// - **Last writer wins.** Per key, an op replaces the held entry (value or tombstone) only if its
///   stamp, (HLC, device id), is larger. Ops apply in order, so a later op of the batch on the same
///   key competes with the earlier one.
/// - **Re-seals and restores.** An op may name the `origin` of the write it carries, which another
///   device made: after a key rotation, a device seals the suite's entries again under the new
///   epoch, keeping their stamps; after an operator's reset, a device uploads every entry it
///   holds, other devices' included. Such an op, and any sealed op (a device's own write sealed
///   again: after a restore, the server may hold it under an epoch retired since), competes by
///   last writer wins with its own stamp, and replaces an entry of the very same stamp only to
///   seal it under a newer epoch (a newer write meanwhile needs no re-seal); it takes a revision,
///   so that devices receive it.
/// - **Whose write.** In a suite shared between accounts, an entry a member's device pushed names
///   that account (`PreparedPush.account`, `SyncEntry.account`); a re-seal keeps the account of
///   the write it carries.
/// - **One op refused, not the batch.** An op that `PushValidation` refused on its own (its value
///   too large, its HLC too far ahead of the server's clock) is answered `refused` and takes no
///   revision; the others are judged as if it were not there.
/// - **Stamps from a wrong clock.** A held entry stamped more than the allowed skew ahead of the
///   server's clock (`PreparedPush.clock`; stored while the server's clock was wrong, or restored
///   from such a backup) cannot be compared with honest stamps: any op replaces it.
/// - **Revisions.** Each applied op takes the suite's next revision; superseded ops take none.
/// - **Results.** One per op, in order; each result's `winner` is the key's entry after the whole
///   push.
/// - **Encryption.** A suite's first push decides whether it is end-to-end encrypted (sealed ops)
///   or plain, for good: a plain push to an encrypted suite is refused (`suiteEncrypted`), and so is
///   a sealed one to a plain suite (`suiteNotEncrypted`), or one sealed under a key epoch older
///   than the newest the suite has seen (`staleKeyEpoch`, after a key rotation).
/// - **Quotas.** Live keys and their bytes (`SyncLimits.quotaBytes`) after the push. A push that
///   leaves the suite over a quota is refused if it made the suite larger on that count; one that
///   makes an over-quota suite smaller (or no larger) is accepted, so that lowering a quota never
///   stops a device from cleaning up.
package enum PushStep {
    /// A suite's counters: its head revision, live keys and their bytes, and the newest key epoch
    /// of an encrypted suite (0 for a plain one; a suite whose head is 0 is not decided yet).
    package struct Counters: Sendable, Hashable {
        package var head: UInt64
        package var keys: Int
        package var bytes: Int
        package var epoch: UInt32
        /// The revision after which the suite's mode (plain or encrypted) is decided again: 0, or
        /// that of the operator's last reset with its keys (`suites reset --keys`).
        package var modeRev: UInt64

        package init(head: UInt64, keys: Int, bytes: Int, epoch: UInt32 = 0, modeRev: UInt64 = 0) {
            self.head = head
            self.keys = keys
            self.bytes = bytes
            self.epoch = epoch
            self.modeRev = modeRev
        }

        /// Whether anything was written to the suite (since a reset with its keys): its mode is decided.
        package var isWritten: Bool { head > modeRev }

        /// Whether the suite holds sealed entries (its first push was sealed).
        package var isEncrypted: Bool { epoch > 0 }
    }

    /// A batch already applied: the digest of its ops and the response it got.
    package struct RecordedBatch {
        package var digest: [UInt8]
        /// Decoded only when the digests match.
        package var response: () throws -> PushResponse

        package init(digest: [UInt8], response: @escaping () throws -> PushResponse) {
            self.digest = digest
            self.response = response
        }
    }

    /// What a backend persists for an applied push.
    package struct Applied: Sendable {
        package var response: PushResponse
        /// The final entry of each key the push changed, in the order the keys were first changed.
        package var writes: [StoredEntry]
        /// The entries `writes` replace, by key (what was held before the push).
        package var replaced: [ExactName: StoredEntry]
        /// Every version the push made, in revision order: each applied op's entry, including one
        /// that a later op of the same batch replaced (the key history keeps them all).
        package var versions: [StoredEntry]
        package var counters: Counters
        /// Whether the head moved (who to wake).
        package var advanced: Bool { !writes.isEmpty }
    }

    package enum Outcome: Sendable {
        /// The batch was applied before with the same ops: answer this, persist nothing.
        case replayed(PushResponse)
        case applied(Applied)
    }

    /// Applies `push` to a suite holding `held` (the entries of the push's keys; absent keys hold
    /// nothing) with `counters`.
    ///
    /// - Throws: `SyncStorageError` `idempotencyMismatch` or `quotaExceeded`; then nothing is to be
    ///   persisted.
    package static func run(
        _ push: PreparedPush,
        suite: String,
        held: [ExactName: StoredEntry],
        counters: Counters,
        recorded: RecordedBatch?,
        quota: SuiteQuota,
        serverTime: String
    ) throws -> Outcome {
        let request = push.request
        if let recorded {
            guard recorded.digest == push.digest else {
                throw SyncStorageError(
                    .idempotencyMismatch,
                    "batch \(request.batchID) of device \(request.deviceID) was already pushed with other ops"
                )
            }
            return .replayed(try recorded.response())
        }
        try checkEncryption(push, suite: suite, counters: counters)
        var current = held
        var after = counters
        if let epochs = push.epochs { after.epoch = max(after.epoch, epochs.upperBound) }
        var changed: [ExactName] = []
        /// The wire form of each entry the push wrote, so that its winner needs no decoding.
        var written: [ExactName: SyncEntry] = [:]
        var statuses: [PushResult.Status] = []
        statuses.reserveCapacity(request.ops.count)
        var versions: [StoredEntry] = []
        for (index, (op, json)) in zip(request.ops, push.valueJSON).enumerated() {
            if push.refusals[index] != nil {
                statuses.append(.refused)
                continue
            }
            let stamp = Stamp(hlc: op.hlc, origin: op.origin ?? request.deviceID)
            let key = op.key.exact
            let old = current[key]
            let wins =
                if let old, old.stamp.hlc.isAhead(of: push.clock.now, by: push.clock.maximumSkew) {
                    true
                } else {
                    op.origin == nil && op.sealed == nil
                        ? SyncMerge.wins(stamp, over: old?.stamp) : SyncMerge.reseals(op, stamp: stamp, over: old)
                }
            guard wins else {
                statuses.append(.superseded)
                continue
            }
            after.head += 1
            var new =
                op.sealed.map { StoredEntry(key: op.key, sealed: $0, deleted: op.isDeleted, stamp: stamp, rev: after.head) }
                ?? StoredEntry(key: op.key, valueJSON: json, stamp: stamp, rev: after.head)
            // A re-seal carries another device's write: it keeps the account that made it.
            new.account = op.origin != nil && old?.stamp == stamp ? old?.account : push.account
            after.keys += (new.isLive ? 1 : 0) - (old?.isLive == true ? 1 : 0)
            after.bytes += new.quotaBytes - (old?.quotaBytes ?? 0)
            current[key] = new
            versions.append(new)
            if written[key] == nil { changed.append(key) }
            var entry =
                op.sealed.map {
                    SyncEntry(keyID: op.key, sealed: $0, deleted: op.isDeleted, hlc: op.hlc, origin: stamp.origin, rev: after.head)
                } ?? SyncEntry(key: op.key, value: op.value, hlc: op.hlc, origin: stamp.origin, rev: after.head)
            entry.account = new.account
            written[key] = entry
            statuses.append(.applied)
        }
        try checkQuota(quota, suite: suite, before: counters, after: after)

        var winners = written
        var results: [PushResult] = []
        results.reserveCapacity(request.ops.count)
        for (index, (op, status)) in zip(request.ops, statuses).enumerated() {
            let key = op.key.exact
            // Superseded by what was held, checked as a page checks it (unavailable if it fails).
            if winners[key] == nil { winners[key] = held[key]?.servedEntry(valueLimit: push.valueLimit) }
            let refusal = push.refusals[index]
            results.append(PushResult(key: op.key, status: status, winner: winners[key], error: refusal?.code, detail: refusal?.detail))
        }
        return .applied(
            Applied(
                response: PushResponse(headRev: after.head, results: results, serverTime: serverTime),
                writes: changed.map { current[$0]! },
                replaced: held.filter { written[$0.key] != nil },
                versions: versions,
                counters: after
            )
        )
    }

    private static func checkEncryption(_ push: PreparedPush, suite: String, counters: Counters) throws(SyncStorageError) {
        guard !push.request.ops.isEmpty else { return }
        let written = counters.isWritten
        switch (push.epochs, counters.isEncrypted) {
        case (nil, true):
            throw SyncStorageError(
                .suiteEncrypted,
                "suite \(suite) is end-to-end encrypted: this device needs the suite's key (configure it with a pairing code or the recovery key)"
            )
        case (.some, false) where written:
            throw SyncStorageError(
                .suiteNotEncrypted,
                "suite \(suite) is not encrypted: a suite is encrypted for every device or for none"
            )
        case (let epochs?, _):
            // Every op under the suite's epoch: a new suite's is 1; a later one exists only once its
            // key bag is stored (`KeyBagRule.put`), which is what moves the suite to it.
            let current = max(counters.epoch, 1)
            if epochs.lowerBound < current {
                throw SyncStorageError(
                    .staleKeyEpoch,
                    "suite \(suite)'s key was rotated to epoch \(current); this push was sealed under epoch \(epochs.lowerBound): pair this device again"
                )
            }
            if epochs.upperBound > current {
                throw SyncStorageError(
                    .staleKeyEpoch,
                    "suite \(suite) is at key epoch \(current); epoch \(epochs.upperBound) has no key bag on the server"
                )
            }
        default:
            return
        }
    }

    private static func checkQuota(_ quota: SuiteQuota, suite: String, before: Counters, after: Counters) throws(SyncStorageError) {
        if after.keys > quota.maxKeys && after.keys > before.keys {
            throw SyncStorageError(
                .quotaExceeded,
                "suite \(suite) would hold \(after.keys) keys, more than the \(quota.maxKeys) allowed",
                limit: quota.maxKeys
            )
        }
        if after.bytes > quota.maxBytes && after.bytes > before.bytes {
            throw SyncStorageError(
                .quotaExceeded,
                "suite \(suite) would hold \(after.bytes) bytes, more than the \(quota.maxBytes) allowed",
                limit: quota.maxBytes
            )
        }
    }
}

/// Last writer wins, shared by every backend and by the push step.
package enum SyncMerge {
    /// Whether an op stamped `incoming` replaces what is stored (stamped `stored`, nil if nothing).
    package static func wins(_ incoming: Stamp, over stored: Stamp?) -> Bool {
        guard let stored else { return true }
        return incoming > stored
    }

    /// Whether an op that names its write's origin (`PushOp.origin`: a re-seal, or an upload after
    /// a reset) replaces what is stored: a write stamped later (last writer wins), or the same
    /// write sealed under a newer epoch; anything, if the server holds nothing for the key.
    package static func reseals(_ op: PushOp, stamp: Stamp, over stored: StoredEntry?) -> Bool {
        guard let stored else { return true }
        guard stored.stamp == stamp else { return stamp > stored.stamp }
        guard let new = op.sealed?.epoch, let old = stored.sealed?.epoch else { return false }
        return stored.isDeleted == op.isDeleted && new > old
    }
}
