package import Foundation
import GroupDefaultsWire
import PostgresNIO

// The PostgreSQL side of a restore that keeps the present's authority (`StoredTables`,
// `KeptAuthority`). pg_restore brings back a whole dump, authority included, so the recipe keeps
// the present's apart first: `groupdefaults-server restore --prepare` copies every authority table, and each suite's
// key state, into a schema of its own in the same database (pg_restore's `--clean` drops only the
// dump's objects, so the copy survives it); `restore --announce` finds it, deletes again the
// accounts deleted since the dump, puts the copy back over the dump's authority in one
// transaction, and drops it.
//
// The copy carries a random id, which `--prepare` prints and `--announce` must be given: a copy
// that came back with a dump (one taken while a copy was waiting) is refused, not put back. A
// second `--prepare` refuses while a copy waits (`--discard-kept` drops it), and a server does not
// start while one waits (`refuseWhileAuthorityKeptApart`): the authority it would serve is the
// dump's, and the records it would write the announcement would replace.
extension PostgresSyncStorage {
    /// The schema that holds the present's authority between `groupdefaults-server restore --prepare` and `--announce`.
    package static let keptAuthoritySchema = "groupdefaults_kept_authority"

    /// When the copy that waits for `--announce` was made, if one waits.
    package func keptAuthorityMade() async throws -> Date? {
        try await bounded("looking for a kept authority") { storage in
            let exists = try await storage.client.query(
                "SELECT 1 FROM pg_namespace WHERE nspname = \(Self.keptAuthoritySchema)",
                logger: storage.logger
            )
            var found = false
            for try await _ in exists { found = true }
            guard found else { return nil }
            let rows = try await storage.client.query(
                PostgresQuery(unsafeSQL: "SELECT made FROM \(Self.keptAuthoritySchema).kept_marker"),
                logger: storage.logger
            )
            for try await made in rows.decode(Date.self) { return made }
            return Date(timeIntervalSince1970: 0)  // a copy without its marker: still one that waits
        }
    }

    /// Refuses, for `serve`, while a copy made by `groupdefaults-server restore --prepare` waits for `--announce`.
    package func refuseWhileAuthorityKeptApart() async throws {
        guard let made = try await keptAuthorityMade() else { return }
        throw SyncStorageError(
            .unavailable,
            "a restore is under way: `groupdefaults-server restore --prepare` kept the authority apart at \(made); finish it with `groupdefaults-server restore --announce --kept ID` (the id --prepare printed), or drop the copy with `groupdefaults-server restore --discard-kept`"
        )
    }

    /// `groupdefaults-server restore --discard-kept`: drops a waiting copy (the dump's authority stays). Returns whether
    /// there was one.
    package func discardKeptAuthority() async throws -> Bool {
        guard try await keptAuthorityMade() != nil else { return false }
        try await bounded("dropping the kept authority") { storage in
            try await storage.client.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(Self.keptAuthoritySchema) CASCADE"), logger: storage.logger)
        }
        return true
    }

