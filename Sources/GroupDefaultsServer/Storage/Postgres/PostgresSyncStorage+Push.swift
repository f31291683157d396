import Crypto
import Foundation
public import GroupDefaultsWire
import Logging
import PostgresNIO

extension PostgresSyncStorage {
    /// One transaction: lock the suite row, answer a known batch from its record, else merge each op
    /// by last-writer-wins, give each applied op the next revision of the suite's counter, check the
    /// quotas, write the entries, the counter and the batch record, and notify every instance.
    public func push(account: String, suite: String, request: PushRequest, quota: SuiteQuota, serverTime: String) async throws -> PushResponse {
        let digest = try Self.digest(of: request.ops)
        let outcome = try await bounded("pushing") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                try await PushTransaction(
                    connection: connection, logger: storage.logger, account: account, suite: suite,
                    request: request, digest: digest, quota: quota, serverTime: serverTime
                ).run()
            }
        }
        if outcome.advanced {
            signals.signal(SuiteID(account: account, suite: suite), head: outcome.response.headRev)
        }
        return outcome.response
    }

    /// SHA-256 of the ops' canonical JSON: what makes a retried batch "the same ops".
    static func digest(of ops: [PushOp]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return SHA256.hash(data: try encoder.encode(ops)).map { String(format: "%02x", $0) }.joined()
    }

    public func purgeTombstones(olderThan horizon: HLC) async throws -> Int {
        let horizonText = String(horizon.rawValue)
        let affected = try await bounded("finding old tombstones") { storage in
            let rows = try await storage.client.query("""
                SELECT DISTINCT account, suite FROM entries WHERE value IS NULL AND hlc < \(horizonText)::numeric
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
                                AND value IS NULL AND hlc < \(horizonText)::numeric
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
    let request: PushRequest
    let digest: String
    let quota: SuiteQuota
    let serverTime: String

    /// A key's state during the merge: its entry, and its typed JSON text when live.
    struct Held {
        var entry: SyncEntry
        var json: String?
        var quotaBytes: Int { json.map { entry.key.utf8.count + $0.utf8.count } ?? 0 }
    }

    struct Counters {
        var head: UInt64
        var keys: Int
        var bytes: Int
    }

    func run() async throws -> PushOutcome {
        let before = try await lockSuite()
        if let response = try await recordedResponse() {
            return PushOutcome(response: response, advanced: false)
        }
        var held = try await heldEntries()
        var after = before
        var results: [(key: String, status: PushResult.Status)] = []
        var changedKeys: [String] = []
        let encoder = JSONEncoder()
        for op in request.ops {
            let stamp = Stamp(hlc: op.hlc, origin: request.deviceID)
            guard SyncMerge.wins(stamp, over: held[op.key]?.entry.stamp) else {
                results.append((op.key, .superseded))
                continue
            }
            let old = held[op.key]
            after.head += 1
            let json = try op.value.map { String(decoding: try encoder.encode($0), as: UTF8.self) }
            let new = Held(entry: SyncEntry(key: op.key, value: op.value, hlc: op.hlc, origin: request.deviceID, rev: after.head),
                           json: json)
            after.keys += (new.json != nil ? 1 : 0) - (old?.json != nil ? 1 : 0)
            after.bytes += new.quotaBytes - (old?.quotaBytes ?? 0)
            held[op.key] = new
            if !changedKeys.contains(op.key) { changedKeys.append(op.key) }
            results.append((op.key, .applied))
        }
        try checkQuota(before: before, after: after)
        let response = PushResponse(
            headRev: after.head,
            results: results.map { PushResult(key: $0.key, status: $0.status, winner: held[$0.key]!.entry) },
            serverTime: serverTime)
        if after.head != before.head {
            try await write(changedKeys.map { held[$0]! }, counters: after)
        }
        try await record(response)
        return PushOutcome(response: response, advanced: after.head != before.head)
    }

    /// Creates the suite row if needed and locks it: pushes to one suite run one after another.
    private func lockSuite() async throws -> Counters {
        try await connection.query(
            "INSERT INTO suites (account, suite) VALUES (\(account), \(suite)) ON CONFLICT DO NOTHING", logger: logger)
        let rows = try await connection.query("""
            SELECT head_rev, key_count, byte_count FROM suites
            WHERE account = \(account) AND suite = \(suite) FOR UPDATE
            """, logger: logger)
        for try await (head, keys, bytes) in rows.decode((Int64, Int64, Int64).self) {
            return Counters(head: UInt64(head), keys: Int(keys), bytes: Int(bytes))
        }
        throw SyncStorageError(.unavailable, "the row of suite \(suite) vanished while it was being locked")
    }

    /// The stored response of this batch id, if it was pushed before with the same ops.
    private func recordedResponse() async throws -> PushResponse? {
        let rows = try await connection.query("""
            SELECT ops_digest, response::text FROM batches
            WHERE account = \(account) AND suite = \(suite) AND device = \(String(request.deviceID))::numeric
                AND batch_id = \(request.batchID)
            """, logger: logger)
        for try await (storedDigest, response) in rows.decode((String, String).self) {
            guard storedDigest == digest else {
                throw SyncStorageError(.idempotencyMismatch,
                    "batch \(request.batchID) of device \(request.deviceID) was already pushed with other ops")
            }
            return try JSONDecoder().decode(PushResponse.self, from: Data(response.utf8))
        }
        return nil
    }

    private func heldEntries() async throws -> [String: Held] {
        let keys = Array(Set(request.ops.map(\.key)))
        let rows = try await connection.query("""
            SELECT key, value::text, hlc::text, origin::text, rev FROM entries
            WHERE account = \(account) AND suite = \(suite) AND key = ANY(\(keys)::text[])
            """, logger: logger)
        var held: [String: Held] = [:]
        for try await (key, value, hlc, origin, rev) in rows.decode((String, String?, String, String, Int64).self) {
            held[key] = Held(entry: try EntryRow.entry(key: key, value: value, hlc: hlc, origin: origin, rev: rev), json: value)
        }
        return held
    }

    /// A push may not take a suite over a quota (a suite already over one, after the quota was
    /// lowered, may still shrink).
    private func checkQuota(before: Counters, after: Counters) throws {
        if after.keys > quota.maxKeys && after.keys > before.keys {
            throw SyncStorageError(.quotaExceeded,
                "suite \(suite) would hold \(after.keys) keys, more than the \(quota.maxKeys) allowed", limit: quota.maxKeys)
        }
        if after.bytes > quota.maxBytes && after.bytes > before.bytes {
            throw SyncStorageError(.quotaExceeded,
                "suite \(suite) would hold \(after.bytes) bytes, more than the \(quota.maxBytes) allowed", limit: quota.maxBytes)
        }
    }

    private func write(_ changed: [Held], counters: Counters) async throws {
        let keys = changed.map(\.entry.key)
        let values = changed.map { $0.json ?? "" }
        let deleted = changed.map { $0.json == nil }
        let hlcs = changed.map { String($0.entry.hlc.rawValue) }
        let origins = changed.map { String($0.entry.origin) }
        let revs = changed.map { Int64($0.entry.rev ?? 0) }
        try await connection.query("""
            INSERT INTO entries (account, suite, key, value, hlc, origin, rev)
            SELECT \(account), \(suite), k, CASE WHEN d THEN NULL ELSE v::json END, h::numeric, o::numeric, r
            FROM unnest(\(keys)::text[], \(values)::text[], \(deleted)::boolean[], \(hlcs)::text[], \(origins)::text[],
                        \(revs)::bigint[]) AS t(k, v, d, h, o, r)
            ON CONFLICT (account, suite, key) DO UPDATE
                SET value = excluded.value, hlc = excluded.hlc, origin = excluded.origin, rev = excluded.rev
            """, logger: logger)
        try await connection.query("""
            UPDATE suites SET head_rev = \(Int64(counters.head)), key_count = \(Int64(counters.keys)),
                byte_count = \(Int64(counters.bytes))
            WHERE account = \(account) AND suite = \(suite)
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
