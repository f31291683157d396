import Foundation
import GroupDefaults
import GroupDefaultsWire

/// The rules of pushing, without I/O: which pending changes go in the next batch, which are set
/// aside and for how long, and what a push's answer or refusal means for each change. The engine
/// (`SyncEngine`) reads the pending pages, seals the ops, stores the in-flight batch, sends it,
/// journals what is set aside and clears what was settled; this type decides all of it, and
/// `PushPlannerTests` checks it against a model without a server.
struct PushPlanner {
    /// A change set aside: it stays pending and local, is reported (`SyncStatus.rejected`), and is
    /// not sent again until its key changes (its stamp), or, refused for a clock, until `retryAt`.
    struct SetAside {
        var stamp: Stamp
        var error: SyncError
        var retryAt: ContinuousClock.Instant?
    }

    /// A change just set aside, to log and keep in the conflict journal (once per stamp).
    struct NewlySetAside {
        var key: String
        var stamp: Stamp
        var error: SyncError
    }

    /// A batch to send: each op's encoded bytes, and in the ops' order the keys and stamps they
    /// push and the keys as the server sees them (names, or an encrypted suite's key ids).
    struct Batch {
        var ops: [[UInt8]]
        var pushed: [(key: String, stamp: Stamp)]
        var keyIDs: [String]
    }

    /// What the engine does with a push the server refused as a whole (`outcome(of:isShared:)`).
    enum RefusalOutcome: Equatable {
        /// The batch goes (its marks stay) and the error is thrown: this device's settings, not
        /// the batch, are at fault (a suite encrypted since, or no longer).
        case dropBatchAndThrow
        /// The batch goes and the refusal is settled (`settle(refusal:of:)`): the change it names
        /// is set aside, or the next batch is smaller.
        case settle
        /// The account is a read member now: the batch goes, the changes stay local, reported.
        case becomeReadMember
        /// Sealed under a key the suite no longer takes: the batch goes, sealed again once this
        /// device has the suite's key (`staleEpochFailure(_:mine:serverEpoch:)`).
        case sealAgain
        /// This device's clock is ahead of the server's: the batch goes, its changes stay pending
        /// and are tried again in 30 seconds (`clockAhead(_:)`).
        case retryLater
        /// Anything else: thrown as it is (the batch stays, sent again under its id).
        case rethrow
    }

    /// The changes set aside, by key (compared as bytes).
    private(set) var setAside: [ExactName: SetAside] = [:]
    /// The changes set aside and not journaled yet, which the engine takes
    /// (`takeNewlySetAside()`) after each call, even one that threw: the one way they reach the
    /// journal, so that a change set aside before a page read or a seal failed is journaled too.
    private var unjournaled: [NewlySetAside] = []
    /// The most changes the next batch holds after a batch refused as a whole (halved until the
    /// culprit is alone); nil: as many as the server's limit.
    var cap: Int?
    /// The key the last batch ended at: the next one starts after it, and goes round to it again,
    /// so that every pending key has its turn however many wait.
    private(set) var position: String?
    /// How many push answers were settled: a pull during which none was can tell a rollback from a race.
    private(set) var answered = 0

    /// How many pending changes a page holds.
    static let pageSize = 256
    /// What a push's body spends besides its ops (its device id, batch id and brackets).
    static let envelopeBytes = 128

    /// The changes set aside, as `SyncReport.rejected` reports them (by key).
    var rejected: [SyncError] { setAside.values.map(\.error).sorted { ($0.key ?? "") < ($1.key ?? "") } }

    /// Forgets the changes set aside that are no longer pending as they were: another device's
    /// write replaced them, or the key changed since (`stillPending`: each one's pending stamp
    /// now, absent when none).
    mutating func forgetChanged(stillPending: [ExactName: Stamp]) {
        setAside = setAside.filter { stillPending[$0.key] == $0.value.stamp }
    }

