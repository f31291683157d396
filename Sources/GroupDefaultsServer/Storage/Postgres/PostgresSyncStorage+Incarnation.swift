import GroupDefaultsWire
import Logging
import PostgresNIO

// The storage's incarnation: the one row of `storage_incarnation`, made at the first call and
// replaced by `groupdefaults-server restore --announce` (the last step of the pg_restore recipe).
//
// The row also holds the oid its table had when the row was written. pg_restore (and a plain dump
// replayed with psql) creates the table again, under a new oid, and copies the row as it was: a
// row whose oid is not its table's was restored, and gets a new incarnation at once, so that an
// operator who forgot the announcement still tells the devices.
extension PostgresSyncStorage: StorageIncarnation {
    package func incarnation() async throws -> String {
        let made = IncarnationID.random()
        return try await bounded("reading the storage's incarnation") { storage in
            // Made here if missing; a concurrent first call of another instance wins the insert.
            try await storage.client.query(
                """
                INSERT INTO storage_incarnation (one, id, table_oid) VALUES (true, \(made), 'storage_incarnation'::regclass::oid)
                ON CONFLICT (one) DO NOTHING
                """,
                logger: storage.logger
            )
            // A restored row (two instances at once: the second finds the row renewed, and keeps it).
            let renewed = try await storage.client.query(
                """
                UPDATE storage_incarnation SET id = \(made), table_oid = 'storage_incarnation'::regclass::oid
                WHERE table_oid <> 'storage_incarnation'::regclass::oid RETURNING id
                """,
                logger: storage.logger
            )
            for try await _ in renewed {
                storage.logger.notice("the storage was restored from a dump: it has a new incarnation", metadata: ["incarnation": "\(made)"])
            }
            let rows = try await storage.client.query("SELECT id FROM storage_incarnation", logger: storage.logger)
            for try await id in rows.decode(String.self) { return id }
            throw SyncStorageError(.unavailable, "the storage's incarnation row is missing")
        }
    }

    package func renewIncarnation() async throws -> String {
        let made = IncarnationID.random()
        try await bounded("renewing the storage's incarnation") { storage in
            try await storage.client.query(
                """
                INSERT INTO storage_incarnation (one, id, table_oid) VALUES (true, \(made), 'storage_incarnation'::regclass::oid)
                ON CONFLICT (one) DO UPDATE SET id = EXCLUDED.id, table_oid = EXCLUDED.table_oid
                """,
                logger: storage.logger
            )
        }
        return made
    }
}
