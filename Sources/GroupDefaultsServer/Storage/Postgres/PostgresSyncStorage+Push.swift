import Foundation
package import GroupDefaultsWire
import Logging
import PostgresNIO

extension PostgresSyncStorage {
    /// One transaction: lock the suite row, load the batch record and the held entries of the
    /// push's keys, run the push step, write its entries, counters and batch record, and notify
    /// every instance.
    package func push(account: String, suite: String, push: PreparedPush, quota: SuiteQuota, serverTime: String) async throws -> PushResponse {
        let outcome = try await bounded("pushing") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                try await PushTransaction(
                    connection: connection, logger: storage.logger, account: account, suite: suite,
                    push: push, quota: quota, serverTime: serverTime
                ).run()
            }
        }
        if outcome.advanced {
            signals.signal(SuiteID(account: account, suite: suite), head: outcome.response.headRev)
        }
        return outcome.response
    }

    package func purgeTombstones(olderThan horizon: HLC) async throws -> Int {
        let horizonText = String(horizon.rawValue)
        let affected = try await bounded("finding old tombstones") { storage in
            let rows = try await storage.client.query("""
                SELECT DISTINCT account, suite FROM entries WHERE value IS NULL AND deleted AND hlc < \(horizonText)::numeric
                """, logger: storage.logger)
            var suites: [SuiteID] = []
            for try await (account, suite) in rows.decode((String, String).self) {
                suites.append(SuiteID(account: account, suite: suite))
            }
            return suites
        }
        var removed = 0
        for id in affected {
            // Per suite, the suite row first: the lock order of a push.
            removed += try await bounded("purging tombstones") { storage in
                try await storage.client.withTransaction(logger: storage.logger) { connection in
                    try await connection.query(
                        "SELECT 1 FROM suites WHERE account = \(id.account) AND suite = \(id.suite) FOR UPDATE",
                        logger: storage.logger)
                    let rows = try await connection.query("""
                        WITH purged AS (
                            DELETE FROM entries WHERE account = \(id.account) AND suite = \(id.suite)
                                AND value IS NULL AND deleted AND hlc < \(horizonText)::numeric
                            RETURNING rev
                        ), counted AS (SELECT count(*) AS n, max(rev) AS max_rev FROM purged)
                        UPDATE suites SET oldest_valid_rev = GREATEST(oldest_valid_rev, counted.max_rev)
                        FROM counted WHERE account = \(id.account) AND suite = \(id.suite) AND counted.n > 0
                        RETURNING counted.n
                        """, logger: storage.logger)
                    var count = 0
                    for try await n in rows.decode(Int64.self) { count += Int(n) }
                    return count
                }
            }
        }
        // Batch records as old as the horizon: a retry that late re-applies its ops, which LWW then
        // finds already stored (superseded), so nothing changes.
        let horizonSeconds = Double(horizon.milliseconds) / 1000
        try await bounded("purging batch records") { storage in
            try await storage.client.query(
                "DELETE FROM batches WHERE created < to_timestamp(\(horizonSeconds))", logger: storage.logger)
        }
        // History versions as old as the horizon, unless they are their key's current entry.
        try await bounded("purging history") { storage in
            try await storage.client.query("""
                DELETE FROM history h WHERE h.hlc < \(horizonText)::numeric AND NOT EXISTS (
                    SELECT 1 FROM entries e
                    WHERE e.account = h.account AND e.suite = h.suite AND e.key = h.key AND e.rev = h.rev)
                """, logger: storage.logger)
        }
        return removed
    }
}

/// What a push transaction did: the response, and whether the head moved (who to wake).
struct PushOutcome: Sendable {
    var response: PushResponse
    var advanced: Bool
}

/// The statements of one push, on a connection inside a transaction.
private struct PushTransaction {
    let connection: PostgresConnection
    let logger: Logger
    let account: String
    let suite: String
    let push: PreparedPush
    let quota: SuiteQuota
    let serverTime: String

    var request: PushRequest { push.request }
    /// The digest as the `batches` table keeps it: lowercase hex.
    var digest: String { Hex.string(push.digest) }

