import Foundation
import GroupDefaultsWire
import PostgresNIO

// The statements of a group of pushes, prepared once per connection (postgres-nio's prepared
// statements: each execution is a Bind and an Execute, no parsing), their plans cached for a
// group of a few pushes and made at each run for a larger one (`PlannedStatement`). The held
// entries, the batches and the history are reached through
// their primary keys, one lookup per key, from a lateral subquery that cannot be flattened into a
// join (`LIMIT 1`, a window function), and the history rows to trim are found that way before they are
// deleted (`doomed`): written as plain joins, the planner may scan the whole suite's history (or
// batches, or entries) for each key when its statistics say the table is small, and so it did in
// this server's earlier statements, a push costing more the more the suite held.

/// The suite as a group of pushes finds it, in one statement (one snapshot): its counters (kind 0),
/// the held entries of the group's keys (kind 1: the key, then `EntryRow.columns`), and the recorded
/// batches of the group's (device, batch id) pairs (kind 2: batch id, response, digest, device).
///
/// The held entries are a lookup per key through the primary key (a lateral subquery with
/// `LIMIT 1`, which the planner cannot flatten into a join). On a suite the statistics do not know
/// yet (one row, they guess), the planner used to cost the index on (account, suite, rev) with a
/// filter on the key as cheap, and take it, reading the suite's entries once per key
/// (`auto_explain`: 1–2 s for a group of 2,000 ops in a suite of 10,000 keys); that index is
/// partial now (`entries_by_live_rev`, migration 9), usable only by a plan made with a known bound
/// on `rev`. One `key = ANY` condition instead was planned, cached, as a scan of the suite's
/// entries through the primary key filtered by key, on every push (`PostgresPlanTests`).
struct SuiteReadStatement: PostgresPreparedStatement, OneShotStatement {
    static let name = "groupdefaults_push_read_v4"
    static let sql = """
        SELECT 0, NULL::text, NULL::text, NULL::bytea, epoch, false, mode_rev::text, NULL::text, head_rev, key_count, byte_count,
            NULL::text
        FROM suites WHERE account = $1 AND suite = $2
        UNION ALL
        SELECT 1, e.key, e.value::text, e.sealed, e.epoch, e.deleted, e.hlc::text, e.origin::text, e.rev, NULL::bigint, NULL::bigint,
            e.pushed_by
        FROM unnest($3::text[]) AS k(key) CROSS JOIN LATERAL (
            SELECT * FROM entries WHERE account = $1 AND suite = $2 AND key = k.key LIMIT 1
        ) e
        UNION ALL
        SELECT 2, b.batch_id, b.response::text, NULL::bytea, NULL::bigint, false, b.ops_digest, b.device::text, NULL::bigint,
            NULL::bigint, NULL::bigint, NULL::text
        FROM unnest($4::text[], $5::text[]) AS t(device, id) CROSS JOIN LATERAL (
            SELECT * FROM batches WHERE account = $1 AND suite = $2 AND device = t.device::numeric AND batch_id = t.id LIMIT 1
        ) b
        """
    typealias Row = (Int32, String?, String?, Data?, Int64?, Bool, String?, String?, Int64?, Int64?, Int64?, String?)

    var account: String
    var suite: String
    var keys: [String]
    /// Device ids as decimal text, beside `batchIDs`.
    var devices: [String]
    var batchIDs: [String]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(account)
        bindings.append(suite)
        bindings.append(keys)
        bindings.append(devices)
        bindings.append(batchIDs)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        try row.decode(Row.self)
    }
}

