import Dispatch
import Foundation
import GroupDefaultsLMDB
package import GroupDefaultsWire
import Synchronization

// Pushes: group commit, LWW, revisions, idempotency and quotas in one flushed write transaction.
extension LMDBSyncStorage {
    package func push(account: String, suite: String, push: PreparedPush, quota: SuiteQuota, serverTime: String) async throws -> PushResponse {
        let response = try await withCheckedThrowingContinuation { continuation in
            let push = PendingPush(
                account: account,
                suite: suite,
                push: push,
                quota: quota,
                serverTime: serverTime,
                continuation: continuation
            )
            let first = pending.withLock { queue in
                queue.append(push)
                return queue.count == 1
            }
            if first { writeQueue.async { self.commitPending() } }
        }
        waiters.notify(.init(account: account, suite: suite), head: response.headRev)
        return response
    }

    /// A push waiting for the next commit.
    struct PendingPush: Sendable {
        var account: String
        var suite: String
        var push: PreparedPush
        var quota: SuiteQuota
        var serverTime: String
        var continuation: CheckedContinuation<PushResponse, any Error>
    }

    /// Group commit, on the write queue: every push that arrived while the previous commit was being
    /// flushed is applied in one write transaction, in arrival order, and flushed once. Pushes stay
    /// all or nothing: if any of them fails, the shared transaction is abandoned and each runs in
    /// a transaction of its own (the same outcome as had they come one by one).
    func commitPending() {
        let batch = pending.withLock { queue in
            defer { queue.removeAll() }
            return queue
        }
        guard !batch.isEmpty else { return }
        if closed.load(ordering: .acquiring) {
            for push in batch { push.continuation.resume(throwing: SyncStorageError(.unavailable, "the store is shut down")) }
            return
        }
        if batch.count > 1, let result = try? commit(batch) {
            switch result {
            case .success(let responses):
                for (push, response) in zip(batch, responses) { push.continuation.resume(returning: response) }
            case .failure(let error):
                for push in batch { push.continuation.resume(throwing: error) }
            }
            return
        }
        for push in batch { push.continuation.resume(with: Result { try commit([push]).get()[0] }) }
    }

    /// Applies `pushes` in one flushed write transaction. Throws when a push fails (nothing is
    /// committed); a failed final flush makes every response `unavailable` (committed, not acknowledged).
    func commit(_ pushes: [PendingPush]) throws -> Result<[PushResponse], any Error> {
        var responses: [PushResponse] = []
        var flushError: (any Error)?
        try Self.mapped {
            try environment.writeTransaction(sync: true, flushFailed: { flushError = $0 }) { txn in
                responses = []
                for push in pushes {
                    responses.append(
                        try Self.applyPush(
                            txn,
                            account: push.account,
                            suite: push.suite,
                            push: push.push,
                            quota: push.quota,
                            serverTime: push.serverTime
                        )
                    )
                }
            }
        }
        if let flushError {
            return .failure(SyncStorageError(.unavailable, "the push committed but could not be flushed to disk: \(flushError)"))
        }
        return .success(responses)
    }

    /// The push's authority, again in its write transaction (`PushAuthority`): its token still
    /// held and not revoked, the owner's incarnation the one checked, and a member's push (`member`)
    /// still a writer's.
    static func checkAuthority(_ txn: LMDBTransaction, _ authority: PushAuthority, owner: String, suite: String, member: String?) throws {
        guard let json = try get(txn, DB.tokens, Array(authority.tokenID.utf8)),
            let token = try? JSONDecoder().decode(StoredToken.self, from: Data(json)), token.revoked == nil
        else { throw PushAuthority.tokenGone() }
        if let expected = authority.ownerIncarnation {
            guard let held = try get(txn, DB.accountIncarnations, LMDBKeys.accountPrefix(owner)), held.elementsEqual(expected.utf8) else {
                throw PushAuthority.ownerGone(owner)
            }
        }
        guard let member else { return }
        guard let record = try Self.member(txn, owner: owner, suite: suite, account: member), record.awaitingKeys != true else {
            throw PushAuthority.memberGone(owner, suite)
        }
        guard record.role.mayWrite else { throw PushAuthority.memberReads(owner, suite) }
    }