    func run() async throws -> PushOutcome {
        let counters = try await lockSuite()
        let outcome = try PushStep.run(
            push, suite: suite, held: try await heldEntries(), counters: counters, recorded: try await recordedBatch(),
            quota: quota, serverTime: serverTime)
        switch outcome {
        case .replayed(let response):
            return PushOutcome(response: response, advanced: false)
        case .applied(let applied):
            if applied.advanced {
                try await write(applied.writes, versions: applied.historyVersions(depth: quota.historyDepth), counters: applied.counters)
            }
            try await record(applied.response)
            return PushOutcome(response: applied.response, advanced: applied.advanced)
        }
    }

    /// Creates the suite row if needed and locks it: pushes to one suite run one after another.
    private func lockSuite() async throws -> PushStep.Counters {
        try await connection.query(
            "INSERT INTO suites (account, suite) VALUES (\(account), \(suite)) ON CONFLICT DO NOTHING", logger: logger)
        let rows = try await connection.query("""
            SELECT head_rev, key_count, byte_count, epoch FROM suites
            WHERE account = \(account) AND suite = \(suite) FOR UPDATE
            """, logger: logger)
        for try await (head, keys, bytes, epoch) in rows.decode((Int64, Int64, Int64, Int64).self) {
            return PushStep.Counters(head: UInt64(head), keys: Int(keys), bytes: Int(bytes), epoch: UInt32(clamping: epoch))
        }
        throw SyncStorageError(.unavailable, "the row of suite \(suite) vanished while it was being locked")
    }

    /// The record of this batch id, if it was pushed before.
    private func recordedBatch() async throws -> PushStep.RecordedBatch? {
        let rows = try await connection.query("""
            SELECT ops_digest, response::text FROM batches
            WHERE account = \(account) AND suite = \(suite) AND device = \(String(request.deviceID))::numeric
                AND batch_id = \(request.batchID)
            """, logger: logger)
        for try await (storedDigest, response) in rows.decode((String, String).self) {
            return PushStep.RecordedBatch(digest: storedDigest == digest ? push.digest : []) {
                try JSONDecoder().decode(PushResponse.self, from: Data(response.utf8))
            }
        }
        return nil
    }

    private func heldEntries() async throws -> [String: StoredEntry] {
        let keys = Array(Set(request.ops.map(\.key)))
        let rows = try await connection.query("""
            SELECT key, \(unescaped: EntryRow.columns) FROM entries
            WHERE account = \(account) AND suite = \(suite) AND key = ANY(\(keys)::text[])
            """, logger: logger)
        var held: [String: StoredEntry] = [:]
        for try await row in rows.decode((String, String?, Data?, Int64?, Bool, String, String, Int64).self) {
            held[row.0] = try EntryRow.stored(key: row.0, (row.1, row.2, row.3, row.4, row.5, row.6, row.7))
        }
        return held
    }

