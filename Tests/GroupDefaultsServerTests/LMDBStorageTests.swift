import Foundation
import GroupDefaults
@testable import GroupDefaultsServer
import Logging
import Testing

@Suite("Embedded LMDB storage")
struct LMDBStorageTests {
    @Test("concurrent pushes share commits yet stay all or nothing: exactly the quota's worth succeed, revisions 1…n")
    func groupCommitKeepsEachPushAtomic() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let storage = fixture.storage
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

    @Test("snapshot pages follow exact UTF-8 key order, long keys sharing their first 503 bytes included")
    func longKeyOrder() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let storage = fixture.storage
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

    @Test("batch records are kept until the purge horizon passes them, then dropped")
    func batchRetention() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let storage = fixture.storage
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

    @Test("the data directory is 0700 and its files 0600")
    func modes() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        try await fixture.storage.shutdown()
        let directoryMode = try FileManager.default.attributesOfItem(atPath: fixture.directory.path)[.posixPermissions] as? Int
        #expect(directoryMode == 0o700)
        for file in try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path) {
            let mode = try FileManager.default.attributesOfItem(atPath: fixture.directory.appendingPathComponent(file).path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file)")
        }
    }

    @Test("tokens: stored by hash only, found by hash, listed, revoked; revoking an unknown id is not_found")
    func tokens() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let made = Tokens.make(account: "a", suitePatterns: ["*"], readOnly: true, expires: nil)
        try await fixture.storage.createToken(made.stored)
        #expect(try await fixture.storage.token(hash: Tokens.hash(made.token)) == made.stored)
        #expect(try await fixture.storage.token(hash: Tokens.hash(made.token + "x")) == nil)
        try await fixture.storage.revokeToken(id: made.stored.id, at: Date())
        #expect(try await fixture.storage.tokens().first?.revoked != nil)
        await #expect(throws: SyncStorageError.self) { try await fixture.storage.revokeToken(id: "tok_nope", at: Date()) }
        try await fixture.storage.shutdown()
        let bytes = try Data(contentsOf: fixture.directory.appendingPathComponent("sync.lmdb"))
        #expect(bytes.range(of: Data(made.token.utf8)) == nil)
    }
}

@Suite("Tombstone purge service")
struct TombstonePurgeTests {
    @Test("the server's purge removes tombstones past their lifetime; older cursors then get cursor_expired")
    func purges() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let storage = fixture.storage
        let old = API.hlc(offsetMilliseconds: -2 * 86_400_000)
        _ = try await storage.push(account: "a", suite: "s", request: PushRequest(deviceID: 1, batchID: "b", ops: [API.delete("gone", hlc: old), API.set("kept", "v")]),
                                   quota: SuiteQuota(maxKeys: 10, maxBytes: 1000), serverTime: "")
        var configuration = fixture.configuration
        configuration.tombstoneLifetime = .seconds(86_400)
        let purge = Task { try await TombstonePurge(storage: storage, configuration: configuration, logger: Logger(label: "test")).run() }
        var expired = false
        for _ in 0 ..< 500 where !expired {
            do {
                _ = try await storage.changes(account: "a", suite: "s", since: 0, limit: 10)
                try await Task.sleep(for: .milliseconds(10))
            } catch let error as SyncStorageError where error.code == .cursorExpired {
                expired = true
            }
        }
        purge.cancel()
        _ = await purge.result
        #expect(expired)
        let snapshot = try await storage.snapshot(account: "a", suite: "s", after: nil, limit: 10)
        #expect(snapshot.entries.map(\.key) == ["kept"])
        try await storage.shutdown()
    }
}
