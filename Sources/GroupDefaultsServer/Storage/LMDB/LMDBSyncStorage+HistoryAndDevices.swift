import Foundation
import GroupDefaultsLMDB
import GroupDefaultsWire

// Key history (written by the push, trimmed there, purged with tombstones) and devices.
extension LMDBSyncStorage {
    package func history(account: String, suite: String, key: String) async throws -> [StoredVersion] {
        let environment = self.environment
        return try await onReadQueue {
            var versions: [StoredVersion] = []
            try environment.readTransaction { txn in
                guard let record = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: account, suite: suite)) else { return }
                let prefix = LMDBKeys.historyPrefix(suiteID: record.id, key: key)
                try prefix.withUnsafeBytes { start in
                    try txn.forEach(DB.history, from: start) { rowKey, value in
                        guard rowKey.starts(with: prefix) else { return false }
                        let version = try Self.version(value)
                        if version.entry.key == key { versions.append(version) }  // a SHA-256 collision is not our key
                        return true
                    }
                }
            }
            return versions.reversed()
        }
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

    package func recordDevice(_ sighting: StoredDevice) async throws {
        let environment = self.environment
        try await onWriteQueue {
            // Not flushed by itself: a device record is bookkeeping, made durable by the next
            // flushed commit (a push), and a crash loses at most a last-seen time.
            try environment.writeTransaction(sync: false) { txn in
                let key = LMDBKeys.device(sighting.identity)
                var device = sighting
                if let stored = try Self.get(txn, DB.devices, key) {
                    device = try JSONDecoder().decode(StoredDevice.self, from: Data(stored)).merged(with: sighting)
                }
                try Self.put(txn, DB.devices, key, Array(try JSONEncoder().encode(device)))
            }
        }
    }

    package func devices(account: String?) async throws -> [StoredDevice] {
        let environment = self.environment
        return try await onReadQueue {
            var devices: [StoredDevice] = []
            try environment.readTransaction { txn in
                try txn.forEach(DB.devices) { _, value in
                    let device = try JSONDecoder().decode(StoredDevice.self, from: Data(value))
                    if account == nil || device.account == account { devices.append(device) }
                    return true
                }
            }
            return devices.sorted { ($0.lastSeen, $0.id) > ($1.lastSeen, $1.id) }
        }
    }
}
