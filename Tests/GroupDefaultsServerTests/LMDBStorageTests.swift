import Foundation
import GroupDefaultsWire
import Logging
import Testing

@testable import GroupDefaultsServer

@Suite("Embedded LMDB storage")
struct LMDBStorageTests {
    @Test("the data directory is 0700 and its files 0600")
    func modes() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        try await fixture.storage.shutdown()
        let directoryMode = try FileManager.default.attributesOfItem(atPath: fixture.directory.path)[.posixPermissions] as? Int
        #expect(directoryMode == 0o700)
        for file in try FileManager.default.contentsOfDirectory(atPath: fixture.directory.path) {
            let mode =
                try FileManager.default.attributesOfItem(atPath: fixture.directory.appendingPathComponent(file).path)[.posixPermissions] as? Int
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
        _ = try await storage.push(
            account: "a",
            suite: "s",
            request: PushRequest(deviceID: 1, batchID: "b", ops: [API.delete("gone", hlc: old), API.set("kept", "v")]),
            quota: SuiteQuota(maxKeys: 10, maxBytes: 1000),
            serverTime: ""
        )
        var configuration = fixture.configuration
        configuration.tombstoneLifetime = .seconds(86_400)
        let purge = Task { try await TombstonePurge(storage: storage, configuration: configuration, logger: Logger(label: "test")).run() }
        var expired = false
        for _ in 0..<500 where !expired {
            do {
                _ = try await storage.changes(account: "a", suite: "s", since: 0, limit: 10).page()
                try await Task.sleep(for: .milliseconds(10))
            } catch let error as SyncStorageError where error.code == .cursorExpired {
                expired = true
            }
        }
        purge.cancel()
        _ = await purge.result
        #expect(expired)
        let snapshot = try await storage.snapshot(account: "a", suite: "s", after: nil, limit: 10).page()
        #expect(snapshot.entries.map(\.key) == ["kept"])
        try await storage.shutdown()
    }
}
