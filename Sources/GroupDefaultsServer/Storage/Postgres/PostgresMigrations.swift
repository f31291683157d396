import Logging
import PostgresNIO
import ServiceLifecycle

/// The schema, as numbered migrations. Each is applied in its own transaction together with its row
/// in `schema_migrations`, under an advisory lock that the migrating connection's session holds,
/// so that several server instances starting at once apply each migration exactly once; one that
/// builds an index on a large table runs `concurrently` instead: outside a transaction (`CREATE
/// INDEX CONCURRENTLY` cannot run in one), its statements each safe to run again after a crash,
/// its row written last. Append; never edit a released one.
///
/// HLCs and origins are unsigned 64-bit numbers: stored as `numeric(20, 0)`, whose order is the
/// unsigned order over the full range. Keys use the "C" collation: UTF-8 byte order.
package enum PostgresMigrations {
    struct Migration {
        var version: Int
        var name: String
        /// One statement each (the extended query protocol runs one statement per query).
        var statements: [String]
        /// Run outside a transaction, so that running servers go on reading and writing the table
        /// while its index is built (each statement must be safe to run again).
        var concurrently = false
    }

    static let all: [Migration] = [
        Migration(
            version: 1,
            name: "suites, entries, batches, tokens",
            statements: [
                """
                CREATE TABLE suites (
                    account text NOT NULL,
                    suite text COLLATE "C" NOT NULL,
                    head_rev bigint NOT NULL DEFAULT 0,
                    oldest_valid_rev bigint NOT NULL DEFAULT 0,
                    key_count bigint NOT NULL DEFAULT 0,
                    byte_count bigint NOT NULL DEFAULT 0,
                    PRIMARY KEY (account, suite)
                )
                """,
                """
                CREATE TABLE entries (
                    account text NOT NULL,
                    suite text NOT NULL,
                    key text COLLATE "C" NOT NULL,
                    value json,
                    hlc numeric(20, 0) NOT NULL,
                    origin numeric(20, 0) NOT NULL,
                    rev bigint NOT NULL,
                    PRIMARY KEY (account, suite, key)
                )
                """,
                "CREATE INDEX entries_by_rev ON entries (account, suite, rev)",
                "CREATE INDEX tombstones_by_hlc ON entries (hlc) WHERE value IS NULL",
                """
                CREATE TABLE batches (
                    account text NOT NULL,
                    suite text NOT NULL,
                    device numeric(20, 0) NOT NULL,
                    batch_id text NOT NULL,
                    ops_digest text NOT NULL,
                    response json NOT NULL,
                    created timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (account, suite, device, batch_id)
                )
                """,
                """
                CREATE TABLE tokens (
                    id text PRIMARY KEY,
                    account text NOT NULL,
                    patterns text[] NOT NULL,
                    read_only boolean NOT NULL,
                    created timestamptz NOT NULL,
                    expires timestamptz,
                    revoked timestamptz,
                    hash text NOT NULL UNIQUE
                )
                """,
            ]
        ),
        Migration(
            version: 2,
            name: "key history, devices, tokens bound to a device",
            statements: [
                """
                CREATE TABLE history (
                    account text NOT NULL,
                    suite text NOT NULL,
                    key text COLLATE "C" NOT NULL,
                    rev bigint NOT NULL,
                    value json,
                    hlc numeric(20, 0) NOT NULL,
                    origin numeric(20, 0) NOT NULL,
                    received timestamptz NOT NULL DEFAULT now(),
                    PRIMARY KEY (account, suite, key, rev)
                )
                """,
                "CREATE INDEX history_by_hlc ON history (hlc)",
                "ALTER TABLE tokens ADD COLUMN device text",
                """
                CREATE TABLE devices (
                    account text NOT NULL,
                    token_id text NOT NULL,
                    device_id numeric(20, 0) NOT NULL,
                    id text NOT NULL,
                    name text,
                    first_seen timestamptz NOT NULL,
                    last_seen timestamptz NOT NULL,
                    last_push timestamptz,
                    suites text[] NOT NULL,
                    PRIMARY KEY (account, token_id, device_id)
                )
                """,
                "CREATE INDEX devices_by_id ON devices (id)",
            ]
        ),
        // A sealed entry has no value, so a deletion is a flag of its own from now on (a tombstone:
        // `value IS NULL AND deleted`, which the partial index `tombstones_by_hlc` still serves).
        // One statement (a DO block): one round trip, however many servers migrate at once.
        Migration(
            version: 3,
            name: "end-to-end encrypted suites: sealed entries, key epochs, pairings, key bags",
            statements: [
                """
                DO $$ BEGIN
                    ALTER TABLE entries ADD COLUMN sealed bytea, ADD COLUMN epoch bigint,
                        ADD COLUMN deleted boolean NOT NULL DEFAULT false;
                    UPDATE entries SET deleted = true WHERE value IS NULL;
                    ALTER TABLE history ADD COLUMN sealed bytea, ADD COLUMN epoch bigint,
                        ADD COLUMN deleted boolean NOT NULL DEFAULT false;
                    UPDATE history SET deleted = true WHERE value IS NULL;
                    ALTER TABLE suites ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
                    CREATE TABLE pairings (lookup text PRIMARY KEY, expires timestamptz NOT NULL, record json NOT NULL);
                    CREATE TABLE key_bags (
                        account text NOT NULL, suite text NOT NULL, epoch bigint NOT NULL, bundle text NOT NULL,
                        PRIMARY KEY (account, suite, epoch)
                    );
                END $$
                """
            ]
        ),
        // Every write of the tokens table, by any instance, the token commands or an operator's own
        // SQL, announces itself on the change channel (payload `tokens`): an instance's cache of
        // token verifications (`TokenCache`) holds only until then.
        Migration(
            version: 4,
            name: "token writes announced, for the instances' token caches",
            statements: [
                """
                DO $$ BEGIN
                    CREATE FUNCTION groupdefaults_tokens_written() RETURNS trigger LANGUAGE plpgsql AS $f$
                        BEGIN PERFORM pg_notify('groupdefaults', 'tokens'); RETURN NULL; END
                    $f$;
                    CREATE TRIGGER tokens_written AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tokens
                        FOR EACH STATEMENT EXECUTE FUNCTION groupdefaults_tokens_written();
                END $$
                """
            ]
        ),
        // The console's operators and sign-in sessions (`ConsoleRecords`), opaque to the schema.
        Migration(
            version: 5,
            name: "console records: operators and sessions",
            statements: [
                "CREATE TABLE console_records (kind text NOT NULL, name text NOT NULL, value bytea NOT NULL, PRIMARY KEY (kind, name))"
            ]
        ),
        // An operator's reset of a suite (`SuiteReset`): the revision it took, before which a
        // cursor is answered `suite_reset`; and that of the last reset that forgot its keys,
        // after which its mode is decided again.
        Migration(
            version: 6,
            name: "suite resets",
            statements: [
                "ALTER TABLE suites ADD COLUMN reset_rev bigint NOT NULL DEFAULT 0, ADD COLUMN mode_rev bigint NOT NULL DEFAULT 0"
            ]
        ),
        // The storage's incarnation (`StorageIncarnation`): one row, replaced by `restore --announce`,
        // and the table's own oid when it was written, which a dump restored into a new table lacks.
        Migration(
            version: 7,
            name: "storage incarnation",
            statements: [
                "CREATE TABLE storage_incarnation (one boolean PRIMARY KEY DEFAULT true CHECK (one), id text NOT NULL, table_oid oid NOT NULL)"
            ]
        ),
        // The audit log (`AuditRecord`): administrative acts, purged by age.
        Migration(
            version: 8,
            name: "audit log",
            statements: [
                "CREATE TABLE audit (id bigserial PRIMARY KEY, time timestamptz NOT NULL, account text, record json NOT NULL)",
                "CREATE INDEX audit_by_time ON audit (time)",
            ]
        ),
        // `entries_by_rev` replaced by a partial index (`rev > 0`: every entry, as revisions start
        // at 1) that only a statement planned with a known lower bound on `rev` can use. A push's
        // read looks entries up by key (the primary key), and for a suite its statistics did not
        // know yet the planner costed `entries_by_rev` (account, suite) with a filter on the key
        // the same, and took it: each key's lookup read the whole suite (`PostgresPlanTests`).
        // `changes`, planned with its cursor at each run, reads a page in revision order through
        // it. Built concurrently: servers of the previous version go on meanwhile.
        Migration(
            version: 9,
            name: "entries by live revision",
            statements: [
                "DROP INDEX CONCURRENTLY IF EXISTS entries_by_live_rev",  // a build a crash left invalid
                "CREATE INDEX CONCURRENTLY entries_by_live_rev ON entries (account, suite, rev) WHERE rev > 0",
                "DROP INDEX CONCURRENTLY IF EXISTS entries_by_rev",
            ],
            concurrently: true
        ),
        // Shared suites: members (one row each) and invitations (their record as JSON, filed
        // under the SHA-256 of their id).
        Migration(
            version: 10,
            name: "shared suites",
            statements: [
                """
                CREATE TABLE members (
                    owner text NOT NULL,
                    suite text COLLATE "C" NOT NULL,
                    account text COLLATE "C" NOT NULL,
                    record json NOT NULL,
                    PRIMARY KEY (owner, suite, account)
                )
                """,
                "CREATE INDEX members_by_account ON members (account)",
                """
                CREATE TABLE invitations (
                    lookup text PRIMARY KEY,
                    owner text NOT NULL,
                    suite text NOT NULL,
                    ended timestamptz NOT NULL,
                    record json NOT NULL
                )
                """,
                "CREATE INDEX invitations_by_suite ON invitations (owner, suite)",
            ]
        ),
        // The member account that pushed an entry of a shared suite (null for the owner's own
        // writes): nullable without a default, so adding it rewrites nothing.
        Migration(
            version: 11,
            name: "who pushed an entry",
            statements: [
                "ALTER TABLE entries ADD COLUMN pushed_by text",
                "ALTER TABLE history ADD COLUMN pushed_by text",
            ]
        ),
        // A key rotation due in an end-to-end encrypted shared suite after a removal of a member
        // that held its keys (`KeyRotationDue`): one row per suite, until a key bag ends it.
        Migration(
            version: 12,
            name: "key rotations due",
            statements: [
                """
                CREATE TABLE rotations_due (
                    owner text NOT NULL,
                    suite text COLLATE "C" NOT NULL,
                    record json NOT NULL,
                    PRIMARY KEY (owner, suite)
                )
                """
            ]
        ),
        // Each account's incarnation (`AccountStore`): made with its first token, deleted with the
        // account, so that a name used again is a new account to the devices of the old one.
        Migration(
            version: 13,
            name: "account incarnations",
            statements: [
                "CREATE TABLE account_incarnations (account text COLLATE \"C\" PRIMARY KEY, id text NOT NULL)"
            ]
        ),
        // The keys a suite's owner or an admin pinned for the members (`PinRule`): one row per key
        // (a key id in an end-to-end encrypted suite, with its name sealed), compared as bytes.
        Migration(
            version: 14,
            name: "pinned keys",
            statements: [
                """
                CREATE TABLE pinned_keys (
                    owner text COLLATE "C" NOT NULL,
                    suite text COLLATE "C" NOT NULL,
                    key text COLLATE "C" NOT NULL,
                    name json,
                    PRIMARY KEY (owner, suite, key)
                )
                """
            ]
        ),
    ]

    /// The versions of every migration, in order (what a migrated database's `schema_migrations` lists).
    package static var versions: [Int] { all.map(\.version) }

    /// The advisory lock key every instance takes while migrating ("gdsync" as a number).
    static let lockKey: Int64 = 0x6764_7379_6E63

    /// Applies the pending migrations; returns the versions it applied.
    ///
    /// On one connection, under the migration lock held by its session. The lock is taken by
    /// polling `pg_try_advisory_lock`, not by waiting in `pg_advisory_lock`: `CREATE INDEX
    /// CONCURRENTLY` (a `concurrently` migration of another instance) waits for every open
    /// transaction to end, a waiting lock call included, which then waited for it in turn (a
    /// deadlock PostgreSQL broke by failing the waiting instance's start).
    /// While it waits for the lock it says so once, and a graceful shutdown (SIGTERM) ends the
    /// wait with `MigrationWaitEnded`, before anything listens.
    @discardableResult
    static func migrate(_ client: PostgresClient, logger: Logger) async throws -> [Int] {
        try await client.withConnection { connection in
            var waiting = false
            while try await !tryLock(connection, logger: logger) {
                if !waiting {
                    logger.notice("waiting for another server instance's schema migration to end (it holds the migration lock)")
                    waiting = true
                }
                if Task.isShuttingDownGracefully || Task.isCancelled { throw MigrationWaitEnded() }
                try await Task.sleep(for: .milliseconds(100))
            }
            do {
                let applied = try await migrate(connection, logger: logger)
                try await connection.query("SELECT pg_advisory_unlock(\(lockKey))", logger: logger)
                return applied
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(lockKey))", logger: logger)
                throw error
            }
        }
    }

    private static func tryLock(_ connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let rows = try await connection.query("SELECT pg_try_advisory_lock(\(lockKey))", logger: logger)
        for try await locked in rows.decode(Bool.self) { return locked }
        return false
    }

    /// The migrations not applied yet, each with its row in `schema_migrations`: in a transaction,
    /// or statement by statement for a `concurrently` one (its row last).
    private static func migrate(_ connection: PostgresConnection, logger: Logger) async throws -> [Int] {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version integer PRIMARY KEY, name text NOT NULL, applied timestamptz NOT NULL DEFAULT now())
            """,
            logger: logger
        )
        var done: Set<Int> = []
        for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: logger).decode(Int32.self) {
            done.insert(Int(version))
        }
        var applied: [Int] = []
        for migration in all where !done.contains(migration.version) {
            let apply = { (connection: PostgresConnection) in
                for statement in migration.statements {
                    // Static schema text: no values, nothing from outside.
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                    logger: logger
                )
            }
            if migration.concurrently {
                logger.notice(
                    "applying schema migration \(migration.version) (\(migration.name)): it builds an index concurrently, after every transaction open on its table ends"
                )
                try await apply(connection)
            } else {
                try await connection.withTransaction(logger: logger) { try await apply($0) }
            }
            logger.info("applied schema migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
            applied.append(migration.version)
        }
        return applied
    }
}

/// The server was told to stop while it waited for another instance's schema migration.
struct MigrationWaitEnded: Error, CustomStringConvertible {
    var description: String { "stopped while waiting for another server instance's schema migration" }
}
