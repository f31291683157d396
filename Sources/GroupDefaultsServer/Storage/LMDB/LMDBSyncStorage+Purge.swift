import Foundation
import GroupDefaultsLMDB
package import GroupDefaultsWire

// Tombstone (and batch record, and history) purge.
extension LMDBSyncStorage {
    package func purgeTombstones(olderThan horizon: HLC) async throws -> Int {
        let environment = self.environment
        return try await onWriteQueue {
            var removed = 0
            try environment.writeTransaction(sync: true) { txn in
                removed = 0
                var suites: [([UInt8], SuiteRecord)] = []
                try txn.forEach(DB.suites) { key, value in
                    if let record = SuiteRecord(value) { suites.append((Array(key), record)) }
                    return true
                }
                for (suiteKey, var record) in suites {
                    var changed: [([UInt8], EntryBucket)] = []
                    var doomed: [StoredEntry] = []
                    let start = LMDBKeys.bigEndian(record.id)
                    try start.withUnsafeBytes { start in
                        try txn.forEach(DB.entries, from: start) { key, value in
                            guard key.count >= 8, LMDBKeys.readBigEndian(key) == record.id else { return false }
                            var bucket = try EntryBucket(value)
                            let expired = bucket.entries.filter { $0.isDeleted && $0.stamp.hlc < horizon }
                            guard !expired.isEmpty else { return true }
                            bucket.entries.removeAll { $0.isDeleted && $0.stamp.hlc < horizon }
                            doomed += expired
                            changed.append((Array(key), bucket))
                            return true
                        }
                    }
                    guard !doomed.isEmpty else { continue }
                    for (key, bucket) in changed {
                        if bucket.entries.isEmpty {
                            try Self.delete(txn, DB.entries, key)
                        } else {
                            try Self.put(txn, DB.entries, key, bucket.bytes)
                        }
                    }
                    for entry in doomed {
                        try Self.delete(txn, DB.revisions, LMDBKeys.revision(suiteID: record.id, rev: entry.rev))
                        record.oldestValid = max(record.oldestValid, entry.rev)
                    }
                    removed += doomed.count
                    try Self.put(txn, DB.suites, suiteKey, record.bytes)
                }
                // Batch records as old as the horizon: a retry that late re-applies its ops, which LWW
                // then finds already stored (superseded), so nothing changes.
                var expiredBatches: [[UInt8]] = []
                try txn.forEach(DB.batches) { key, value in
                    if value.count > 40, LMDBKeys.readBigEndian(value, at: 32) < horizon.milliseconds { expiredBatches.append(Array(key)) }
                    return true
                }
                for key in expiredBatches { try Self.delete(txn, DB.batches, key) }
                try Self.purgeHistory(txn, olderThan: horizon)
            }
            return removed
        }
    }
}