/// A group's output in one statement, on condition that the suite's head and epoch are still what
/// the read found (the `guarded` row: every other part joins it, so none writes when it is empty):
/// the suite's counters (its row created if new), the changed entries, the history (the group's
/// versions added, each of their keys trimmed to the last `depth`), a batch record per applied push,
/// and `pg_notify` (delivered at commit to every instance's listening connection). The statement's
/// parts all see the tables as they were before it, so the history rows to delete (`doomed`) are
/// those beyond the depth less the new versions of their key, found per key through the primary key
/// and deleted by their row ids (a TID scan): written as a join of the history with `doomed`, the
/// planner (guessing one history row per suite) read the suite's whole history on every push,
/// 11,598 rows and 6.8 of the statement's 7 ms after a few seconds of single-op pushes
/// (`auto_explain`). Answers the guarded row count (0: the suite moved).
struct GroupWriteStatement: PostgresPreparedStatement, OneShotStatement {
    static let name = "groupdefaults_push_write_v5"
    // `authorized`: the group's tokens, still held and not revoked, and the owner's incarnation, if
    // one was checked ($37, else ''), and the member accounts pushing ($38, each still a writer),
    // locked FOR KEY SHARE (the lightest lock a DELETE conflicts
    // with): an account's deletion waits for this write, or this write finds them gone and writes
    // nothing (`PushAuthority`). A deletion removes the tokens first, so the two take their locks
    // in the same order. A revocation (an UPDATE) does not wait; the token's row read here is the
    // latest committed one, so a push after it is refused.
    static let sql = """
        WITH authorized AS (
            SELECT (SELECT count(*) FROM (SELECT 1 FROM tokens WHERE id = ANY($35::text[]) AND revoked IS NULL FOR KEY SHARE) t) = $36
                AND ($37 = '' OR EXISTS (SELECT 1 FROM account_incarnations WHERE account = $1 AND id = $37 FOR KEY SHARE))
                AND (SELECT count(*) FROM (SELECT 1 FROM members WHERE owner = $1 AND suite = $2 AND account = ANY($38::text[])
                    AND record->>'role' IN ('write', 'admin') AND coalesce((record->>'awaitingKeys')::boolean, false) = false
                    FOR KEY SHARE) m) = $39 AS ok
        ), guarded AS (
            INSERT INTO suites AS s (account, suite, head_rev, key_count, byte_count, epoch)
            SELECT $1, $2, $3, $4, $5, $6 FROM authorized WHERE authorized.ok
            ON CONFLICT (account, suite) DO UPDATE SET head_rev = excluded.head_rev, key_count = excluded.key_count,
                byte_count = excluded.byte_count, epoch = excluded.epoch
            WHERE s.head_rev = $7 AND s.epoch = $8
            RETURNING 1 AS ok
        ), changed AS (
            SELECT * FROM unnest($9::text[], $10::text[], $11::boolean[], $12::text[], $13::text[], $14::bigint[], $15::text[],
                                 $16::bigint[], $33::text[]) AS t(k, v, d, h, o, r, s, e, p)
        ), upserted AS (
            INSERT INTO entries (account, suite, key, value, sealed, epoch, deleted, hlc, origin, rev, pushed_by)
            SELECT $1, $2, k, CASE WHEN d OR s <> '' THEN NULL ELSE v::json END,
                CASE WHEN s = '' THEN NULL ELSE decode(s, 'base64') END, NULLIF(e, 0), d, h::numeric, o::numeric, r, NULLIF(p, '')
            FROM changed, guarded
            ON CONFLICT (account, suite, key) DO UPDATE
                SET value = excluded.value, sealed = excluded.sealed, epoch = excluded.epoch, deleted = excluded.deleted,
                    hlc = excluded.hlc, origin = excluded.origin, rev = excluded.rev, pushed_by = excluded.pushed_by
        ), new AS (
            SELECT * FROM unnest($17::text[], $18::text[], $19::boolean[], $20::text[], $21::text[], $22::bigint[],
                                 $23::text[], $24::bigint[], $34::text[]) AS t(k, v, d, h, o, r, s, e, p)
        ), inserted AS (
            INSERT INTO history (account, suite, key, rev, value, sealed, epoch, deleted, hlc, origin, pushed_by)
            SELECT $1, $2, k, r, CASE WHEN d OR s <> '' THEN NULL ELSE v::json END,
                CASE WHEN s = '' THEN NULL ELSE decode(s, 'base64') END, NULLIF(e, 0), d, h::numeric, o::numeric, NULLIF(p, '')
            FROM new, guarded
        ), added AS (
            SELECT k, count(*) AS n FROM new GROUP BY k
        ), doomed AS MATERIALIZED (
            SELECT old.ctid FROM added CROSS JOIN LATERAL (
                SELECT x.ctid, row_number() OVER (ORDER BY x.rev DESC) AS position FROM history x
                WHERE x.account = $1 AND x.suite = $2 AND x.key = added.k COLLATE "C"
            ) old
            WHERE old.position > $25 - added.n
        ), trimmed AS (
            DELETE FROM history WHERE ctid = ANY (ARRAY(SELECT ctid FROM doomed)) AND EXISTS (SELECT 1 FROM guarded)
        ), recorded AS (
            INSERT INTO batches (account, suite, device, batch_id, ops_digest, response)
            SELECT $1, $2, d::numeric, b, g, r::json
            FROM unnest($26::text[], $27::text[], $28::text[], $29::text[]) AS t(d, b, g, r), guarded
        ), notified AS (
            SELECT pg_notify($30, $31) FROM guarded WHERE $32
        )
        SELECT (SELECT count(*) FROM guarded), (SELECT count(*) FROM notified)
        """
    typealias Row = (Int64, Int64)

