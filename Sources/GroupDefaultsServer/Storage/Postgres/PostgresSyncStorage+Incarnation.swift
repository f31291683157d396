import GroupDefaultsWire
import Logging
import PostgresNIO

// The storage's incarnation: the one row of `storage_incarnation`, made at the first call and
// replaced by `groupdefaults-server restore --announce` (the last step of the pg_restore recipe).
extension PostgresSyncStorage: StorageIncarnation {
    package func incarnation() async throws -> String {
        let made = IncarnationID.random()
        return try await bounded("reading the storage's incarnation") { storage in
            // Made here if missing; a concurrent first call of another instance wins the insert.
            try await storage.client.query(
                "INSERT INTO storage_incarnation (one, id) VALUES (true, \(made)) ON CONFLICT (one) DO NOTHING",
                logger: storage.logger
            )
            let rows = try await storage.client.query("SELECT id FROM storage_incarnation", logger: storage.logger)
            for try await id in rows.decode(String.self) { return id }
            throw SyncStorageError(.unavailable, "the storage's incarnation row is missing")
        }
    }

    package func renewIncarnation() async throws -> String {
        let made = IncarnationID.random()
        try await bounded("renewing the storage's incarnation") { storage in
            try await storage.client.query(
                "INSERT INTO storage_incarnation (one, id) VALUES (true, \(made)) ON CONFLICT (one) DO UPDATE SET id = EXCLUDED.id",
                logger: storage.logger
            )
        }
        return made
    }
}
