import Foundation
package import GroupDefaultsWire
package import Logging
import PostgresNIO
package import ServiceLifecycle
import Synchronization

/// `ServerStorage` on PostgreSQL, for several stateless server instances sharing one database.
///
/// Queries run on postgres-nio's `PostgresClient` (a pool) of the host that takes writes, which
/// `PrimaryRouter` finds again after a failover; one more, dedicated connection LISTENs there
/// for the `pg_notify` every push sends, so a push on any instance wakes `waitForChange` on every
/// instance. These, and the router's looks, are swift-service-lifecycle services (`services`): the server runs them in its
/// service group and migrates the schema (`migrate()`) before it accepts requests; programs without
/// a service group (the token commands, tests) use `start`. Every call is bounded by the
/// configuration's operation timeout and fails with `SyncStorageError(.unavailable, …)` when the
/// database cannot be reached.
package final class PostgresSyncStorage: ServerStorage, SyncStore {
    /// The pools of every host, and which one takes writes.
    let router: PrimaryRouter
    let logger: Logger
    let configuration: PostgresStorageConfiguration
    let signals: ChangeSignals
    /// Set by `endWaits`: every wait returns at once.
    let waitsEnded = Atomic<Bool>(false)
    let listener: ChangeListener
    /// Group commit per suite (`push`).
    let pushGroups = PushGroups()
    /// The listening connection's `application_name`, unique per instance (operators and tests find
    /// its backend in `pg_stat_activity` by it).
    package let listenerApplicationName: String
    /// The task running `services`, for storage made by `start`.
    private let ownTask = Mutex<Task<Void, Never>?>(nil)

    /// A storage whose `services` must run (in the caller's service group) before it can answer;
    /// `primary` is the index of the host found to take writes (`PostgresReachability.check`).
    package init(configuration: PostgresStorageConfiguration, primary: Int = 0, logger: Logger) {
        let router = PrimaryRouter(configuration: configuration, primary: primary, logger: logger)
        let signals = ChangeSignals()
        let applicationName = "groupdefaults-listener-\(UUID().uuidString.prefix(8).lowercased())"
        let listener = ChangeListener(
            router: router,
            applicationName: applicationName,
            signals: signals,
            logger: logger
        )
        self.configuration = configuration
        self.logger = logger
        self.router = router
        self.signals = signals
        self.listener = listener
        listenerApplicationName = applicationName
    }

    /// The pool of the host that takes writes.
    var client: PostgresClient { router.client }

    /// What must run while the storage is used: the connection pools, the router's looks and the
    /// listening connection. They end at graceful shutdown or cancellation.
    package var services: [any Service] { router.pools + [router, listener] }

    /// Creates or migrates the schema (the services must be running).
    ///
    /// - Throws: `SyncStorageError(.unavailable, …)` when the database cannot be reached within the
    ///   operation timeout, or the migrations do not end within the migration timeout.
    package func migrate() async throws {
        try await bounded("reaching the database") { storage in
            try await storage.client.query("SELECT 1", logger: storage.logger)
        }
        try await bounded("migrating the schema", timeout: configuration.migrationTimeout) { storage in
            try await PostgresMigrations.migrate(storage.client, logger: storage.logger)
        }
    }

    /// For programs without a service group: runs the services in a task of the storage's own
    /// (until `shutdown`), and migrates.
    ///
    /// - Throws: `StorageStartError` when the database cannot be reached or refuses the connection
    ///   (`PostgresReachability`), `SyncStorageError(.unavailable, …)` when it does not answer the
    ///   migration within the operation timeout.
    package static func start(_ configuration: PostgresStorageConfiguration, logger: Logger) async throws -> PostgresSyncStorage {
        let primary = try await PostgresReachability.check(configuration)
        let storage = PostgresSyncStorage(configuration: configuration, primary: primary, logger: logger)
        let services = storage.services
        storage.ownTask.withLock { task in
            task = Task {
                await withDiscardingTaskGroup { group in
                    for service in services { group.addTask { try? await service.run() } }
                }
            }
        }
        do {
            try await storage.migrate()
        } catch {
            try? await storage.shutdown()
            throw error
        }
        return storage
    }

    /// Ends what `start` runs; storage run by a service group ends with the group.
    package func shutdown() async throws {
        guard let task = ownTask.withLock({ $0 }) else { return }
        task.cancel()
        await task.value
    }

    // MARK: Bounded calls

    /// What a storage call answers while no host takes writes (503 with `Retry-After`).
    private func failingOver(_ what: String) -> SyncStorageError {
        SyncStorageError(.unavailable, "\(what): PostgreSQL is failing over (no host of \(configuration.place) takes writes yet)")
    }

    /// How long a storage call runs before the router is asked to look at its host.
    static let slowCall: Duration = .seconds(1)

    /// Runs `body` within `timeout` (the operation timeout unless given); anything but our own errors and cancellation becomes
    /// `unavailable` (the database is unreachable, restarting or overloaded).
    @discardableResult
    func bounded<T: Sendable>(
        _ what: String,
        timeout: Duration? = nil,
        _ body: @escaping @Sendable (PostgresSyncStorage) async throws -> T
    ) async throws -> T {
        let timeout = timeout ?? configuration.operationTimeout
        if router.isSwitching {
            throw failingOver(what)
        }
        do {
            // The timeout; and a call still running after a second makes the router look whether
            // its host still takes writes. Once it knows that none does, the call ends (a request
            // on a lost host's pool would wait for the whole timeout).
            return try await firstOf({ try await body(self) }) { () async throws -> Never in
                let deadline = ContinuousClock.now + timeout
                try await Task.sleep(for: min(timeout, Self.slowCall))
                if ContinuousClock.now < deadline { self.router.suspect() }
                while ContinuousClock.now < deadline {
                    if self.router.isSwitching { throw self.failingOver(what) }
                    try await Task.sleep(for: min(deadline - ContinuousClock.now, .milliseconds(100)))
                }
                throw SyncStorageError(.unavailable, "\(what): PostgreSQL did not answer within \(timeout)")
            }
        } catch let error as SyncStorageError {
            if error.code == .unavailable { router.suspect() }  // the timeout: is the host still there?
            throw error
        } catch let error as PostgresTransactionError {
            // A refusal inside a transaction (rolled back): ours to pass on as it is.
            if let refusal = error.closureError as? SyncStorageError { throw refusal }
            if Task.isCancelled { throw CancellationError() }
            router.suspect()
            throw SyncStorageError(.unavailable, "\(what): \(String(reflecting: error))")
        } catch {
            if Task.isCancelled { throw CancellationError() }
            router.suspect()
            throw SyncStorageError(.unavailable, "\(what): \(String(reflecting: error))")
        }
    }

    // MARK: Reads

    package func headRevision(account: String, suite: String) async throws -> UInt64 {
        try await bounded("reading the head revision") { storage in
            let rows = try await storage.client.query(
                "SELECT head_rev FROM suites WHERE account = \(account) AND suite = \(suite)",
                logger: storage.logger
            )
            for try await head in rows.decode(Int64.self) { return UInt64(head) }
            return 0
        }
    }

    /// One prepared statement (one snapshot, one round trip): `ChangesStatement`.
    package func changes(account: String, suite: String, since: UInt64, limit: Int) async throws -> StoredChanges {
        let limit = max(1, limit)  // a page of nothing would report the head as the next cursor
        // A page, or (since 0 on a reset suite) the reset's revision to read after instead.
        let answer: Result<StoredChanges, ReadFromReset> = try await bounded("reading changes") { storage in
            let rows = try await storage.client.rowsPlanningEach(
                of: ChangesStatement(account: account, suite: suite, since: Int64(clamping: since), limit: Int64(limit) + 1),
                logger: storage.logger
            )
            var head: UInt64 = 0
            var oldestValid: UInt64 = 0
            var entries: [StoredEntry] = []
            for try await row in rows {
                head = UInt64(row.0 ?? 0)
                oldestValid = UInt64(row.1 ?? 0)
                if let entry = try EntryRow.optional(key: row.2, (row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10)) {
                    entries.append(entry)
                }
            }
            if since < oldestValid {
                let resets = try await storage.client.query(
                    "SELECT reset_rev FROM suites WHERE account = \(account) AND suite = \(suite)",
                    logger: storage.logger
                )
                for try await resetRev in resets.decode(Int64.self) where since < resetRev {
                    // No cursor yet: everything since the reset, if no tombstone was purged since.
                    if SuiteReset.readsFromReset(since: since, resetRev: UInt64(resetRev), oldestValid: oldestValid) {
                        return .failure(ReadFromReset(revision: UInt64(resetRev)))
                    }
                    throw SyncStorageError.suiteReset(suite, since: since)
                }
                throw SyncStorageError(
                    .cursorExpired,
                    "revision \(since) is older than \(oldestValid), the oldest this suite can answer from (tombstones were purged): re-read the snapshot"
                )
            }
            let hasMore = entries.count > limit
            if hasMore { entries.removeLast(entries.count - limit) }
            return .success(StoredChanges(entries: entries, lastRev: entries.last?.rev ?? head, hasMore: hasMore))
        }
        switch answer {
        case .success(let page): return page
        case .failure(let reset): return try await changes(account: account, suite: suite, since: reset.revision, limit: limit)
        }
    }

    /// `since` 0 on a reset suite: read after the reset's revision (`SuiteReset.readsFromReset`).
    private struct ReadFromReset: Error { var revision: UInt64 }

    /// One statement, as `changes`.
    package func snapshot(account: String, suite: String, after: String?, limit: Int) async throws -> StoredSnapshot {
        let limit = max(1, limit)
        return try await bounded("reading a snapshot") { storage in
            let rows = try await storage.client.query(
                """
                SELECT s.head_rev, s.oldest_valid_rev, e.key, \(unescaped: EntryRow.qualifiedColumns("e"))
                FROM (SELECT 1) AS one
                LEFT JOIN suites s ON s.account = \(account) AND s.suite = \(suite)
                LEFT JOIN LATERAL (
                    SELECT * FROM entries
                    WHERE account = \(account) AND suite = \(suite) AND (\(after)::text IS NULL OR key > \(after))
                    ORDER BY key LIMIT \(Int64(limit) + 1)
                ) e ON true
                ORDER BY e.key
                """,
                logger: storage.logger
            )
            var head: UInt64 = 0
            var entries: [StoredEntry] = []
            for try await row in rows.decode(SuiteAndEntryRow.self) {
                head = UInt64(row.0 ?? 0)
                if let entry = try EntryRow.optional(key: row.2, (row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10)) {
                    entries.append(entry)
                }
            }
            let hasMore = entries.count > limit
            if hasMore { entries.removeLast(entries.count - limit) }
            return StoredSnapshot(entries: entries, headRev: head, next: hasMore ? entries.last?.key : nil)
        }
    }

    package func suites(account: String) async throws -> SuiteList {
        try await bounded("listing suites") { storage in
            let rows = try await storage.client.query(
                """
                SELECT suite, head_rev, key_count FROM suites
                WHERE account = \(account) AND head_rev > 0 ORDER BY suite
                """,
                logger: storage.logger
            )
            var suites: [SuiteList.Suite] = []
            for try await (name, head, keys) in rows.decode((String, Int64, Int64).self) {
                suites.append(SuiteList.Suite(name: name, headRev: UInt64(head), keys: Int(keys)))
            }
            return SuiteList(suites: suites)
        }
    }

    // MARK: Waiting

    package func waitForChange(account: String, suite: String, after revision: UInt64, timeout: Duration) async {
        let id = SuiteID(account: account, suite: suite)
        let deadline = ContinuousClock.now + timeout
        while !Task.isCancelled, ContinuousClock.now < deadline {
            let registration = signals.register(id)
            defer { signals.unregister(registration) }
            if waitsEnded.load(ordering: .acquiring) { return }  // after registering: `endWaits` wakes it, or it is seen here
            // Registered first, then read: a push between the two still wakes this waiter.
            if let head = try? await headRevision(account: account, suite: suite), head > revision { return }
            // Resumed directly by whoever signals (the listening connection, or a push on this
            // instance); the deadline's timer runs beside it, not in between.
            let wake = await signals.wait(registration, until: deadline)
            switch wake {
            case nil: return  // timeout or cancellation
            case .head(let head) where head > revision: return
            case .head, .recheck: continue  // read the table again
            }
        }
    }

    package func watchForChange(
        account: String,
        suite: String,
        after revision: UInt64,
        wake: @escaping @Sendable (ChangeWatch.Wake) -> Void
    ) -> ChangeWatch {
        let signals = self.signals
        let id = signals.watch(SuiteID(account: account, suite: suite)) { _ in
            wake(self.waitsEnded.load(ordering: .acquiring) ? .ended : .changed)
        }
        // After registering: `endWaits` wakes it, or it is seen here; a push that committed before
        // the watch was in the table is seen in the head, and a head that cannot be read wakes it
        // too (its notification may have come before the watch, and the turn finds out).
        if waitsEnded.load(ordering: .acquiring) {
            signals.fire(id)
        } else {
            Task {
                let head = try? await self.headRevision(account: account, suite: suite)
                if head.map({ $0 > revision }) ?? true { signals.fire(id) }
            }
        }
        return ChangeWatch { signals.unregister(id) }
    }

    /// Yes: pushes, resets, removals and deletions notify every instance (`pg_notify`), and a
    /// listener that reconnects wakes every watch.
    package var watchesHearEveryWriter: Bool { true }

    package func endWaits() {
        waitsEnded.store(true, ordering: .releasing)
        signals.signalAll()
    }
}

