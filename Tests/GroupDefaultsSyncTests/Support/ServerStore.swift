import Foundation
import GroupDefaults
import GroupDefaultsLMDB
import GroupDefaultsWire
import TestSupport

@testable import GroupDefaultsServer

/// The stopped server's store, written directly: what a malicious operator, a damaged backup or a
/// compromised database could do behind the server's back. Account `alice` (the tests' token).
enum ServerStore {
    /// Replaces the stored entries of `suite` whose keys `changed` names with those entries (stamp,
    /// sealed payload, deletion flag and revision as given), and removes those of `removed`.
    static func rewrite(_ server: SyncServer, suite: String, changed: [SyncEntry], removed: [String] = []) async throws {
        switch server.backend {
        case .lmdb:
            let storage = try LMDBSyncStorage(directory: server.storage[1])
            try storage.environment.writeTransaction(sync: true) { txn in
                guard let record = try LMDBSyncStorage.suiteRecord(txn, LMDBKeys.suiteName(account: "alice", suite: suite)) else {
                    throw FixtureError("no suite \(suite) in the store")
                }
                for entry in changed {
                    let key = LMDBKeys.entry(suiteID: record.id, key: entry.key)
                    var bucket = try LMDBSyncStorage.bucket(txn, key)
                    bucket.store(
                        StoredEntry(
                            key: entry.key,
                            sealed: entry.sealed!,
                            deleted: entry.isDeleted,
                            stamp: entry.stamp,
                            rev: entry.rev!
                        )
                    )
                    try LMDBSyncStorage.put(txn, LMDBSyncStorage.DB.entries, key, bucket.bytes)
                }
                for name in removed {
                    let key = LMDBKeys.entry(suiteID: record.id, key: name)
                    var bucket = try LMDBSyncStorage.bucket(txn, key)
                    bucket.entries.removeAll { $0.key == name }
                    if bucket.entries.isEmpty {
                        try LMDBSyncStorage.delete(txn, LMDBSyncStorage.DB.entries, key)
                    } else {
                        try LMDBSyncStorage.put(txn, LMDBSyncStorage.DB.entries, key, bucket.bytes)
                    }
                }
            }
            try await storage.shutdown()
        case .postgres:
            let url = server.storage[1]
            for entry in changed {
                _ = try await PostgresFixture.psql(
                    url,
                    """
                    UPDATE entries SET sealed = decode('\(Data(entry.sealed!.box).base64EncodedString())', 'base64'),
                        epoch = \(entry.sealed!.epoch), deleted = \(entry.isDeleted), hlc = \(entry.hlc.rawValue),
                        origin = \(entry.origin), rev = \(entry.rev!)
                    WHERE account = 'alice' AND suite = '\(suite)' AND key = '\(entry.key)'
                    """
                )
            }
            for name in removed {
                _ = try await PostgresFixture.psql(url, "DELETE FROM entries WHERE account = 'alice' AND suite = '\(suite)' AND key = '\(name)'")
            }
        }
    }

    /// Stamps the stored entries of `keys` in `suite` with `hlc`, values unchanged: what a server
    /// whose clock was wrong would have stored (or a backup taken from one).
    static func restamp(_ server: SyncServer, suite: String, keys: [String], hlc: HLC) async throws {
        switch server.backend {
        case .lmdb:
            try await editEntries(server, suite: suite, keys: keys) { entry in entry.stamp.hlc = hlc }
        case .postgres:
            for name in keys {
                _ = try await PostgresFixture.psql(
                    server.storage[1],
                    """
                    UPDATE entries SET hlc = \(Int64(bitPattern: hlc.rawValue)) WHERE account = 'alice' AND suite = '\(suite)' AND key = '\(name)'
                    """
                )
            }
        }
    }

    /// Changes, in the stopped embedded store, the stored entries of `keys` in `suite` with `edit`.
    private static func editEntries(_ server: SyncServer, suite: String, keys: [String], _ edit: @escaping (inout StoredEntry) -> Void) async throws {
        let storage = try LMDBSyncStorage(directory: server.storage[1])
        try storage.environment.writeTransaction(sync: true) { txn in
            guard let record = try LMDBSyncStorage.suiteRecord(txn, LMDBKeys.suiteName(account: "alice", suite: suite)) else {
                throw FixtureError("no suite \(suite) in the store")
            }
            for name in keys {
                let key = LMDBKeys.entry(suiteID: record.id, key: name)
                var bucket = try LMDBSyncStorage.bucket(txn, key)
                for index in bucket.entries.indices where bucket.entries[index].key == name { edit(&bucket.entries[index]) }
                try LMDBSyncStorage.put(txn, LMDBSyncStorage.DB.entries, key, bucket.bytes)
            }
        }
        try await storage.shutdown()
    }

    /// Changes the stored key bag of `epoch` of alice's `suite` with `edit`.
    static func editKeyBag(_ server: SyncServer, suite: String, epoch: UInt32, _ edit: @escaping (inout StoredKeyBag) -> Void) async throws {
        switch server.backend {
        case .lmdb:
            let storage = try LMDBSyncStorage(directory: server.storage[1])
            try storage.environment.writeTransaction(sync: true) { txn in
                let suiteKey = LMDBKeys.suiteName(account: "alice", suite: suite)
                guard var bag = try LMDBSyncStorage.keyBags(txn, suiteKey)[epoch] else { throw FixtureError("no key bag of epoch \(epoch)") }
                edit(&bag)
                try LMDBSyncStorage.put(txn, LMDBSyncStorage.DB.keyBags, KeyBagKey.key(suiteKey, epoch), Array(bag.storedText.utf8))
            }
            try await storage.shutdown()
        case .postgres:
            let url = server.storage[1]
            let text = try await PostgresFixture.psql(
                url,
                "SELECT bundle FROM key_bags WHERE account = 'alice' AND suite = '\(suite)' AND epoch = \(epoch)"
            )
            var bag = StoredKeyBag(storedText: text)
            edit(&bag)
            let escaped = bag.storedText.replacingOccurrences(of: "'", with: "''")
            _ = try await PostgresFixture.psql(
                url,
                "UPDATE key_bags SET bundle = '\(escaped)' WHERE account = 'alice' AND suite = '\(suite)' AND epoch = \(epoch)"
            )
        }
    }

    /// Every byte the server stores: the embedded store's files, or a dump of the PostgreSQL
    /// database (`pg_dump`), as text (bytes that are not UTF-8 replaced).
    static func dump(_ server: SyncServer) async throws -> String {
        switch server.backend {
        case .lmdb:
            let directory = URL(fileURLWithPath: server.storage[1])
            var bytes = Data()
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                bytes += try Data(contentsOf: directory.appendingPathComponent(name))
            }
            return String(decoding: bytes, as: UTF8.self)
        case .postgres:
            return try await Command.run("/usr/lib/postgresql/15/bin/pg_dump", ["--data-only", server.storage[1]])
        }
    }
}
