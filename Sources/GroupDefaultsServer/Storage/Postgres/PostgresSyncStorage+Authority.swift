import Foundation
import GroupDefaultsWire
import PostgresNIO

// The PostgreSQL side of a restore that keeps the present's authority (`StoredTables`,
// `KeptAuthority`). pg_restore brings back a whole dump, authority included, so the recipe keeps
// the present's apart first: `restore --prepare` copies every authority table, and each suite's
// key state, into a schema of its own in the same database (pg_restore's `--clean` drops only the
// dump's objects, so the copy survives it); `restore --announce` finds it, deletes again the
// accounts deleted since the dump, puts the copy back over the dump's authority in one
// transaction, and drops it.
extension PostgresSyncStorage {
    /// The schema that holds the present's authority between `restore --prepare` and `--announce`.
    package static let keptAuthoritySchema = "groupdefaults_kept_authority"

    /// `restore --prepare`: copies the authority tables and each suite's key state into
    /// `keptAuthoritySchema` (replacing an earlier copy), in one transaction. Returns how many
    /// rows it kept.
    package func keepAuthority() async throws -> Int {
        try await bounded("keeping the authority apart", timeout: .seconds(300)) { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let schema = Self.keptAuthoritySchema
                // Static names only: nothing from outside.
                try await connection.query(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(schema) CASCADE"), logger: storage.logger)
                try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), logger: storage.logger)
                var kept = 0
                for table in StoredTables.postgres(.authority) {
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "CREATE TABLE \(schema).\(table) AS TABLE \(table)"),
                        logger: storage.logger
                    )
                    let rows = try await connection.query(
                        PostgresQuery(unsafeSQL: "SELECT count(*) FROM \(schema).\(table)"),
                        logger: storage.logger
                    )
                    for try await count in rows.decode(Int64.self) { kept += Int(count) }
                }
                try await connection.query(
                    PostgresQuery(unsafeSQL: "CREATE TABLE \(schema).suite_keys AS SELECT account, suite, epoch FROM suites"),
                    logger: storage.logger
                )
                return kept
            }
        }
    }

    /// `restore --announce`'s part: puts back the authority `keepAuthority()` kept, if there is
    /// such a copy, over what the dump brought (each account deleted after the dump deleted again
    /// first), and drops the copy. Returns how many accounts it deleted again, or nil when nothing
    /// was kept.
    package func putBackKeptAuthority() async throws -> Int? {
        let schema = Self.keptAuthoritySchema
        let keptAudit: [AuditRecord]? = try await bounded("reading the kept authority") { storage in
            let found = try await storage.client.query("SELECT 1 FROM pg_namespace WHERE nspname = \(schema)", logger: storage.logger)
            var exists = false
            for try await _ in found { exists = true }
            guard exists else { return nil }
            let rows = try await storage.client.query(
                PostgresQuery(unsafeSQL: "SELECT record::text FROM \(schema).audit ORDER BY time, id"),
                logger: storage.logger
            )
            var records: [AuditRecord] = []
            for try await text in rows.decode(String.self) {
                records.append(try AuditRecord.decoder.decode(AuditRecord.self, from: Data(text.utf8)))
            }
            return records
        }
        guard let keptAudit else { return nil }
        // Deleted again before the authority goes back: a delete removes the account's authority
        // rows too, and the kept ones (which have none of the deleted account's) replace them.
        let deletedAgain = try await KeptAuthority.deleteAgain(in: self, presentAudit: keptAudit)
        try await bounded("putting the kept authority back", timeout: .seconds(300)) { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                for table in StoredTables.postgres(.authority) {
                    let columns = try await connection.query(
                        """
                        SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) FROM information_schema.columns
                        WHERE table_schema = \(schema) AND table_name = \(table)
                        """,
                        logger: storage.logger
                    )
                    var list = ""
                    for try await text in columns.decode(String?.self) { list = text ?? "" }
                    guard !list.isEmpty else {
                        throw SyncStorageError(.unavailable, "the kept authority has no table \(table): run `restore --prepare` again")
                    }
                    // Static names, and column names quoted by PostgreSQL: nothing from outside.
                    try await connection.query(PostgresQuery(unsafeSQL: "DELETE FROM \(table)"), logger: storage.logger)
                    try await connection.query(
                        PostgresQuery(unsafeSQL: "INSERT INTO \(table) (\(list)) SELECT \(list) FROM \(schema).\(table)"),
                        logger: storage.logger
                    )
                }
                // Each suite's key state follows the key bags (`SuiteKeyState`, as the embedded
                // store's restore does): a suite whose keys a reset forgot since decides its mode
                // again at its next push.
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            UPDATE suites AS s
                            SET epoch = k.epoch, mode_rev = CASE WHEN k.epoch = 0 AND s.epoch <> 0 THEN s.head_rev ELSE s.mode_rev END
                            FROM \(schema).suite_keys AS k WHERE s.account = k.account AND s.suite = k.suite
                            """
                    ),
                    logger: storage.logger
                )
                try await connection.query("DELETE FROM console_records WHERE kind = 'session'", logger: storage.logger)
                try await connection.query(
                    "SELECT setval(pg_get_serial_sequence('audit', 'id'), COALESCE((SELECT max(id) FROM audit), 0) + 1, false)",
                    logger: storage.logger
                )
                try await connection.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"), logger: storage.logger)
            }
        }
        return deletedAgain
    }
}
