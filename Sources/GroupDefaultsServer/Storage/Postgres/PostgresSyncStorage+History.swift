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
}