/// A row of `changes` and `snapshot`: the suite's head and oldest valid revision (nil: no such
/// suite), then the key and `EntryRow.columns` of an entry, all nil when there is none.
typealias SuiteAndEntryRow = (Int64?, Int64?, String?, String?, Data?, Int64?, Bool?, String?, String?, Int64?, String?)

/// `changes` in one statement: the suite's head and oldest valid revision (nulls: no such suite)
/// beside each entry of the page (`SuiteAndEntryRow`; one row of nulls after the suite's when there
/// is none, and none when the cursor is older than the oldest valid revision).
struct ChangesStatement: OneShotStatement {
    static let sql = """
        SELECT s.head_rev, s.oldest_valid_rev, e.key, \(EntryRow.qualifiedColumns("e"))
        FROM (SELECT 1) AS one
        LEFT JOIN suites s ON s.account = $1 AND s.suite = $2
        LEFT JOIN LATERAL (
            SELECT * FROM entries
            WHERE account = $1 AND suite = $2 AND rev > $3 AND $3 >= COALESCE(s.oldest_valid_rev, 0)
            ORDER BY rev LIMIT $4
        ) e ON true
        ORDER BY e.rev
        """
    typealias Row = SuiteAndEntryRow

    var account: String
    var suite: String
    var since: Int64
    var limit: Int64

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 4)
        bindings.append(account)
        bindings.append(suite)
        bindings.append(since)
        bindings.append(limit)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        try row.decode(Row.self)
    }
}

