import Foundation
import GroupDefaults
import GroupDefaultsLMDB
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsServer

/// A value the server holds but must not serve (stored by an older version, put back from a dump,
/// a row changed behind its back) is unavailable for that key alone: the real server and real
/// `groupdefaults-sync` devices go on with every other key.
@Suite("Stored values checked before they are served", .timeLimit(.minutes(3)))
struct StoredValueTests {
    /// Typed JSON of `depth` arrays around an integer.
    static func nestedJSON(_ depth: Int) -> String {
        String(repeating: "{\"array\":[", count: depth) + "{\"integer\":1}" + String(repeating: "]}", count: depth)
    }

    @Test(
        "a stored value too deep for its readers: that key is refused and named; an existing device pulls the page and pushes its other writes, a new one configures",
        arguments: StorageBackend.allCases
    )
    func tooDeepStoredValue(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.stored"
            try await withToolPair(suite) { phone, tablet in
                try await phone.configure(server)
                try await tablet.configure(server)
                #expect(try await phone.sync("sync").status == 0)
                // The phone's changes, not pushed yet; the tablet writes `deep` after it.
                #expect(try await phone.defaultsTool(["write", suite, "deep", "-int", "2"]).status == 0)
                #expect(try await phone.defaultsTool(["write", suite, "volume", "-int", "7"]).status == 0)
                for (key, value) in [("deep", "3"), ("tree", "3"), ("theme", "dark")] {
                    #expect(try await tablet.defaultsTool(["write", suite, key, value]).status == 0)
                }
                #expect(try await tablet.sync("sync").status == 0)
                // 300 levels: past what JSON readers take; 120: readable, past the limit.
                try await server.killAndRestart {
                    try await Self.storeValues(server, suite, ["deep": Self.nestedJSON(300), "tree": Self.nestedJSON(120)])
                }
                #expect(try await server.snapshot(suite).entries["deep"]?.unavailable == .tooDeep)

                // The phone pulls the page (the two keys refused, named), loses its push of `deep`
                // to it and pushes the rest.
                let synced = try await phone.sync("sync")
                #expect(synced.status == 1)
                #expect(synced.stderr.contains("'deep': value unavailable (nested more than 100 levels deep)"), "\(synced.stderr)")
                #expect(synced.stderr.contains("'tree'"), "\(synced.stderr)")
                #expect(synced.stderr.components(separatedBy: "refused from the server: 'deep'").count == 2, "named once: \(synced.stderr)")
                let phoneSuite = try phone.open()
                #expect(phoneSuite.string(forKey: "theme") == "dark")
                #expect(phoneSuite.integer(forKey: "deep") == 2, "the device keeps its own value")
                #expect(try phoneSuite.pendingCount() == 0)
                #expect(try await server.snapshot(suite).entries["volume"]?.value == .integer(7))
                #expect(Set(try phoneSuite.conflicts().filter(\.isRefused).map(\.key)) == ["deep", "tree"])
                let status = try await phone.sync("status")
                #expect(status.stdout.contains("refused: 2 kept in the conflict journal (") && status.stdout.contains("deep"), "\(status.stdout)")

                // A new device configures and joins; it stores neither value.
                let laptop = ToolDevice(suite)
                defer { laptop.remove() }
                try await laptop.configure(server)
                let joined = try await laptop.sync("sync")
                #expect(joined.stderr.contains("'deep': value unavailable"), "\(joined.stdout) \(joined.stderr)")
                let laptopSuite = try laptop.open()
                #expect(laptopSuite.string(forKey: "theme") == "dark" && laptopSuite.integer(forKey: "volume") == 7)
                #expect(laptopSuite.object(forKey: "deep") == nil && laptopSuite.object(forKey: "tree") == nil)
            }
        }
    }

    @Test(
        "a key the server serves as unavailable counts as present when the snapshot is read again: reset keeps the device's own value",
        arguments: StorageBackend.allCases
    )
    func unavailableKeyKeptAtReset(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.stored"
            let phone = ToolDevice(suite)
            defer { phone.remove() }
            try await phone.configure(server)
            for (key, value) in [("layout", "grid"), ("theme", "dark")] {
                #expect(try await phone.defaultsTool(["write", suite, key, value]).status == 0)
            }
            #expect(try await phone.sync("sync").status == 0)
            try await server.killAndRestart { try await Self.storeValues(server, suite, ["layout": Self.nestedJSON(300)]) }
            #expect(try await server.snapshot(suite).entries["layout"]?.unavailable == .tooDeep)

            #expect(try await phone.sync("reset").status == 0)
            let synced = try await phone.sync("sync")
            #expect(synced.stderr.contains("'layout': value unavailable"), "\(synced.stderr)")
            #expect(!synced.stdout.contains("removed"), "\(synced.stdout)")
            let phoneSuite = try phone.open()
            #expect(phoneSuite.string(forKey: "layout") == "grid", "the device keeps its own, as the journal says")
            #expect(phoneSuite.string(forKey: "theme") == "dark")
            #expect(try phoneSuite.conflicts().filter(\.isRefused).map(\.key) == ["layout"])
        }
    }

    /// Replaces, in the stopped server's store, the typed JSON of alice's entries of `suite` named in
    /// `values` (stamps and revisions kept).
    static func storeValues(_ server: SyncServer, _ suite: String, _ values: [String: String]) async throws {
        switch server.backend {
        case .lmdb:
            let storage = try LMDBSyncStorage(directory: server.storage[1])
            try storage.environment.writeTransaction(sync: true) { txn in
                guard let record = try LMDBSyncStorage.suiteRecord(txn, LMDBKeys.suiteName(account: "alice", suite: suite)) else {
                    throw FixtureError("no suite \(suite) in the store")
                }
                for (name, json) in values {
                    let key = LMDBKeys.entry(suiteID: record.id, key: name)
                    var bucket = try LMDBSyncStorage.bucket(txn, key)
                    for index in bucket.entries.indices where bucket.entries[index].key == name {
                        bucket.entries[index].valueJSON = Array(json.utf8)
                    }
                    try LMDBSyncStorage.put(txn, LMDBSyncStorage.DB.entries, key, bucket.bytes)
                }
            }
            try await storage.shutdown()
        case .postgres:
            for (name, json) in values {
                _ = try await PostgresFixture.psql(
                    server.storage[1],
                    "UPDATE entries SET value = '\(json)' WHERE account = 'alice' AND suite = '\(suite)' AND key = '\(name)'"
                )
            }
        }
    }
}
