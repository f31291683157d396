import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

/// What only the PostgreSQL backend does: several instances on one database, migrations racing,
/// an unreachable database. Two minutes each: two of these tests make a PostgreSQL cluster of their
/// own (initdb and a start), which took over a minute once while every other suite ran on the same
/// two cores.
@Suite("PostgreSQL instances", .timeLimit(.minutes(2)))
struct PostgresInstancesTests {
    let clock = ContinuousClock()

    func push(_ storage: PostgresSyncStorage, key: String, hlc: UInt64) async throws -> PushResponse {
        try await storage.push(
            account: "alice",
            suite: "s",
            request: PushRequest(deviceID: 1, batchID: UUID().uuidString, ops: [PushOp(key: key, value: .integer(1), hlc: HLC(rawValue: hlc))]),
            quota: SuiteQuota(maxKeys: 100, maxBytes: 1 << 20),
            serverTime: "2026-11-22T10:00:00.000Z"
        )
    }

    /// Starts a wait on `waiter` after `head`, pushes through `pusher` once it waits, and returns the
    /// time from the push's commit (its return to the pusher) to the wait's end, zero if the wait
    /// ended first. (Under the parallel test load the push itself can take tens of milliseconds.)
    func wakeLatency(pusher: PostgresSyncStorage, waiter: PostgresSyncStorage, head: UInt64) async throws -> Duration {
        let wait = Task {
            await waiter.waitForChange(account: "alice", suite: "s", after: head, timeout: .seconds(10))
            return clock.now
        }
        await waiter.waitUntilWaiting()
        let start = clock.now
        let response = try await push(pusher, key: "k\(head)", hlc: 100 + head)
        let committed = clock.now
        #expect(response.headRev == head + 1)
        let woken = await wait.value
        #expect(woken - start < .seconds(2), "woken \(woken - start) after the push started")
        return max(.zero, woken - committed)
    }

    @Test("a push through one instance wakes a wait on another within 100 ms, also after its listener was killed")
    func crossInstanceWakeUp() async throws {
        let url = try await PostgresFixture.freshDatabase()
        let a = try await PostgresFixture.storage(url: url)
        let b = try await PostgresFixture.storage(url: url)
        await b.waitUntilListening()

        let first = try await wakeLatency(pusher: a, waiter: b, head: 0)
        #expect(first < .milliseconds(100), "woken after \(first)")

        // Kill b's listening connection: it reconnects by itself and wakes its waiters.
        let listensBefore = b.listenCount
        let killed = try await PostgresFixture.psql(
            url,
            """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '\(b.listenerApplicationName)'
            """
        )
        #expect(killed == "1")
        let afterKill = try await wakeLatency(pusher: a, waiter: b, head: 1)
        #expect(afterKill < .milliseconds(100), "woken after \(afterKill)")
        await b.waitUntilListening(moreThan: listensBefore)
        let listeners = try await PostgresFixture.psql(
            url,
            """
            SELECT count(*) FROM pg_stat_activity WHERE application_name = '\(b.listenerApplicationName)'
            """
        )
        #expect(listeners == "1")

        // And the new connection delivers notifications.
        let afterReconnect = try await wakeLatency(pusher: a, waiter: b, head: 2)
        #expect(afterReconnect < .milliseconds(100), "woken after \(afterReconnect)")

        try await a.shutdown()
        try await b.shutdown()
    }

