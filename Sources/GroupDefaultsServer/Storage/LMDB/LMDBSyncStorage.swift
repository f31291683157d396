import Crypto
import Dispatch
public import Foundation
public import GroupDefaults
import GroupDefaultsLMDB
import Synchronization

/// The embedded backend: one LMDB environment, `sync.lmdb`, in the data directory.
///
/// Named databases (key layouts in `LMDBKeys`):
/// - `suites`: account + NUL + suite → `SuiteRecord` (id, head, oldest valid revision, live keys and bytes)
/// - `entries`: suite id + key (its first 503 bytes) → `EntryBucket` of `EntryRecord`s (value or
///   tombstone, stamp, revision)
/// - `revisions`: suite id + revision → the entries key (one row per key: its latest revision)
/// - `batches`: suite id + device + SHA-256(batch id) → SHA-256 of the canonical ops, when it was
///   stored (ms, big-endian), the response JSON; kept as long as tombstones
/// - `tokens`: token id → `StoredToken` JSON; `token-hashes`: hash → id
/// - `meta`: `next-suite-id`
///
/// Every push is one write transaction flushed to disk before it returns. LMDB blocks, so all of it
/// runs on dispatch queues, never on the cooperative pool: writes on one serial queue (LMDB has one
/// writer anyway), reads on a concurrent one.
public final class LMDBSyncStorage: SyncStorage {
    private enum DB {
        static let suites = Database(0), entries = Database(1), revisions = Database(2), batches = Database(3)
        static let tokens = Database(4), tokenHashes = Database(5), meta = Database(6)
        static let names = ["suites", "entries", "revisions", "batches", "tokens", "token-hashes", "meta"]
    }

    private let environment: Environment
    private let writeQueue = DispatchQueue(label: "groupdefaults-server.lmdb.write")
    private let readQueue = DispatchQueue(label: "groupdefaults-server.lmdb.read", attributes: .concurrent)
    private let waiters = ChangeWaiters()
    private let pending = Mutex<[PendingPush]>([])
    private let closed = Atomic<Bool>(false)

    /// Opens (creating if needed, mode 0700) `directory` and its `sync.lmdb` (mode 0600).
    public init(directory: String, maximumMapSize: Int = 64 << 30) throws {
        try Self.makeDirectory(directory)
        environment = try Environment(
            path: directory + "/sync.lmdb",
            options: EnvironmentOptions(
                databases: DB.names, readerTrees: DB.names, lockFilePath: directory + "/sync.lmdb-open",
                initialMapSize: 8 << 20, maximumMapSize: maximumMapSize, fileMode: 0o600, maximumReaders: 126,
                structureCheckLimit: 64 << 20))
    }