    /// Loads what the push step needs, runs it, and writes its output: the entries (in their
    /// buckets), their revisions in `revisions` (the replaced ones removed), the suite's counters,
    /// and the batch record (digest, time, response).
    static func applyPush(
        _ txn: LMDBTransaction,
        account: String,
        suite: String,
        push: PreparedPush,
        quota: SuiteQuota,
        serverTime: String
    ) throws -> PushResponse {
        let request = push.request
        if let authority = push.authority { try checkAuthority(txn, authority, owner: account, suite: suite, member: push.account) }
        var push = push
        if push.account != nil {
            PinRule.refuse(&push, pinned: Set(try pins(txn, owner: account, suite: suite).map(\.key.exact)), owner: account, suite: suite)
        }
        let suiteKey = LMDBKeys.suiteName(account: account, suite: suite)
        var record = try suiteRecord(txn, suiteKey) ?? SuiteRecord(id: try allocateSuiteID(txn))

        let batchKey = LMDBKeys.batch(suiteID: record.id, device: request.deviceID, batchID: request.batchID)
        let recorded = try get(txn, DB.batches, batchKey).map { stored in
            PushStep.RecordedBatch(digest: stored.count > 40 ? Array(stored.prefix(32)) : []) {
                try JSONDecoder().decode(PushResponse.self, from: Data(stored.dropFirst(40)))
            }
        }
        var buckets: [[UInt8]: EntryBucket] = [:]
        var held: [ExactName: StoredEntry] = [:]
        for key in Set(request.ops.map(\.key.exact)) {
            let entryKey = LMDBKeys.entry(suiteID: record.id, key: key.text)
            let bucket = try buckets[entryKey] ?? bucket(txn, entryKey)
            buckets[entryKey] = bucket
            held[key] = bucket.entry(for: key.text)
        }
        let counters = PushStep.Counters(
            head: record.head,
            keys: Int(record.liveKeys),
            bytes: Int(record.liveBytes),
            epoch: record.epoch,
            modeRev: record.modeRev
        )
        let applied: PushStep.Applied
        switch try PushStep.run(
            push,
            suite: suite,
            held: held,
            counters: counters,
            recorded: recorded,
            quota: quota,
            serverTime: serverTime
        ) {
        case .replayed(let response): return response
        case .applied(let outcome): applied = outcome
        }

        // Each changed bucket written once, in the order first changed (a set: a batch of 500 ops
        // searched a list for each).
        var changedBuckets: [[UInt8]] = []
        var changed: Set<[UInt8]> = []
        for entry in applied.writes {
            let entryKey = LMDBKeys.entry(suiteID: record.id, key: entry.key)
            if let old = applied.replaced[entry.key.exact] {
                try delete(txn, DB.revisions, LMDBKeys.revision(suiteID: record.id, rev: old.rev))
            }
            buckets[entryKey]!.store(entry)
            if changed.insert(entryKey).inserted { changedBuckets.append(entryKey) }
            try put(txn, DB.revisions, LMDBKeys.revision(suiteID: record.id, rev: entry.rev), entryKey)
        }
        for entryKey in changedBuckets { try put(txn, DB.entries, entryKey, buckets[entryKey]!.bytes) }
        record.head = applied.counters.head
        record.liveKeys = UInt64(applied.counters.keys)
        record.liveBytes = UInt64(applied.counters.bytes)
        record.epoch = applied.counters.epoch
        try put(txn, DB.suites, suiteKey, record.bytes)
        let storedAt = LMDBKeys.bigEndian(HLC.wallClockMilliseconds())
        try writeHistory(
            txn,
            suiteID: record.id,
            versions: applied.historyVersions(depth: quota.historyDepth),
            depth: quota.historyDepth,
            receivedAt: storedAt
        )
        try put(txn, DB.batches, batchKey, push.digest + storedAt + (try WireJSON.encode(applied.response)))
        return applied.response
    }

    /// Adds `versions` to their keys' history and trims each key's to the last `depth`.
    static func writeHistory(_ txn: LMDBTransaction, suiteID: UInt64, versions: [StoredEntry], depth: Int, receivedAt: [UInt8]) throws {
        var prefixes: [ExactName: [UInt8]] = [:]
        for version in versions {
            let prefix = prefixes[version.key.exact] ?? LMDBKeys.historyPrefix(suiteID: suiteID, key: version.key)
            prefixes[version.key.exact] = prefix
            try put(txn, DB.history, LMDBKeys.history(prefix: prefix, rev: version.rev), receivedAt + version.bytes)
        }
        for prefix in prefixes.values {
            var revisions: [UInt64] = []  // oldest first
            try prefix.withUnsafeBytes { start in
                try txn.forEach(DB.history, from: start) { key, _ in
                    guard key.count == prefix.count + 8, key.starts(with: prefix) else { return false }
                    revisions.append(LMDBKeys.readBigEndian(key, at: prefix.count))
                    return true
                }
            }
            for rev in revisions.dropLast(depth) { try delete(txn, DB.history, LMDBKeys.history(prefix: prefix, rev: rev)) }
        }
    }

    static func allocateSuiteID(_ txn: LMDBTransaction) throws -> UInt64 {
        let key = Array("next-suite-id".utf8)
        let next = try get(txn, DB.meta, key).map { $0.count == 8 ? $0.withUnsafeBytes { LMDBKeys.readBigEndian($0) } : 1 } ?? 1
        try put(txn, DB.meta, key, LMDBKeys.bigEndian(next + 1))
        return next
    }
}
