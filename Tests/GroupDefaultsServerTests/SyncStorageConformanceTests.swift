import Foundation
import GroupDefaultsWire
import GroupDefaultsServer
import TestSupport
import Testing

/// The backends the storage conformance tests (this file and StorageConformanceTests.swift) run
/// against, in process: the embedded LMDB store and PostgreSQL (a throwaway server, a fresh
/// database per test).
extension StorageBackend {
    /// A fresh, empty store, and how to remove it afterwards.
    func make() async throws -> (storage: any SyncStorage, cleanup: @Sendable () -> Void) {
        switch self {
        case .lmdb:
            let fixture = try Fixture()
            let directory = fixture.directory
            return (fixture.storage, { try? FileManager.default.removeItem(at: directory) })
        case .postgres:
            // The database is dropped with the throwaway server.
            return (try await PostgresFixture.storage(url: try await PostgresFixture.freshDatabase()), {})
        }
    }

    /// Runs `body` with a new storage and shuts it down afterwards, also when `body` throws.
    func withStorage(_ body: (any SyncStorage) async throws -> Void) async throws {
        let (storage, cleanup) = try await make()
        defer { cleanup() }
        do {
            try await body(storage)
        } catch {
            try? await storage.shutdown()
            throw error
        }
        try await storage.shutdown()
    }
}

/// `SyncStorage`'s semantics, one test body per property, run against every backend.
@Suite("SyncStorage conformance")
struct SyncStorageConformanceTests {
    @Test("concurrent pushes share commits yet stay all or nothing: exactly the quota's worth succeed, revisions 1…n", arguments: StorageBackend.allCases)
    func groupCommitKeepsEachPushAtomic(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.make()
        defer { cleanup() }
        let quota = SuiteQuota(maxKeys: 10, maxBytes: 1 << 20)
        let outcomes = await withTaskGroup(of: UInt64?.self) { group in
            for i in 0 ..< 40 {
                group.addTask {
                    let request = PushRequest(deviceID: UInt64(i + 1), batchID: "b", ops: [API.set("k\(i)", "v"), API.set("k\(i)-2", "w")])
                    return try? await storage.push(account: "a", suite: "s", request: request, quota: quota, serverTime: "t").headRev
                }
            }
            return await group.reduce(into: [UInt64?]()) { $0.append($1) }
        }
        let heads = outcomes.compactMap { $0 }.sorted()
        #expect(heads == [2, 4, 6, 8, 10])
        let snapshot = try await storage.snapshot(account: "a", suite: "s", after: nil, limit: 100)
        #expect(snapshot.entries.count == 10 && snapshot.headRev == 10)
        // Each successful push kept both its ops.
        for entry in snapshot.entries where !entry.key.hasSuffix("-2") {
            #expect(snapshot.entries.contains { $0.key == entry.key + "-2" })
        }
        try await storage.shutdown()
    }

    @Test("snapshot pages follow exact UTF-8 key order, long keys sharing their first 503 bytes included", arguments: StorageBackend.allCases)
    func longKeyOrder(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.make()
        defer { cleanup() }
        let prefix = String(repeating: "a", count: 503)
        let keys = [prefix + "b", prefix + "a" + "z", prefix, prefix + "a", String(repeating: "a", count: 502) + "b", "é", "z", "Z", "ab"]
        let old = API.hlc(offsetMilliseconds: -86_400_000)
        let ops = keys.map { API.set($0, "v") } + [API.delete(prefix + "c", hlc: old)]
        _ = try await storage.push(account: "a", suite: "s", request: PushRequest(deviceID: 1, batchID: "b", ops: ops),
                                   quota: SuiteQuota(maxKeys: 100, maxBytes: 1 << 20), serverTime: "")
        let expected = (keys + [prefix + "c"]).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var seen: [String] = []
        var after: String?
        repeat {
            let page = try await storage.snapshot(account: "a", suite: "s", after: after, limit: 3)
            seen += page.entries.map(\.key)
            after = page.next
        } while after != nil
        #expect(seen == expected)
        let changes = try await storage.changes(account: "a", suite: "s", since: 0, limit: 100)
        #expect(changes.entries.map(\.key) == keys + [prefix + "c"])
        // Purging the tombstone in a shared bucket keeps its neighbours.
        #expect(try await storage.purgeTombstones(olderThan: API.hlc(offsetMilliseconds: -3_600_000)) == 1)
        let after2 = try await storage.snapshot(account: "a", suite: "s", after: nil, limit: 100)
        #expect(after2.entries.map(\.key) == expected.filter { $0 != prefix + "c" })
        try await storage.shutdown()
    }