    private static func makeDirectory(_ directory: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw SyncStorageError(.unavailable, "\(directory) is not a directory") }
            return
        }
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }

    // MARK: Running LMDB off the cooperative pool

    private func onWriteQueue<T: Sendable>(_ body: @Sendable @escaping () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            writeQueue.async { continuation.resume(with: Result { try self.whileOpen(body) }) }
        }
    }

    private func onReadQueue<T: Sendable>(_ body: @Sendable @escaping () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            readQueue.async { continuation.resume(with: Result { try self.whileOpen(body) }) }
        }
    }

    /// Runs `body` unless the store was shut down (then `unavailable`, not a use of a closed environment).
    private func whileOpen<T>(_ body: () throws -> T) throws -> T {
        guard !closed.load(ordering: .acquiring) else { throw SyncStorageError(.unavailable, "the store is shut down") }
        return try Self.mapped(body)
    }

    /// LMDB's own failures (disk full, I/O) are the server's trouble, not the client's: `unavailable`.
    private static func mapped<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SyncStorageError {
            throw error
        } catch {
            throw SyncStorageError(.unavailable, "storage failed: \(error)")
        }
    }

    // MARK: Push

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
    private struct PendingPush: Sendable {
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
    private func commitPending() {
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
    private func commit(_ pushes: [PendingPush]) throws -> Result<[PushResponse], any Error> {
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
    private static func canonicalOps(_ request: PushRequest) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(request.ops)
    }

    private static func applyPush(
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
        for op in request.ops {
            let entryKey = LMDBKeys.entry(suiteID: record.id, key: op.key)
            var bucket = try bucket(txn, entryKey)
            let current = bucket.entry(for: op.key)
            let incoming = Stamp(hlc: op.hlc, origin: request.deviceID)
            guard SyncMerge.wins(incoming, over: current?.stamp) else {
                results.append(PushResult(key: op.key, status: .superseded, winner: try current!.syncEntry()))
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
            results.append(PushResult(key: op.key, status: .applied, winner: try entry.syncEntry()))
        }
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

    private static func allocateSuiteID(_ txn: LMDBTransaction) throws -> UInt64 {
        let key = Array("next-suite-id".utf8)
        let next = try get(txn, DB.meta, key).map { $0.count == 8 ? $0.withUnsafeBytes { LMDBKeys.readBigEndian($0) } : 1 } ?? 1
        try put(txn, DB.meta, key, LMDBKeys.bigEndian(next + 1))
        return next
    }

    // MARK: Reads

    public func changes(account: String, suite: String, since: UInt64, limit: Int) async throws -> ChangesPage {
        let environment = self.environment
        return try await onReadQueue {
            var page = ChangesPage(entries: [], lastRev: 0, hasMore: false)
            try environment.readTransaction { txn in
                guard let record = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite)) else { return }
                if since < record.oldestValid {
                    throw SyncStorageError(.cursorExpired, "revision \(since) is older than the oldest valid revision \(record.oldestValid): re-read the snapshot")
                }
                page.lastRev = record.head
                guard since < record.head else { return }  // nothing after it (also keeps since + 1 from overflowing)
                let start = LMDBKeys.revision(suiteID: record.id, rev: since + 1)
                let limit = max(limit, 1)
                var failure: (any Error)?
                try start.withUnsafeBytes { start in
                    try txn.forEach(DB.revisions, from: start) { key, entryKey in
                        guard key.count == 16, LMDBKeys.readBigEndian(key) == record.id else { return false }
                        if page.entries.count == limit {
                            page.hasMore = true
                            return false
                        }
                        do {
                            let rev = LMDBKeys.readBigEndian(key, at: 8)
                            guard let raw = try txn.get(DB.entries, entryKey),
                                  let entry = try EntryBucket(raw).entries.first(where: { $0.rev == rev }) else { return true }
                            page.entries.append(try entry.syncEntry())
                        } catch {
                            failure = error
                            return false
                        }
                        return true
                    }
                }
                if let failure { throw failure }
                page.lastRev = page.entries.last?.rev ?? record.head
            }
            return page
        }
    }

    public func snapshot(account: String, suite: String, after: String?, limit: Int) async throws -> SnapshotPage {
        let environment = self.environment
        return try await onReadQueue {
            var page = SnapshotPage(entries: [], headRev: 0, next: nil)
            try environment.readTransaction { txn in
                guard let record = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite)) else { return }
                page.headRev = record.head
                let start = after.map { LMDBKeys.entry(suiteID: record.id, key: $0) } ?? LMDBKeys.bigEndian(record.id)
                let limit = max(limit, 1)
                var more = false
                try start.withUnsafeBytes { start in
                    try txn.forEach(DB.entries, from: start) { key, value in
                        guard key.count >= 8, LMDBKeys.readBigEndian(key) == record.id else { return false }
                        for entry in try EntryBucket(value).entries {
                            if let after, !LMDBKeys.utf8Less(after, entry.key) { continue }  // continue after it
                            if page.entries.count == limit {
                                more = true
                                return false
                            }
                            page.entries.append(try entry.syncEntry())
                        }
                        return true
                    }
                }
                page.next = more ? page.entries.last?.key : nil
            }
            return page
        }
    }

    public func suites(account: String) async throws -> SuiteList {
        let environment = self.environment
        return try await onReadQueue {
            var list = SuiteList(suites: [])
            let prefix = LMDBKeys.accountPrefix(account)
            try environment.readTransaction { txn in
                try prefix.withUnsafeBytes { start in
                    try txn.forEach(DB.suites, from: start) { key, value in
                        guard key.starts(with: prefix) else { return false }
                        guard let record = SuiteRecord(value) else { throw SyncStorageError(.unavailable, "a damaged suite record") }
                        let name = String(decoding: key.dropFirst(prefix.count), as: UTF8.self)
                        list.suites.append(.init(name: name, headRev: record.head, keys: Int(record.liveKeys)))
                        return true
                    }
                }
            }
            return list
        }
    }

    public func headRevision(account: String, suite: String) async throws -> UInt64 {
        let environment = self.environment
        return try await onReadQueue {
            var head: UInt64 = 0
            try environment.readTransaction { txn in
                head = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite))?.head ?? 0
            }
            return head
        }
    }

    public func waitForChange(account: String, suite: String, after revision: UInt64, timeout: Duration) async {
        let key = ChangeWaiters.SuiteKey(account: account, suite: suite)
        let waiters = self.waiters
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await waiters.wait(key, after: revision) { id in
                    Task {
                        if let head = try? await self.headRevision(account: account, suite: suite), head > revision {
                            waiters.resume(key, id: id)
                        }
                    }
                }
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// How many long-polls wait on this instance.
    var waitingCount: Int { waiters.count }

    // MARK: Tombstones

    public func purgeTombstones(olderThan horizon: HLC) async throws -> Int {
        let environment = self.environment
        return try await onWriteQueue {
            var removed = 0
            try environment.writeTransaction(sync: true) { txn in
                removed = 0
                var suites: [([UInt8], SuiteRecord)] = []
                try txn.forEach(DB.suites) { key, value in
                    if let record = SuiteRecord(value) { suites.append((Array(key), record)) }
                    return true
                }
                for (suiteKey, var record) in suites {
                    var changed: [([UInt8], EntryBucket)] = []
                    var doomed: [EntryRecord] = []
                    let start = LMDBKeys.bigEndian(record.id)
                    try start.withUnsafeBytes { start in
                        try txn.forEach(DB.entries, from: start) { key, value in
                            guard key.count >= 8, LMDBKeys.readBigEndian(key) == record.id else { return false }
                            var bucket = try EntryBucket(value)
                            let expired = bucket.entries.filter { $0.valueJSON == nil && $0.hlc < horizon.rawValue }
                            guard !expired.isEmpty else { return true }
                            bucket.entries.removeAll { $0.valueJSON == nil && $0.hlc < horizon.rawValue }
                            doomed += expired
                            changed.append((Array(key), bucket))
                            return true
                        }
                    }
                    guard !doomed.isEmpty else { continue }
                    for (key, bucket) in changed {
                        if bucket.entries.isEmpty {
                            try Self.delete(txn, DB.entries, key)
                        } else {
                            try Self.put(txn, DB.entries, key, bucket.bytes)
                        }
                    }
                    for entry in doomed {
                        try Self.delete(txn, DB.revisions, LMDBKeys.revision(suiteID: record.id, rev: entry.rev))
                        record.oldestValid = max(record.oldestValid, entry.rev)
                    }
                    removed += doomed.count
                    try Self.put(txn, DB.suites, suiteKey, record.bytes)
                }
                // Batch records as old as the horizon: a retry that late re-applies its ops, which LWW
                // then finds already stored (superseded), so nothing changes.
                var expiredBatches: [[UInt8]] = []
                try txn.forEach(DB.batches) { key, value in
                    if value.count > 40, LMDBKeys.readBigEndian(value, at: 32) < horizon.milliseconds { expiredBatches.append(Array(key)) }
                    return true
                }
                for key in expiredBatches { try Self.delete(txn, DB.batches, key) }
            }
            return removed
        }
    }

    // MARK: Tokens

    public func createToken(_ token: StoredToken) async throws {
        let environment = self.environment
        let json = Array(try JSONEncoder().encode(token))
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                try Self.put(txn, DB.tokens, Array(token.id.utf8), json)
                try Self.put(txn, DB.tokenHashes, Array(token.hash.utf8), Array(token.id.utf8))
            }
        }
    }

    public func token(hash: String) async throws -> StoredToken? {
        let environment = self.environment
        return try await onReadQueue {
            var token: StoredToken?
            try environment.readTransaction { txn in
                guard let id = try Self.get(txn, DB.tokenHashes, Array(hash.utf8)),
                      let json = try Self.get(txn, DB.tokens, id) else { return }
                token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
            }
            return token
        }
    }

    public func tokens() async throws -> [StoredToken] {
        let environment = self.environment
        return try await onReadQueue {
            var tokens: [StoredToken] = []
            try environment.readTransaction { txn in
                try txn.forEach(DB.tokens) { _, value in
                    tokens.append(try JSONDecoder().decode(StoredToken.self, from: Data(value)))
                    return true
                }
            }
            return tokens.sorted { $0.created < $1.created }
        }
    }

    public func revokeToken(id: String, at date: Date) async throws {
        let environment = self.environment
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                guard let json = try Self.get(txn, DB.tokens, Array(id.utf8)) else {
                    throw SyncStorageError(.notFound, "no token has the id \(id)")
                }
                var token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
                if token.revoked == nil { token.revoked = date }
                try Self.put(txn, DB.tokens, Array(id.utf8), Array(try JSONEncoder().encode(token)))
            }
        }
    }

    /// Refuses new work, waits for running reads and writes, then closes the environment.
    public func shutdown() async throws {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let environment = self.environment, readQueue = self.readQueue
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            writeQueue.async {
                readQueue.sync(flags: .barrier) { environment.close() }
                continuation.resume()
            }
        }
    }

    // MARK: Small helpers

    private static func suiteRecord(_ txn: LMDBTransaction, _ key: [UInt8]) throws -> SuiteRecord? {
        try key.withUnsafeBytes { key in
            guard let raw = try txn.get(DB.suites, key) else { return nil }
            guard let record = SuiteRecord(raw) else { throw SyncStorageError(.unavailable, "a damaged suite record") }
            return record
        }
    }

    private static func bucket(_ txn: LMDBTransaction, _ key: [UInt8]) throws -> EntryBucket {
        try key.withUnsafeBytes { key in try txn.get(DB.entries, key).map { try EntryBucket($0) } ?? EntryBucket() }
    }

    private static func get(_ txn: LMDBTransaction, _ database: Database, _ key: [UInt8]) throws -> [UInt8]? {
        try key.withUnsafeBytes { key in try txn.get(database, key).map { Array($0) } }
    }

    private static func put(_ txn: LMDBTransaction, _ database: Database, _ key: [UInt8], _ value: [UInt8]) throws {
        try key.withUnsafeBytes { key in try value.withUnsafeBytes { value in try txn.put(database, key, value) } }
    }

    private static func delete(_ txn: LMDBTransaction, _ database: Database, _ key: [UInt8]) throws {
        try key.withUnsafeBytes { key in _ = try txn.delete(database, key) }
    }
}