    /// `groupdefaults-server restore --prepare`: copies the authority tables and each suite's key state into
    /// `keptAuthoritySchema`, with a new random id, in one transaction; refused while an earlier
    /// copy waits. Returns the id (for `--announce --kept`) and how many rows it kept.
    package func keepAuthority() async throws -> (id: String, rows: Int) {
        if let made = try await keptAuthorityMade() {
            throw BackupFailure(
                "`groupdefaults-server restore --prepare` already kept the authority apart at \(made): finish that restore with `groupdefaults-server restore --announce --kept ID`, or drop its copy with `groupdefaults-server restore --discard-kept`; nothing was changed"
            )
        }
        let id = IncarnationID.random()
        return try await bounded("keeping the authority apart", timeout: .seconds(300)) { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let schema = Self.keptAuthoritySchema
                // Static names only: nothing from outside.
                try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"), logger: storage.logger)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "CREATE TABLE \(schema).kept_marker (id text NOT NULL, made timestamptz NOT NULL DEFAULT now())"),
                    logger: storage.logger
                )
                var binds = PostgresBindings(capacity: 1)
                binds.append(id)
                try await connection.query(
                    PostgresQuery(unsafeSQL: "INSERT INTO \(schema).kept_marker (id) VALUES ($1)", binds: binds),
                    logger: storage.logger
                )
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
                return (id, kept)
            }
        }
    }

    /// `restore --announce`'s part: puts back the authority `keepAuthority()` kept under `id`,
    /// if there is such a copy, over what the dump brought (each account deleted since the dump
    /// deleted again first), and drops the copy. Returns how many accounts it deleted again, or nil
    /// when nothing was kept. A copy that waits is refused without its id, or with another one (it
    /// came with the dump); an id without a copy too.
    package func putBackKeptAuthority(id: String?) async throws -> Int? {
        let schema = Self.keptAuthoritySchema
        guard let made = try await keptAuthorityMade() else {
            if id != nil {
                throw BackupFailure(
                    "no authority was kept apart (`groupdefaults-server restore --prepare` before pg_restore): nothing to put back for --kept; nothing was changed"
                )
            }
            return nil
        }
        let keptID: String? = try await bounded("reading the kept authority") { storage in
            let rows = try await storage.client.query(PostgresQuery(unsafeSQL: "SELECT id FROM \(schema).kept_marker"), logger: storage.logger)
            for try await kept in rows.decode(String.self) { return kept }
            return nil
        }
        guard let id else {
            throw BackupFailure(
                "`groupdefaults-server restore --prepare` kept the authority apart at \(made): give the id it printed, `groupdefaults-server restore --announce --kept ID`, or drop the copy with `groupdefaults-server restore --discard-kept` to keep the dump's; nothing was changed"
            )
        }
        guard let keptID, keptID.isSameName(as: id) else {
            throw BackupFailure(
                "the authority kept apart is not the copy --prepare made under \(id) (a dump taken while a copy waited brings its own): drop it with `groupdefaults-server restore --discard-kept`, then `groupdefaults-server restore --prepare` again before pg_restore; nothing was changed"
            )
        }
        let keptAudit: [AuditRecord] = try await bounded("reading the kept authority") { storage in
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
        // Deleted again before the authority goes back: a delete removes the account's authority
        // rows too, and the kept ones (which have none of the deleted account's) replace them.
        let deletedAgain = try await KeptAuthority.deleteAgain(
            in: self,
            presentAudit: keptAudit,
            backupIncarnations: try await incarnations(in: nil),
            presentIncarnations: try await incarnations(in: schema)
        )
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
                        throw SyncStorageError(
                            .unavailable,
                            "the kept authority has no table \(table): run `groupdefaults-server restore --prepare` again"
                        )
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
                // An encrypted suite made since the dump: an empty row at its epoch.
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO suites (account, suite, epoch)
                            SELECT k.account, k.suite, k.epoch FROM \(schema).suite_keys AS k
                            WHERE k.epoch <> 0 AND NOT EXISTS (SELECT 1 FROM suites AS s WHERE s.account = k.account AND s.suite = k.suite)
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

    /// Every account's incarnation in `account_incarnations`, or in that table of `schema`.
    private func incarnations(in schema: String?) async throws -> [(account: String, id: String)] {
        try await bounded("reading the accounts' incarnations") { storage in
            let table = schema.map { "\($0).account_incarnations" } ?? "account_incarnations"
            // Static names only: nothing from outside.
            let rows = try await storage.client.query(PostgresQuery(unsafeSQL: "SELECT account, id FROM \(table)"), logger: storage.logger)
            var incarnations: [(account: String, id: String)] = []
            for try await (account, id) in rows.decode((String, String).self) { incarnations.append((account, id)) }
            return incarnations
        }
    }
}
