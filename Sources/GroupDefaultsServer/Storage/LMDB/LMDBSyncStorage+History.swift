import Foundation
import GroupDefaultsLMDB
import GroupDefaultsWire

// Key history (written in the push transaction, trimmed there, purged with tombstones).
extension LMDBSyncStorage {
    package func history(account: String, suite: String, key: String) async throws -> [StoredVersion] {
        let environment = self.environment
        return try await onReadQueue {
            var versions: [StoredVersion] = []
            try environment.readTransaction { txn in
                guard let record = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite)) else { return }
                versions = try Self.versions(txn, suiteID: record.id, key: key)
            }
            return versions
        }
    }

    package func history(account: String, suite: String, after: String?, limit: Int) async throws -> StoredHistoryPage {
        let environment = self.environment
        return try await onReadQueue {
            var page = StoredHistoryPage(keys: [], next: nil)
            try environment.readTransaction { txn in
                guard let record = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite)) else { return }
                // The keys the history keeps are those of the suite's entries (a purged tombstone
                // takes its key's history with it): read in key order, as the snapshot reads them.
                let start = after.map { LMDBKeys.entry(suiteID: record.id, key: $0) } ?? LMDBKeys.bigEndian(record.id)
                let limit = max(limit, 1)
                var count = 0
                var more = false
                try start.withUnsafeBytes { start in
                    try txn.forEach(DB.entries, from: start) { key, value in
                        guard key.count >= 8, LMDBKeys.readBigEndian(key) == record.id else { return false }
                        for entry in try EntryBucket(value).entries {
                            if let after, !LMDBKeys.utf8Less(after, entry.key) { continue }  // continue after it
                            let versions = try Self.versions(txn, suiteID: record.id, key: entry.key)
                            guard !versions.isEmpty else { continue }
                            if !page.keys.isEmpty, count + versions.count > limit {
                                more = true
                                return false
                            }
                            page.keys.append((entry.key, versions))
                            count += versions.count
                        }
                        return true
                    }
                }
                page.next = more ? page.keys.last?.key : nil
            }
            return page
        }
    }

    /// The versions of `key` in the suite `suiteID`, newest first.
    private static func versions(_ txn: LMDBTransaction, suiteID: UInt64, key: String) throws -> [StoredVersion] {
        var versions: [StoredVersion] = []
        let prefix = LMDBKeys.historyPrefix(suiteID: suiteID, key: key)
        try prefix.withUnsafeBytes { start in
            try txn.forEach(DB.history, from: start) { rowKey, value in
                guard rowKey.starts(with: prefix) else { return false }
                let version = try Self.version(value)
                if version.entry.key.isSameName(as: key) { versions.append(version) }  // a SHA-256 collision is not our key
                return true
            }
        }
        return versions.reversed()
    }

    /// A `history` row: when received (ms, big-endian), then the entry record.
    static func version(_ raw: UnsafeRawBufferPointer) throws -> StoredVersion {
        guard raw.count > 8 else { throw SyncStorageError(.unavailable, "a damaged history record") }
        return StoredVersion(
            entry: try StoredEntry(UnsafeRawBufferPointer(rebasing: raw[8...])),
            receivedMilliseconds: LMDBKeys.readBigEndian(raw)
        )
    }

    /// Versions older than `horizon` that are not their key's current entry (in the same write
    /// transaction as the tombstone purge, after it).
    static func purgeHistory(_ txn: LMDBTransaction, olderThan horizon: HLC) throws {
        var doomed: [[UInt8]] = []
        try txn.forEach(DB.history) { rowKey, value in
            let version = try Self.version(value)
            guard version.entry.stamp.hlc < horizon else { return true }
            let suiteID = LMDBKeys.readBigEndian(rowKey)
            let current = try bucket(txn, LMDBKeys.entry(suiteID: suiteID, key: version.entry.key)).entry(for: version.entry.key)
            if current?.rev != version.entry.rev { doomed.append(Array(rowKey)) }
            return true
        }
        for key in doomed { try delete(txn, DB.history, key) }
    }
}