    /// Until `condition` holds of `storage`'s token generation (bounded: 5 s), then that generation.
    func tokenGeneration(of storage: PostgresSyncStorage, where condition: (UInt64?) -> Bool) async throws -> UInt64? {
        let deadline = clock.now + .seconds(5)
        while clock.now < deadline {
            let generation = try storage.tokenGeneration()
            if condition(generation) { return generation }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the token generation did not change as expected")
        return nil
    }

    @Test("a token written by another instance, or by hand in SQL, moves this instance's token generation; none while it does not listen")
    func tokenGenerationAcrossInstances() async throws {
        let url = try await PostgresFixture.freshDatabase()
        let a = try await PostgresFixture.storage(url: url)
        let b = try await PostgresFixture.storage(url: url)
        await b.waitUntilListening()
        let start = try #require(try b.tokenGeneration(), "listening: verifications may be cached")

        let made = Tokens.make(account: "alice", suitePatterns: ["*"], readOnly: false, expires: nil)
        try await a.createToken(made.stored)
        let created = try await tokenGeneration(of: b) { $0 != nil && $0 != start }
        try await a.revokeToken(id: made.stored.id, at: Date())
        let revoked = try await tokenGeneration(of: b) { $0 != nil && $0 != created }
        _ = try await PostgresFixture.psql(url, "UPDATE tokens SET expires = now() WHERE id = '\(made.stored.id)'")
        _ = try await tokenGeneration(of: b) { $0 != nil && $0 != revoked }

        // Without its listening connection an instance caches nothing, and a generation read
        // before the loss never comes back.
        let before = try b.tokenGeneration()
        let listens = b.listenCount
        _ = try await PostgresFixture.psql(
            url,
            """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '\(b.listenerApplicationName)'
            """
        )
        await b.waitUntilListening(moreThan: listens)
        let after = try #require(try b.tokenGeneration())
        #expect(after != before)
        try await a.shutdown()
        try await b.shutdown()
    }

    @Test("instances starting at once on a new database apply each migration once")
    func concurrentMigrations() async throws {
        let url = try await PostgresFixture.freshDatabase()
        let instances = try await withThrowingTaskGroup(of: PostgresSyncStorage.self) { group in
            for _ in 0..<4 { group.addTask { try await PostgresFixture.storage(url: url) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(instances.count == 4)
        let versions = try await PostgresFixture.psql(url, "SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations")
        #expect(versions == PostgresMigrations.versions.map(String.init).joined(separator: ","), "each migration applied once")
        for instance in instances { try await instance.shutdown() }
    }

    @Test("a database of the previous schema (version 8) with entries: migration 9 replaces its index while its data stays readable")
    func upgradeFromVersion8() async throws {
        let url = try await PostgresFixture.freshDatabase()
        let first = try await PostgresFixture.storage(url: url)
        let push = PushRequest(
            deviceID: 7,
            batchID: "b",
            ops: (1...50).map { PushOp(key: "k\($0)", value: .integer($0), hlc: HLC(rawValue: 1 << 40 + UInt64($0))) }
        )
        _ = try await first.push(
            account: "a",
            suite: "s",
            push: try PreparedPush(push),
            quota: SuiteQuota(maxKeys: 1_000, maxBytes: 1 << 20),
            serverTime: "2026-11-28T10:00:00.000Z"
        )
        try await first.shutdown()
        // Back to version 8: its index, and no row for 9.
        _ = try await PostgresFixture.psql(
            url,
            "DROP INDEX entries_by_live_rev; CREATE INDEX entries_by_rev ON entries (account, suite, rev); DELETE FROM schema_migrations WHERE version = 9"
        )
        let upgraded = try await PostgresFixture.storage(url: url)
        let indexes = try await PostgresFixture.psql(
            url,
            "SELECT string_agg(indexname || ':' || indexdef, ';' ORDER BY indexname) FROM pg_indexes WHERE tablename = 'entries'"
        )
        #expect(!indexes.contains("entries_by_rev:"), "\(indexes)")
        #expect(indexes.contains("entries_by_live_rev:") && indexes.contains("WHERE (rev > 0)"), "\(indexes)")
        let valid = try await PostgresFixture.psql(url, "SELECT bool_and(indisvalid) FROM pg_index WHERE indrelid = 'entries'::regclass")
        #expect(valid == "t")
        let versions = try await PostgresFixture.psql(url, "SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations")
        #expect(versions == PostgresMigrations.versions.map(String.init).joined(separator: ","))
        let page = try await upgraded.changes(account: "a", suite: "s", since: 10, limit: 5).page()
        #expect(page.entries.map(\.rev) == [11, 12, 13, 14, 15])
        try await upgraded.shutdown()
    }

    @Test("an unreachable database is refused at once with one sentence, not a hang")
    func unreachableDatabase() async throws {
        // A port nothing listens on: the fixture server's, after stopping a throwaway one.
        let tool = PostgresFixture.packageRoot.appendingPathComponent("Tools/postgres").path
        let url = try await Command.run(tool, ["start"])
        try await Command.run(tool, ["stop", url])
        try await Command.run(tool, ["stop", url])  // stopping a stopped server succeeds quietly
        // Timeouts of a minute: a refusal is answered without waiting for either, however slowly
        // this process is scheduled while every test runs at once.
        var configuration = try PostgresStorageConfiguration(url: url)
        configuration.connectTimeout = .seconds(60)
        configuration.operationTimeout = .seconds(60)
        let start = clock.now
        do {
            _ = try await PostgresSyncStorage.start(configuration, logger: PostgresFixture.logger)
            Issue.record("started on a stopped database")
        } catch let error as StorageStartError {
            #expect(error.description == "cannot reach PostgreSQL at \(configuration.place): connection refused")
        }
        #expect(clock.now - start < .seconds(20))
    }

    @Test("a running instance answers `unavailable` once its database is gone, and waits still end")
    func databaseGoesAway() async throws {
        let tool = PostgresFixture.packageRoot.appendingPathComponent("Tools/postgres").path
        let url = try await Command.run(tool, ["start", "--until-exit", String(getpid())])
        var configuration = try PostgresStorageConfiguration(url: url)
        // The schema first, with room for its statements while every test runs at once on two
        // cores (8 s was once too little); the instance under test then finds it migrated.
        var migrating = configuration
        migrating.operationTimeout = .seconds(30)
        try await PostgresSyncStorage.start(migrating, logger: PostgresFixture.logger).shutdown()
        // Refusals come at once; the start's own check still needs room on a loaded machine.
        configuration.connectTimeout = .seconds(5)
        configuration.operationTimeout = .seconds(8)
        let storage = try await PostgresSyncStorage.start(configuration, logger: PostgresFixture.logger)
        _ = try await push(storage, key: "a", hlc: 1)
        try await Command.run(tool, ["stop", url])

        let start = clock.now
        do {
            _ = try await push(storage, key: "b", hlc: 2)
            Issue.record("a push succeeded without a database")
        } catch let error as SyncStorageError {
            #expect(error.code == .unavailable)
        }
        await storage.waitForChange(account: "alice", suite: "s", after: 1, timeout: .milliseconds(200))
        #expect(clock.now - start < .seconds(30))
        try await storage.shutdown()
    }
}