/// One row of `entries` (or `history`) as the queries select it: key, then `EntryRow.columns`:
/// value text (nil: a tombstone or a sealed entry), sealed bytes and key epoch (nil: plain), the
/// deletion flag, HLC and origin as decimal text, revision.
enum EntryRow {
    /// The columns after the key, in the order `Columns` decodes them.
    static let columns = "value::text, sealed, epoch, deleted, hlc::text, origin::text, rev, pushed_by"
    typealias Columns = (String?, Data?, Int64?, Bool, String, String, Int64, String?)

    /// `columns`, of the table or subquery `alias`.
    static func qualifiedColumns(_ alias: String) -> String {
        """
        \(alias).value::text, \(alias).sealed, \(alias).epoch, \(alias).deleted, \(alias).hlc::text, \(alias).origin::text, \(alias).rev, \
        \(alias).pushed_by
        """
    }

    /// The entry of a row of an outer join, nil when the row has none (no key).
    static func optional(
        key: String?,
        _ row: (String?, Data?, Int64?, Bool?, String?, String?, Int64?, String?)
    ) throws(SyncStorageError) -> StoredEntry? {
        guard let key else { return nil }
        guard let deleted = row.3, let hlc = row.4, let origin = row.5, let rev = row.6 else {
            throw SyncStorageError(.unavailable, "a stored entry of \(key) has null columns")
        }
        return try stored(key: key, (row.0, row.1, row.2, deleted, hlc, origin, rev, row.7))
    }

