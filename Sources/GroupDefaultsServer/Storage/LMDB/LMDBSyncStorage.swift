import Crypto
import Dispatch
import Foundation
import GroupDefaultsLMDB
package import GroupDefaultsWire
import Logging
import Synchronization

/// The embedded backend: one LMDB environment, `sync.lmdb`, in the data directory.
///
/// Named databases (key layouts in `LMDBKeys`):
/// - `suites`: account + NUL + suite → `SuiteRecord` (id, head, oldest valid revision, live keys and bytes)
/// - `entries`: suite id + key (its first 503 bytes) → `EntryBucket` of `StoredEntry`s (value or
///   tombstone, stamp, revision)
/// - `revisions`: suite id + revision → the entries key (one row per key: its latest revision)
/// - `batches`: suite id + device + SHA-256(batch id) → SHA-256 of the canonical ops, when it was
///   stored (ms, big-endian), the response JSON; kept as long as tombstones
/// - `tokens`: token id → `StoredToken` JSON; `token-hashes`: hash → id
/// - `meta`: `next-suite-id`; `token-generation`, the count of token writes (big-endian);
///   `incarnation`, the storage's (`StorageIncarnation`)
/// - `history`: suite id + SHA-256(key) + revision → when received (ms, big-endian) + the version's
///   entry record; one key's versions are one contiguous range, oldest first
/// - `devices`: account + NUL + token id + NUL + device id → `StoredDevice` JSON
/// - `pairings`: SHA-256 of a pairing id → `StoredPairing` JSON, and beside them `x/` + expiry +
///   lookup and `t/` + token id + `/` + lookup, indexes by expiry and by token (expired ones are
///   dropped when a new pairing is made: `LMDBSyncStorage+Pairings.swift`)
/// - `key-bags`: account + NUL + suite + NUL + epoch → a key epoch's key sealed to the suite's
///   recovery key
/// - `console`: kind + NUL + name → a console record (`ConsoleRecords`: operators, sessions)
/// - `audit`: time (ms, big-endian) + 8 random bytes → `AuditRecord` JSON, oldest first
/// - `sharing`: shared suites' members and invitations, and indexes of them
///   (`LMDBSyncStorage+Sharing.swift`)
/// - `account-incarnations`: account + NUL (never an empty key) → its incarnation (`AccountStore`), written with its first
///   token, deleted with the account
///
/// Beside it: LMDB's lock file, `sync.lmdb-open`, and `sync.lmdb-in-use`, locked shared by every
/// process that has the store open and exclusively by a restore or an erase (`DataDirectoryLock`);
/// `sync.lmdb-erase-pending` while a deleted account's bytes wait to be erased (`LMDBErase`).
///
/// Every push is one write transaction flushed to disk before it returns. LMDB blocks, so all of it
/// runs on dispatch queues, never on the cooperative pool: writes on one serial queue (LMDB has one
/// writer anyway), reads on a concurrent one.
package final class LMDBSyncStorage: ServerStorage, SyncStore {
    enum DB {
        static let suites = Database(0), entries = Database(1), revisions = Database(2), batches = Database(3)
        static let tokens = Database(4), tokenHashes = Database(5), meta = Database(6)
        static let history = Database(7), devices = Database(8), pairings = Database(9)
        static let keyBags = Database(10), console = Database(11), audit = Database(12), sharing = Database(13)
        static let accountIncarnations = Database(14)
        static let names = [
            "suites", "entries", "revisions", "batches", "tokens", "token-hashes", "meta", "history", "devices", "pairings", "key-bags",
            "console", "audit", "sharing", "account-incarnations",
        ]
    }

    let environment: Environment
    /// The data directory.
    package let directory: String
    let writeQueue = DispatchQueue(label: "groupdefaults-server.lmdb.write")
    let readQueue = DispatchQueue(label: "groupdefaults-server.lmdb.read", attributes: .concurrent)
    let waiters = ChangeWaiters()
    let pending = Mutex<[PendingPush]>([])
    let closed = Atomic<Bool>(false)
    /// Held shared while the store is open: a restore waits for nobody and refuses instead.
    let inUse: DataDirectoryLock
    /// What opening did about an erase a delete left pending (`LMDBErase`), for the server's log.
    package let eraseOnOpen: LMDBErase.Outcome

    /// The largest the map may grow by default.
    package static let defaultMaximumMapSize = 64 << 30

    /// Opens (creating if needed, mode 0700) `directory` and its `sync.lmdb` (mode 0600). An erase
    /// that a delete left pending is done first when no other process has the store open
    /// (`LMDBErase`; a failure leaves it pending and is in `eraseOnOpen`).
    package convenience init(directory: String, maximumMapSize: Int = defaultMaximumMapSize) throws {
        try Self.makeDirectory(directory)
        let erasePending = LMDBErase.isPending(in: directory)
        let erase = erasePending ? LMDBErase.eraseIfPending(in: directory, maximumMapSize: maximumMapSize) : .nothingPending
        // Held exclusively: a restore (refused, as it swaps the file), or an erase (a process that
        // found the mark, or a delete that left it meanwhile), which takes a moment: waited for.
        guard
            let lock = try DataDirectoryLock.take(in: directory, exclusive: false, waiting: erasePending)
                ?? (LMDBErase.isPending(in: directory) ? DataDirectoryLock.take(in: directory, exclusive: false, waiting: true) : nil)
        else {
            throw SyncStorageError(
                .unavailable,
                "\(directory) is being restored from a backup: try again once the restore is done"
            )
        }
        try self.init(directory: directory, holding: lock, maximumMapSize: maximumMapSize, eraseOnOpen: erase)
    }

    private init(directory: String, holding lock: DataDirectoryLock, maximumMapSize: Int, eraseOnOpen: LMDBErase.Outcome) throws {
        self.directory = directory
        self.eraseOnOpen = eraseOnOpen
        inUse = lock
        environment = try Environment(
            path: Self.storePath(in: directory),
            options: Self.environmentOptions(directory: directory, maximumMapSize: maximumMapSize)
        )
    }

    /// How the store of `directory` is opened (also the copy an erase writes).
    static func environmentOptions(directory: String, maximumMapSize: Int) -> EnvironmentOptions {
        EnvironmentOptions(
            databases: DB.names,
            readerTrees: DB.names,
            lockFilePath: directory + "/sync.lmdb-open",
            initialMapSize: 8 << 20,
            maximumMapSize: maximumMapSize,
            fileMode: 0o600,
            maximumReaders: 126,
            structureCheckLimit: 64 << 20,
            writesThroughMap: false
        )
    }

    /// Why `directory` could not be made, as the system says it for the first folder of its path
    /// that cannot be (`not a directory`, `permission denied`).
    private static func whyNotMade(_ directory: String) -> String {
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0, errno != EEXIST { return String(cString: strerror(errno)).lowercased() }
        }
        return "the file system refused"
    }

    /// The store's file in a data directory.
    static func storePath(in directory: String) -> String { directory + "/sync.lmdb" }

    /// Whether `directory` holds a store (a server or `--create` made it).
    package static func storeExists(in directory: String) -> Bool {
        FileManager.default.fileExists(atPath: storePath(in: directory))
    }

    static func makeDirectory(_ directory: String) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw SyncStorageError(.unavailable, "\(directory) is not a directory") }
            return
        }
        do {
            try FileManager.default.createDirectory(
                atPath: directory,
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
        } catch {
            // Foundation's error prints as a dictionary dump: the system's reason is the sentence.
            throw SyncStorageError(.unavailable, "cannot create the data directory \(directory): \(whyNotMade(directory))")
        }
    }

    // MARK: Running LMDB off the cooperative pool

    func onWriteQueue<T: Sendable>(_ body: @Sendable @escaping () throws -> T) async throws -> T {
        let queued = ContinuousClock.now
        return try await withCheckedThrowingContinuation { continuation in
            writeQueue.async {
                Self.noteWait(since: queued, "write")
                continuation.resume(with: Result { try self.whileOpen(body) })
            }
        }
    }

    func onReadQueue<T: Sendable>(_ body: @Sendable @escaping () throws -> T) async throws -> T {
        let queued = ContinuousClock.now
        return try await withCheckedThrowingContinuation { continuation in
            readQueue.async {
                Self.noteWait(since: queued, "read")
                continuation.resume(with: Result { try self.whileOpen(body) })
            }
        }
    }

    /// Logs work that waited more than two seconds for its queue to run it: under the load of a
    /// full test run a request once waited about a minute before its read ran, which is not
    /// explained yet; the log says when and on which queue.
    private static func noteWait(since queued: ContinuousClock.Instant, _ queue: String) {
        let waited = ContinuousClock.now - queued
        guard waited > .seconds(2) else { return }
        Logger(label: "GroupDefaultsServer").warning("storage work waited \(waited) for the LMDB \(queue) queue")
    }

    /// Runs `body` unless the store was shut down (then `unavailable`, not a use of a closed environment).
    func whileOpen<T>(_ body: () throws -> T) throws -> T {
        guard !closed.load(ordering: .acquiring) else { throw SyncStorageError(.unavailable, "the store is shut down") }
        return try Self.mapped(body)
    }

    /// LMDB's own failures (disk full, I/O) are the server's trouble, not the client's: `unavailable`.
    static func mapped<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as SyncStorageError {
            throw error
        } catch {
            throw SyncStorageError(.unavailable, "storage failed: \(error)")
        }
    }

    // MARK: Reads

    package func changes(account: String, suite: String, since: UInt64, limit: Int) async throws -> StoredChanges {
        let environment = self.environment
        return try await onReadQueue {
            var page = StoredChanges(entries: [], lastRev: 0, hasMore: false)
            try environment.readTransaction { txn in
                guard let record = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite)) else { return }
                var since = since
                if SuiteReset.readsFromReset(since: since, resetRev: record.resetRev, oldestValid: record.oldestValid) { since = record.resetRev }
                if since < record.resetRev { throw SyncStorageError.suiteReset(suite, since: since) }
                if since < record.oldestValid {
                    throw SyncStorageError(
                        .cursorExpired,
                        "revision \(since) is older than the oldest valid revision \(record.oldestValid): re-read the snapshot"
                    )
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
                                let entry = try EntryBucket(raw).entries.first(where: { $0.rev == rev })
                            else { return true }
                            page.entries.append(entry)
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

    package func snapshot(account: String, suite: String, after: String?, limit: Int) async throws -> StoredSnapshot {
        let environment = self.environment
        return try await onReadQueue {
            var page = StoredSnapshot(entries: [], headRev: 0, next: nil)
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
                            page.entries.append(entry)
                        }
                        return true
                    }
                }
                page.next = more ? page.entries.last?.key : nil
            }
            return page
        }
    }

    package func suites(account: String) async throws -> SuiteList {
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

    package func headRevision(account: String, suite: String) async throws -> UInt64 {
        let environment = self.environment
        return try await onReadQueue {
            var head: UInt64 = 0
            try environment.readTransaction { txn in
                head = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite))?.head ?? 0
            }
            return head
        }
    }

    package func waitForChange(account: String, suite: String, after revision: UInt64, timeout: Duration) async {
        let key = ChangeWaiters.SuiteKey(account: account, suite: suite)
        await waiters.wait(key, after: revision, timeout: timeout) { id in self.wakeIfPassed(key, id: id, revision) }
    }

    package func watchForChange(
        account: String,
        suite: String,
        after revision: UInt64,
        wake: @escaping @Sendable (ChangeWatch.Wake) -> Void
    ) -> ChangeWatch {
        let key = ChangeWaiters.SuiteKey(account: account, suite: suite)
        return waiters.watch(key, after: revision, registered: { id in self.wakeIfPassed(key, id: id, revision) }, wake: wake)
    }

    /// Wakes the waiter `id` if the suite's head is already past `revision`, or cannot be read: a
    /// waiter that has just registered reads the head once, so that a push committed just before it
    /// is not missed.
    private func wakeIfPassed(_ key: ChangeWaiters.SuiteKey, id: UInt64, _ revision: UInt64) {
        let waiters = self.waiters
        Task {
            let head = try? await self.headRevision(account: key.account, suite: key.suite)
            if head.map({ $0 > revision }) ?? true { waiters.resume(key, id: id) }
        }
    }

    /// No: another process (a command beside the server) writes without waking this one's waiters.
    package var watchesHearEveryWriter: Bool { false }

    package func endWaits() {
        waiters.endAll()
    }

    /// How many long-polls and parked event streams wait on this instance.
    var waitingCount: Int { waiters.count }

    package func shutdown() async throws {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let environment = self.environment
        let readQueue = self.readQueue
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            writeQueue.async {
                readQueue.sync(flags: .barrier) { environment.close() }
                self.inUse.release()
                continuation.resume()
            }
        }
    }

    // MARK: Small helpers

    static func suiteRecord(_ txn: LMDBTransaction, _ key: [UInt8]) throws -> SuiteRecord? {
        try key.withUnsafeBytes { key in
            guard let raw = try txn.get(DB.suites, key) else { return nil }
            guard let record = SuiteRecord(raw) else { throw SyncStorageError(.unavailable, "a damaged suite record") }
            return record
        }
    }

    static func bucket(_ txn: LMDBTransaction, _ key: [UInt8]) throws -> EntryBucket {
        try key.withUnsafeBytes { key in try txn.get(DB.entries, key).map { try EntryBucket($0) } ?? EntryBucket() }
    }

    static func get(_ txn: LMDBTransaction, _ database: Database, _ key: [UInt8]) throws -> [UInt8]? {
        try key.withUnsafeBytes { key in try txn.get(database, key).map { Array($0) } }
    }

    static func put(_ txn: LMDBTransaction, _ database: Database, _ key: [UInt8], _ value: [UInt8]) throws {
        try key.withUnsafeBytes { key in try value.withUnsafeBytes { value in try txn.put(database, key, value) } }
    }

    static func delete(_ txn: LMDBTransaction, _ database: Database, _ key: [UInt8]) throws {
        try key.withUnsafeBytes { key in _ = try txn.delete(database, key) }
    }
}
