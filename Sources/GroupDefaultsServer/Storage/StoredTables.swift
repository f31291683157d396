/// Every table the server stores, on both backends, and what a restore does with it: the one
/// list that the embedded store's `restore`, PostgreSQL's `restore --prepare`/`--announce` and
/// the tests follow (`StoredTablesTests` fails for a table that is not in it).
///
/// - **Data** is what devices wrote and what follows from it (entries, their revisions and
///   history, batches): a restore brings back the backup's.
/// - **Authority** is who may do what (accounts, tokens, operators, members and their roles,
///   invitations, key bags and anchors, pairings, devices and their revocations, the audit log):
///   a restore keeps the present's, so that a backup never gives back access that was taken away
///   since, nor takes away access given since. One part of a data table is authority too: a
///   suite's key epoch and the reset that decides its mode again (`SuiteKeyState`), which follow the
///   key bags.
/// - **Bookkeeping** is the store's own (its incarnation, made new by a restore; migrations; the
///   counters of ids), kept by its own rule, named in `holds`.
///
/// Without a present store (a new machine, or one that does not open) the backup's authority is
/// used, and the restore says so.
package enum StoredTables {
    /// What a restore does with a table.
    package enum Kind: Sendable {
        /// The backup's is brought back.
        case data
        /// The present's is kept.
        case authority
        /// The store's own, by the rule `holds` names.
        case bookkeeping
    }

    /// One table: its name in each backend that has it, its kind, and what it holds.
    package struct Table: Sendable {
        /// The named database in `sync.lmdb`, if the embedded store has it.
        package let lmdb: String?
        /// The table in PostgreSQL, if that backend has it.
        package let postgres: String?
        /// What a restore does with it.
        package let kind: Kind
        /// What it holds (and, for bookkeeping, its rule).
        package let holds: String
    }

    /// Every table of both backends.
    package static let all: [Table] = [
        Table(
            lmdb: "suites",
            postgres: "suites",
            kind: .data,
            holds: "each suite's head, counters; its key epoch and mode are authority (SuiteKeyState)"
        ),
        Table(lmdb: "entries", postgres: "entries", kind: .data, holds: "each key's latest entry"),
        Table(lmdb: "revisions", postgres: nil, kind: .data, holds: "revision → entry index"),
        Table(lmdb: "batches", postgres: "batches", kind: .data, holds: "pushes' recorded answers (idempotency)"),
        Table(lmdb: "history", postgres: "history", kind: .data, holds: "each key's earlier versions"),
        Table(lmdb: "tokens", postgres: "tokens", kind: .authority, holds: "tokens, active and revoked"),
        Table(lmdb: "token-hashes", postgres: nil, kind: .authority, holds: "token hash → token index"),
        Table(lmdb: "devices", postgres: "devices", kind: .authority, holds: "devices seen per token, and their revocations"),
        Table(lmdb: "pairings", postgres: "pairings", kind: .authority, holds: "pairings under way"),
        Table(lmdb: "key-bags", postgres: "key_bags", kind: .authority, holds: "key bags and the suite's anchor"),
        Table(lmdb: "console", postgres: "console_records", kind: .authority, holds: "operators (sessions end at a restore)"),
        Table(lmdb: "audit", postgres: "audit", kind: .authority, holds: "the audit log"),
        Table(
            lmdb: "sharing",
            postgres: "members",
            kind: .authority,
            holds: "members of shared suites and their roles (LMDB: invitations, rotations due and pinned keys too)"
        ),
        Table(
            lmdb: nil,
            postgres: "pinned_keys",
            kind: .authority,
            holds: "the keys a suite's owner pinned for its members (LMDB keeps them in sharing)"
        ),
        Table(lmdb: nil, postgres: "rotations_due", kind: .authority, holds: "key rotations due after a member's removal"),
        Table(lmdb: "account-incarnations", postgres: "account_incarnations", kind: .authority, holds: "each account's incarnation"),
        Table(lmdb: nil, postgres: "invitations", kind: .authority, holds: "invitations (LMDB keeps them in sharing)"),
        Table(
            lmdb: "meta",
            postgres: nil,
            kind: .bookkeeping,
            holds: "the next suite id (the backup's, with its suites), the token generation (moved on), the incarnation (made new)"
        ),
        Table(lmdb: nil, postgres: "storage_incarnation", kind: .bookkeeping, holds: "the incarnation (made new by the announcement)"),
        Table(lmdb: nil, postgres: "schema_migrations", kind: .bookkeeping, holds: "migrations applied (the storage migrates a restored dump)"),
    ]

    /// The embedded store's named databases of `kind`.
    package static func lmdb(_ kind: Kind) -> [String] { all.filter { $0.kind == kind }.compactMap(\.lmdb) }

    /// PostgreSQL's tables of `kind`.
    package static func postgres(_ kind: Kind) -> [String] { all.filter { $0.kind == kind }.compactMap(\.postgres) }
}