    /// A row (value as JSON text, sealed bytes, stamp as decimal text, the member account that
    /// pushed it) as the push step takes it.
    static func stored(key: String, _ row: Columns) throws(SyncStorageError) -> StoredEntry {
        var entry = try stored(key: key, (row.0, row.1, row.2, row.3, row.4, row.5, row.6))
        entry.account = row.7
        return entry
    }

    private static func stored(key: String, _ row: (String?, Data?, Int64?, Bool, String, String, Int64)) throws(SyncStorageError) -> StoredEntry {
        let (value, sealed, epoch, deleted, hlc, origin, rev) = row
        guard let hlcValue = UInt64(hlc), let originValue = UInt64(origin) else {
            throw SyncStorageError(.unavailable, "a stored entry of \(key) has an unreadable stamp (\(hlc), \(origin))")
        }
        let stamp = Stamp(hlc: HLC(rawValue: hlcValue), origin: originValue)
        if let sealed {
            guard let epoch, epoch > 0, epoch <= Int64(UInt32.max) else {
                throw SyncStorageError(.unavailable, "a sealed entry of \(key) has no key epoch")
            }
            return StoredEntry(
                key: key,
                sealed: SealedPayload(epoch: UInt32(epoch), box: Array(sealed)),
                deleted: deleted,
                stamp: stamp,
                rev: UInt64(rev)
            )
        }
        return StoredEntry(key: key, valueJSON: deleted ? nil : value.map { Array($0.utf8) }, stamp: stamp, rev: UInt64(rev))
    }
}
