import Foundation
import Logging
import PostgresNIO
import TestSupport
import Testing

@testable import GroupDefaultsServer

/// Every table of both backends is classified once in `StoredTables` (data, authority or the
/// store's bookkeeping): a new table fails here until it says what a restore does with it.
@Suite("Every stored table is classified for restores", .timeLimit(.minutes(3)))
struct StoredTablesTests {
    @Test("every named database of the embedded store is in the list, once")
    func embeddedDatabases() {
        let listed = StoredTables.all.compactMap(\.lmdb)
        #expect(Set(listed).count == listed.count, "a database listed twice: \(listed)")
        #expect(Set(LMDBSyncStorage.DB.names) == Set(listed), "unclassified: \(Set(LMDBSyncStorage.DB.names).subtracting(listed))")
    }

    @Test("every table of the migrated PostgreSQL schema is in the list, once")
    func postgresTables() async throws {
        let listed = StoredTables.all.compactMap(\.postgres)
        #expect(Set(listed).count == listed.count, "a table listed twice: \(listed)")
        try await StorageBackend.postgres.withStorage { storage in
            let storage = try #require(storage as? PostgresSyncStorage)
            let rows = try await storage.client.query(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()",
                logger: Logger(label: "stored-tables-test")
            )
            var tables: Set<String> = []
            for try await name in rows.decode(String.self) { tables.insert(name) }
            #expect(tables == Set(listed), "unclassified: \(tables.subtracting(listed)); gone: \(Set(listed).subtracting(tables))")
        }
    }
}
