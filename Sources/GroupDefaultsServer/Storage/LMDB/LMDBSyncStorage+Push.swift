import Crypto
import Dispatch
import Foundation
public import GroupDefaultsWire
import GroupDefaultsLMDB
import Synchronization

// Pushes: group commit, LWW, revisions, idempotency and quotas in one flushed write transaction.
extension LMDBSyncStorage {
    public func push(account: String, suite: String, request: PushRequest, quota: SuiteQuota, serverTime: String) async throws -> PushResponse {
        let opsHash = Array(SHA256.hash(data: try Self.canonicalOps(request)))
        let response = try await withCheckedThrowingContinuation { continuation in
            let push = PendingPush(
                account: account, suite: suite, request: request, opsHash: opsHash, quota: quota, serverTime: serverTime,
                continuation: continuation)
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
        var request: PushRequest
        var opsHash: [UInt8]
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
                    responses.append(try Self.applyPush(
                        txn, account: push.account, suite: push.suite, request: push.request, opsHash: push.opsHash,
                        quota: push.quota, serverTime: push.serverTime))
                }
            }
        }
        if let flushError {
            return .failure(SyncStorageError(.unavailable, "the push committed but could not be flushed to disk: \(flushError)"))
        }
        return .success(responses)
    }

    /// The ops as sorted-key JSON: what a retried batch must repeat exactly.
    static func canonicalOps(_ request: PushRequest) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(request.ops)
    }

    static func applyPush(
        _ txn: LMDBTransaction, account: String, suite: String, request: PushRequest, opsHash: [UInt8], quota: SuiteQuota,
        serverTime: String
    ) throws -> PushResponse {
        let suiteKey = LMDBKeys.suiteName(account: account, suite: suite)
        var record = try suiteRecord(txn, suiteKey) ?? SuiteRecord(id: try allocateSuiteID(txn))

        let batchKey = LMDBKeys.batch(suiteID: record.id, device: request.deviceID, batchID: request.batchID)
        if let stored = try get(txn, DB.batches, batchKey) {
            guard stored.count > 40, Array(stored.prefix(32)) == opsHash else {
                throw SyncStorageError(.idempotencyMismatch, "batch \(request.batchID) was already pushed with other ops")
            }
            return try JSONDecoder().decode(PushResponse.self, from: Data(stored.dropFirst(40)))
        }

        var results: [PushResult] = []
        results.reserveCapacity(request.ops.count)
        /// Each key's entry after the push, for every result's `winner`.
        var finalEntries: [String: SyncEntry] = [:]
        for op in request.ops {
            let entryKey = LMDBKeys.entry(suiteID: record.id, key: op.key)
            var bucket = try bucket(txn, entryKey)
            let current = bucket.entry(for: op.key)
            let incoming = Stamp(hlc: op.hlc, origin: request.deviceID)
            guard SyncMerge.wins(incoming, over: current?.stamp) else {
                let winner = try current!.syncEntry()
                results.append(PushResult(key: op.key, status: .superseded, winner: winner))
                finalEntries[op.key] = winner
                continue
            }
            if let current {
                try delete(txn, DB.revisions, LMDBKeys.revision(suiteID: record.id, rev: current.rev))
                if current.valueJSON != nil {
                    record.liveKeys -= 1
                    record.liveBytes -= current.quotaBytes
                }
            }
            record.head += 1
            let valueJSON = try op.value.map { Array(try JSONEncoder().encode($0)) }
            let entry = EntryRecord(rev: record.head, hlc: op.hlc.rawValue, origin: request.deviceID, key: op.key, valueJSON: valueJSON)
            if valueJSON != nil {
                record.liveKeys += 1
                record.liveBytes += entry.quotaBytes
            }
            bucket.store(entry)
            try put(txn, DB.entries, entryKey, bucket.bytes)
            try put(txn, DB.revisions, LMDBKeys.revision(suiteID: record.id, rev: record.head), entryKey)
            let winner = try entry.syncEntry()
            results.append(PushResult(key: op.key, status: .applied, winner: winner))
            finalEntries[op.key] = winner
        }
        for index in results.indices { results[index].winner = finalEntries[results[index].key] ?? results[index].winner }
        if record.liveKeys > UInt64(max(quota.maxKeys, 0)) {
            throw SyncStorageError(.quotaExceeded, "the suite would hold \(record.liveKeys) keys, more than \(quota.maxKeys)", limit: quota.maxKeys)
        }
        if record.liveBytes > UInt64(max(quota.maxBytes, 0)) {
            throw SyncStorageError(.quotaExceeded, "the suite would hold \(record.liveBytes) bytes, more than \(quota.maxBytes)", limit: quota.maxBytes)
        }
        try put(txn, DB.suites, suiteKey, record.bytes)
        let response = PushResponse(headRev: record.head, results: results, serverTime: serverTime)
        let storedAt = LMDBKeys.bigEndian(HLC.wallClockMilliseconds())
        try put(txn, DB.batches, batchKey, opsHash + storedAt + Array(try JSONEncoder().encode(response)))
        return response
    }

    static func allocateSuiteID(_ txn: LMDBTransaction) throws -> UInt64 {
        let key = Array("next-suite-id".utf8)
        let next = try get(txn, DB.meta, key).map { $0.count == 8 ? $0.withUnsafeBytes { LMDBKeys.readBigEndian($0) } : 1 } ?? 1
        try put(txn, DB.meta, key, LMDBKeys.bigEndian(next + 1))
        return next
    }
}
