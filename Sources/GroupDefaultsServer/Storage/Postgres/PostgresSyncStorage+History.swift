import Foundation
import GroupDefaultsWire
import Logging
import PostgresNIO

// Key history (written in the push transaction, trimmed there, purged with tombstones).
extension PostgresSyncStorage {
    package func history(account: String, suite: String, key: String) async throws -> [StoredVersion] {
        try await bounded("reading a key's history") { storage in
            let rows = try await storage.client.query(
                """
                SELECT \(unescaped: EntryRow.columns), (extract(epoch FROM received) * 1000)::bigint FROM history
                WHERE account = \(account) AND suite = \(suite) AND key = \(key) ORDER BY rev DESC
                """,
                logger: storage.logger
            )
            var versions: [StoredVersion] = []
            for try await row in rows.decode((String?, Data?, Int64?, Bool, String, String, Int64, String?, Int64).self) {
                versions.append(
                    StoredVersion(
                        entry: try EntryRow.stored(key: key, (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7)),
                        receivedMilliseconds: UInt64(max(0, row.8))
                    )
                )
            }
            return versions
        }
    }

    package func history(account: String, suite: String, after: String?, limit: Int) async throws -> StoredHistoryPage {
        let limit = max(1, limit)
        let rows: [(key: String, version: StoredVersion)] = try await bounded("reading a suite's history") { storage in
            // In the primary key's order (key, then revision), one row past the page: it tells
            // whether the last key is whole and whether a key follows.
            let rows = try await storage.client.query(
                """
                SELECT key, \(unescaped: EntryRow.columns), (extract(epoch FROM received) * 1000)::bigint FROM history
                WHERE account = \(account) AND suite = \(suite) AND (\(after)::text IS NULL OR key > \(after))
                ORDER BY key, rev LIMIT \(Int64(limit) + 1)
                """,
                logger: storage.logger
            )
            var read: [(key: String, version: StoredVersion)] = []
            for try await row in rows.decode((String, String?, Data?, Int64?, Bool, String, String, Int64, String?, Int64).self) {
                let entry = try EntryRow.stored(key: row.0, (row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8))
                read.append((row.0, StoredVersion(entry: entry, receivedMilliseconds: UInt64(max(0, row.9)))))
            }
            return read
        }
        var keys: [(key: String, versions: [StoredVersion])] = []
        for (key, version) in rows {
            if let last = keys.last, last.key.isSameName(as: key) {
                keys[keys.count - 1].versions.append(version)
            } else {
                keys.append((key, [version]))
            }
        }
        guard rows.count > limit else {
            return StoredHistoryPage(keys: keys.map { ($0.key, $0.versions.reversed()) }, next: nil)
        }
        // The last key may go on past the rows read: it starts the next page, unless it is the
        // page's only key, which is then read whole.
        let cut = keys.removeLast()
        if keys.isEmpty { keys = [(cut.key, Array(try await history(account: account, suite: suite, key: cut.key).reversed()))] }
        return StoredHistoryPage(keys: keys.map { ($0.key, $0.versions.reversed()) }, next: keys.last?.key)
    }
}