    var account: String
    var suite: String
    var counters: PushStep.Counters
    var expected: PushStep.Counters
    var entries: EntryColumns
    var history: EntryColumns
    var depth: Int
    var batchDevices: [String]
    var batchIDs: [String]
    var batchDigests: [String]
    var batchResponses: [String]
    var notice: String
    var notify: Bool
    /// The group's tokens (`PushAuthority.tokenID`), each once.
    var tokenIDs: [String]
    /// The owner's incarnation the group was checked against, or empty.
    var ownerIncarnation: String
    /// The member accounts whose pushes the group holds (`PreparedPush.account`), each once.
    var memberAccounts: [String]

    func makeBindings() throws -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 39)
        bindings.append(account)
        bindings.append(suite)
        bindings.append(Int64(counters.head))
        bindings.append(Int64(counters.keys))
        bindings.append(Int64(counters.bytes))
        bindings.append(Int64(counters.epoch))
        bindings.append(Int64(expected.head))
        bindings.append(Int64(expected.epoch))
        for columns in [entries, history] {
            bindings.append(columns.keys)
            bindings.append(columns.values)
            bindings.append(columns.deleted)
            bindings.append(columns.hlcs)
            bindings.append(columns.origins)
            bindings.append(columns.revs)
            bindings.append(columns.sealed)
            bindings.append(columns.epochs)
        }
        bindings.append(Int64(depth))
        bindings.append(batchDevices)
        bindings.append(batchIDs)
        bindings.append(batchDigests)
        bindings.append(batchResponses)
        bindings.append(ChangeNotice.channel)
        bindings.append(notice)
        bindings.append(notify)
        bindings.append(entries.pushedBy)
        bindings.append(history.pushedBy)
        bindings.append(tokenIDs)
        bindings.append(Int64(tokenIDs.count))
        bindings.append(ownerIncarnation)
        bindings.append(memberAccounts)
        bindings.append(Int64(memberAccounts.count))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        try row.decode(Row.self)
    }
}

/// Entries as the columns of an `unnest(…)` (value JSON as text, empty for a deletion, which
/// `deleted` marks, or for a sealed entry; sealed bytes as base64, empty for a plain entry, and the
/// key epoch, 0 for a plain entry; HLCs and origins as decimal text for `numeric`).
struct EntryColumns: Sendable {
    let keys: [String]
    let values: [String]
    let deleted: [Bool]
    let hlcs: [String]
    let origins: [String]
    let revs: [Int64]
    let sealed: [String]
    let epochs: [Int64]
    /// The member account that pushed each entry, empty for the owner's.
    let pushedBy: [String]

    init(_ entries: [StoredEntry]) {
        keys = entries.map(\.key)
        values = entries.map { $0.valueJSON.map { String(decoding: $0, as: UTF8.self) } ?? "" }
        deleted = entries.map(\.isDeleted)
        sealed = entries.map { $0.sealed.map { Data($0.box).base64EncodedString() } ?? "" }
        epochs = entries.map { Int64($0.sealed?.epoch ?? 0) }
        hlcs = entries.map { String($0.stamp.hlc.rawValue) }
        origins = entries.map { String($0.stamp.origin) }
        revs = entries.map { Int64($0.rev) }
        pushedBy = entries.map { $0.account ?? "" }
    }
}