    /// The next batch: pending changes in key order from after `position`, round to it again,
    /// within `limits` (the ops of a batch, its body, what one op may carry:
    /// `SyncLimits.breach`); a change that cannot be sent is set aside and the others go on.
    /// `page(after)` reads the pending changes after a key (nil: from the first), at most
    /// `pageSize`; `encode` makes a change's op (sealed, in an encrypted suite), and throws a
    /// `rejected` error for one it cannot make. Returns nil when nothing is to be sent; the changes
    /// set aside on the way wait in `takeNewlySetAside()`.
    mutating func nextBatch(
        limits: SyncLimits,
        now: ContinuousClock.Instant,
        page: (String?) throws(SyncError) -> [PendingChange],
        encode: (PendingChange) throws(SyncError) -> PushOp
    ) throws(SyncError) -> Batch? {
        let cap = min(limits.maxOpsPerBatch, self.cap ?? .max)
        var batch = Batch(ops: [], pushed: [], keyIDs: [])
        var bodyBytes = Self.envelopeBytes
        let start = position
        var after = start
        var wrapped = start == nil
        pages: while true {
            let changes = try page(after)
            for change in changes {
                // Round: past the start again, every pending key was seen.
                if wrapped, let start, start.utf8.lexicographicallyPrecedes(change.key.utf8) { break pages }
                after = change.key
                if let known = setAside[change.key.exact], known.stamp == change.stamp, known.retryAt.map({ now < $0 }) ?? true {
                    continue
                }
                let op: PushOp
                let opBytes: [UInt8]
                do throws(SyncError) {
                    op = try encode(change)
                    opBytes = try Self.encoded(op, of: change, limits: limits, alone: batch.ops.isEmpty, bodyBytes: bodyBytes)
                } catch  where error.kind == .rejected {
                    setAside(change.key, stamp: change.stamp, error, now: now)
                    continue
                }
                // The batch is full: the rest go in the next one.
                guard batch.ops.count < cap, bodyBytes + opBytes.count + 1 <= limits.maxBodyBytes else { break pages }
                batch.ops.append(opBytes)
                batch.pushed.append((change.key, change.stamp))
                batch.keyIDs.append(op.key)
                position = change.key
                bodyBytes += opBytes.count + 1
            }
            if changes.count < Self.pageSize {
                if wrapped { break }
                wrapped = true
                after = nil
            }
        }
        return batch.ops.isEmpty ? nil : batch
    }

    /// `op`'s bytes as the push carries them, or the `rejected` error of a change a push may not
    /// carry: what one op may carry (`SyncLimits.breach`: the key as the server sees it, the
    /// nesting of the value itself, which a sealed op carries opaque, the sizes), a value typed
    /// JSON cannot write, or a change that alone takes more than a body may (`alone`: the batch is
    /// empty so far).
    private static func encoded(
        _ op: PushOp,
        of change: PendingChange,
        limits: SyncLimits,
        alone: Bool,
        bodyBytes: Int
    ) throws(SyncError) -> [UInt8] {
        let valueJSONBytes = op.value.flatMap { try? $0.typedJSON().count }
        if let breach = limits.breach(key: op.key, value: change.value, sealedBytes: op.sealed?.box.count, valueJSONBytes: valueJSONBytes) {
            throw SyncError(breach, key: change.key)
        }
        let bytes: [UInt8]
        do { bytes = try WireJSON.encode(op) } catch {
            throw SyncError(
                .rejected,
                code: .malformed,
                "the value cannot be written as typed JSON, which sync carries (dates from year 0 to 9999 only)",
                key: change.key
            )
        }
        if alone, bodyBytes + bytes.count + 1 > limits.maxBodyBytes {
            throw SyncError(
                .rejected,
                code: .bodyTooLarge,
                "the change alone takes \(bytes.count) bytes, more than a push may",
                key: change.key,
                limit: limits.maxBodyBytes
            )
        }
        return bytes
    }

    /// Sets `key`'s change (stamped `stamp`) aside until the key changes again (a clock's refusal:
    /// until 30 seconds from `now`). A change not set aside already waits in `takeNewlySetAside()`,
    /// to log and journal once.
    mutating func setAside(_ key: String, stamp: Stamp, _ error: SyncError, now: ContinuousClock.Instant) {
        var error = error
        error.key = key
        error.isSetAside = true
        // A stamp too far ahead of the server's clock may be fine a little later (the server's
        // clock was behind, or this device's a few minutes ahead): tried again then.
        let retryAt = error.code == .clockSkew ? now + .seconds(30) : nil
        let known = setAside[key.exact]?.stamp == stamp
        setAside[key.exact] = SetAside(stamp: stamp, error: error, retryAt: retryAt)
        guard !known else { return }
        unjournaled.append(NewlySetAside(key: key, stamp: stamp, error: error))
    }

    /// The changes set aside since the last call, to log and journal (each once).
    mutating func takeNewlySetAside() -> [NewlySetAside] {
        defer { unjournaled = [] }
        return unjournaled
    }