    @Test("batch records are kept until the purge horizon passes them, then dropped", arguments: StorageBackend.allCases)
    func batchRetention(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.make()
        defer { cleanup() }
        let quota = SuiteQuota(maxKeys: 10, maxBytes: 1000)
        let first = PushRequest(deviceID: 1, batchID: "b", ops: [API.set("k", "v")])
        let other = PushRequest(deviceID: 1, batchID: "b", ops: [API.set("k", "w", hlc: API.hlc(offsetMilliseconds: 5))])
        _ = try await storage.push(account: "a", suite: "s", request: first, quota: quota, serverTime: "")
        _ = try await storage.purgeTombstones(olderThan: API.hlc(offsetMilliseconds: -60_000))
        await #expect(throws: SyncStorageError.self) { try await storage.push(account: "a", suite: "s", request: other, quota: quota, serverTime: "") }
        _ = try await storage.purgeTombstones(olderThan: API.hlc(offsetMilliseconds: 60_000))
        let response = try await storage.push(account: "a", suite: "s", request: other, quota: quota, serverTime: "")
        #expect(response.results.first?.status == .applied)
        try await storage.shutdown()
    }

    @Test("changes: the latest entry per key in revision order; last_rev; accounts apart; unwritten suites empty", arguments: StorageBackend.allCases)
    func changesSemantics(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.make()
        defer { cleanup() }
        let quota = SuiteQuota(maxKeys: 100, maxBytes: 1 << 20)
        let t = API.hlc()
        _ = try await storage.push(account: "a", suite: "s", request: PushRequest(deviceID: 1, batchID: "1", ops: [
            API.set("x", "1", hlc: t), API.set("y", "1", hlc: t)]), quota: quota, serverTime: "")
        _ = try await storage.push(account: "a", suite: "s", request: PushRequest(deviceID: 1, batchID: "2", ops: [
            API.set("x", "2", hlc: HLC(rawValue: t.rawValue + 1))]), quota: quota, serverTime: "")
        let page = try await storage.changes(account: "a", suite: "s", since: 0, limit: 10)
        #expect(page.entries.map(\.key) == ["y", "x"] && page.entries.map(\.rev) == [2, 3])
        #expect(page.entries[1].value == .string("2") && page.lastRev == 3 && !page.hasMore)
        #expect(try await storage.headRevision(account: "a", suite: "s") == 3)
        #expect(try await storage.headRevision(account: "b", suite: "s") == 0)
        #expect(try await storage.changes(account: "b", suite: "s", since: 0, limit: 10).entries.isEmpty)
        #expect(try await storage.suites(account: "a").suites == [.init(name: "s", headRev: 3, keys: 2)])
        #expect(try await storage.suites(account: "b").suites.isEmpty)
        try await storage.shutdown()
    }

    @Test("waitForChange: woken by a push, ends at its timeout", arguments: StorageBackend.allCases)
    func waitForChange(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.make()
        defer { cleanup() }
        let started = ContinuousClock.now
        await storage.waitForChange(account: "a", suite: "s", after: 0, timeout: .milliseconds(200))
        #expect(ContinuousClock.now - started >= .milliseconds(150))
        let waiter = Task { await storage.waitForChange(account: "a", suite: "s", after: 0, timeout: .seconds(120)) }
        let pushed = ContinuousClock.now
        _ = try await storage.push(account: "a", suite: "s", request: PushRequest(deviceID: 1, batchID: "b", ops: [API.set("k", "v")]),
                                   quota: SuiteQuota(maxKeys: 10, maxBytes: 1000), serverTime: "")
        await waiter.value
        #expect(ContinuousClock.now - pushed < .seconds(60), "woken by the push, not by the 120 s timeout")
        try await storage.shutdown()
    }
}