    /// The push's output in one statement (one round trip): the changed entries, the suite's
    /// counters, and the history (the push's versions added, each of their keys trimmed to the last
    /// `historyDepth`); then `pg_notify`. The statement's parts all see the tables as they were
    /// before it, so the history rows to delete are those beyond the depth less the new versions of
    /// their key.
    private func write(_ changed: [StoredEntry], versions: [StoredEntry], counters: PushStep.Counters) async throws {
        let entries = EntryColumns(changed), history = EntryColumns(versions)
        let depth = Int64(quota.historyDepth)
        try await connection.query("""
            WITH changed AS (
                SELECT * FROM unnest(\(entries.keys)::text[], \(entries.values)::text[], \(entries.deleted)::boolean[],
                                     \(entries.hlcs)::text[], \(entries.origins)::text[], \(entries.revs)::bigint[],
                                     \(entries.sealed)::text[], \(entries.epochs)::bigint[]) AS t(k, v, d, h, o, r, s, e)
            ), upserted AS (
                INSERT INTO entries (account, suite, key, value, sealed, epoch, deleted, hlc, origin, rev)
                SELECT \(account), \(suite), k, CASE WHEN d OR s <> '' THEN NULL ELSE v::json END,
                    CASE WHEN s = '' THEN NULL ELSE decode(s, 'base64') END, NULLIF(e, 0), d, h::numeric, o::numeric, r FROM changed
                ON CONFLICT (account, suite, key) DO UPDATE
                    SET value = excluded.value, sealed = excluded.sealed, epoch = excluded.epoch, deleted = excluded.deleted,
                        hlc = excluded.hlc, origin = excluded.origin, rev = excluded.rev
            ), counted AS (
                UPDATE suites SET head_rev = \(Int64(counters.head)), key_count = \(Int64(counters.keys)),
                    byte_count = \(Int64(counters.bytes)), epoch = \(Int64(counters.epoch))
                WHERE account = \(account) AND suite = \(suite)
            ), new AS (
                SELECT * FROM unnest(\(history.keys)::text[], \(history.values)::text[], \(history.deleted)::boolean[],
                                     \(history.hlcs)::text[], \(history.origins)::text[], \(history.revs)::bigint[],
                                     \(history.sealed)::text[], \(history.epochs)::bigint[]) AS t(k, v, d, h, o, r, s, e)
            ), inserted AS (
                INSERT INTO history (account, suite, key, rev, value, sealed, epoch, deleted, hlc, origin)
                SELECT \(account), \(suite), k, r, CASE WHEN d OR s <> '' THEN NULL ELSE v::json END,
                    CASE WHEN s = '' THEN NULL ELSE decode(s, 'base64') END, NULLIF(e, 0), d, h::numeric, o::numeric FROM new
            ), added AS (
                SELECT k, count(*) AS n FROM new GROUP BY k
            ), ranked AS (
                SELECT h.key, h.rev, row_number() OVER (PARTITION BY h.key ORDER BY h.rev DESC) AS position
                FROM history h JOIN added ON h.key = added.k
                WHERE h.account = \(account) AND h.suite = \(suite)
            )
            DELETE FROM history USING ranked JOIN added ON ranked.key = added.k
            WHERE history.account = \(account) AND history.suite = \(suite) AND history.key = ranked.key
                AND history.rev = ranked.rev AND ranked.position > \(depth) - added.n
            """, logger: logger)
        let notice = String(decoding: try JSONEncoder().encode(ChangeNotice(account: account, suite: suite, head: counters.head)),
                            as: UTF8.self)
        // Delivered by PostgreSQL at commit, to the listening connection of every instance.
        try await connection.query("SELECT pg_notify(\(ChangeNotice.channel), \(notice))", logger: logger)
    }

    private func record(_ response: PushResponse) async throws {
        let json = String(decoding: try JSONEncoder().encode(response), as: UTF8.self)
        try await connection.query("""
            INSERT INTO batches (account, suite, device, batch_id, ops_digest, response)
            VALUES (\(account), \(suite), \(String(request.deviceID))::numeric, \(request.batchID), \(digest), \(json)::json)
            """, logger: logger)
    }
}

/// Entries as the columns of an `unnest(…)` (value JSON as text, empty for a deletion, which
/// `deleted` marks, or for a sealed entry; sealed bytes as base64, empty for a plain entry, and the
/// key epoch, 0 for a plain entry; HLCs and origins as decimal text for `numeric`).
private struct EntryColumns {
    let keys: [String]
    let values: [String]
    let deleted: [Bool]
    let hlcs: [String]
    let origins: [String]
    let revs: [Int64]
    let sealed: [String]
    let epochs: [Int64]

    init(_ entries: [StoredEntry]) {
        keys = entries.map(\.key)
        values = entries.map { $0.valueJSON.map { String(decoding: $0, as: UTF8.self) } ?? "" }
        deleted = entries.map(\.isDeleted)
        sealed = entries.map { $0.sealed.map { Data($0.box).base64EncodedString() } ?? "" }
        epochs = entries.map { Int64($0.sealed?.epoch ?? 0) }
        hlcs = entries.map { String($0.stamp.hlc.rawValue) }
        origins = entries.map { String($0.stamp.origin) }
        revs = entries.map { Int64($0.rev) }
    }
}