    /// What a push refused as a whole (a `rejected` error) means for the batch; `isShared`: the
    /// suite is another account's, shared with this one.
    static func outcome(of error: SyncError, isShared: Bool) -> RefusalOutcome {
        switch error.code {
        case .suiteEncrypted?, .suiteNotEncrypted?: .dropBatchAndThrow
        case let code? where code.refusesChange: .settle
        case .insufficientRole? where isShared: .becomeReadMember
        case .staleKeyEpoch?: .sealAgain
        case .clockSkew?: .retryLater
        default: .rethrow
        }
    }

    /// A refused batch (`outcome` `.settle`) that pushed `pushed` (names and stamps) as `keyIDs`
    /// (the keys as the server saw them), in order: the change the error names is set aside and
    /// the others go on; a batch refused as a whole without naming one is made smaller until the
    /// culprit is alone; a mismatched id changes nothing (the next batch gets a new one).
    mutating func settle(
        refusal error: SyncError,
        pushed: [(key: String, stamp: Stamp)],
        keyIDs: [String],
        now: ContinuousClock.Instant
    ) {
        let named = error.key.flatMap { named in keyIDs.firstIndex { $0.isSameName(as: named) } }
        switch error.code {
        case .idempotencyMismatch?:
            return
        case .batchTooLarge?, .bodyTooLarge?:
            cap = max(1, pushed.count / 2)
        case _ where pushed.count > 1 && named == nil:
            cap = max(1, pushed.count / 2)
        default:
            let (key, stamp) = pushed[named ?? 0]
            setAside(key, stamp: stamp, error, now: now)
        }
    }

    /// The answer to a push of `pushed` (names and stamps, in the ops' order): the changes it
    /// settled (applied, or superseded by a newer write, whose `winners` the engine applies), and
    /// those the server refused on their own (a value too large, an HLC from a wrong clock) are set
    /// aside until their key changes again (`takeNewlySetAside()`); those refused for a pinned key
    /// are settled (the engine takes the owner's value back: `SyncEngine.settlePinned`).
    mutating func settle(
        _ response: PushResponse,
        pushed: [(key: String, stamp: Stamp)],
        now: ContinuousClock.Instant
    ) -> (settled: [(key: String, stamp: Stamp)], winners: [SyncEntry]) {
        answered += 1
        var settled: [(key: String, stamp: Stamp)] = []
        for (result, change) in zip(response.results, pushed) {
            // A pinned key's op is settled: the engine puts the owner's value back (`settlePinned`).
            guard result.status == .refused, result.error != .pinnedKey else {
                settled.append(change)
                continue
            }
            let error = SyncError(.rejected, code: result.error ?? .malformed, result.detail ?? "refused by the server", key: change.key)
            setAside(change.key, stamp: change.stamp, error, now: now)
        }
        for (key, _) in settled { setAside[key.exact] = nil }
        let winners = response.results.filter { $0.status == .superseded }.compactMap(\.winner)
        return (settled, winners)
    }

    /// A clock's refusal of a whole push (`outcome` `.retryLater`) as the engine reports it: not
    /// one key's fault, tried again in 30 seconds.
    static func clockAhead(_ error: SyncError) -> SyncError {
        SyncError(
            .unavailable,
            code: .clockSkew,
            "\(error.detail) (this device's clock is ahead of the server's)",
            retryAfter: .seconds(30),
            status: error.status
        )
    }

    /// A push refused for a stale key epoch, once this device has taken what the suite's key bags
    /// hold: nil when the batch is to be sealed again (this device holds the server's newest
    /// epoch, `mine == serverEpoch`: the batch was sealed before it took the key); else the
    /// failure with its remedy: a rotation whose key bag the server never stored, keys newer than
    /// the server's (a reset anchored by a device with older keys), or older keys.
    static func staleEpochFailure(_ error: SyncError, mine: UInt32, serverEpoch: UInt32) -> SyncError? {
        if mine == serverEpoch { return nil }
        let (situation, remedy): (String, SyncError.Remedy) =
            if mine == serverEpoch + 1 {
                ("this device's key is of epoch \(mine), whose key bag the server does not have", .rotateAgain)
            } else if mine > serverEpoch {
                (
                    """
                    this device's keys (epoch \(mine)) are newer than the suite's on the server (epoch \(serverEpoch)), which a \
                    device with older keys anchored after a reset
                    """,
                    .pairFromThisDevice
                )
            } else {
                ("this device's keys are of an older epoch", .pairAgain)
            }
        var failure = SyncError(.local, code: .staleKeyEpoch, "\(error.detail) (\(situation))", status: error.status)
        failure.remedy = remedy
        return failure
    }
}
