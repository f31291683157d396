import Foundation
import GroupDefaultsWire
import Logging
import PostgresNIO
import TestSupport
import Testing

@testable import GroupDefaultsServer

/// Plans on grown tables (`PlannedStatement`): once the tables hold many suites, one of them large,
/// and their planner statistics were updated (as autovacuum's `ANALYZE` does when a table grows),
/// a push's read, run prepared with its plan cached on the connection since the tables were small,
/// finds its rows through the primary keys, for a suite the statistics know and for one they
/// do not (written after they were made); and a page of changes of the large suite reads that suite
/// in revision order through `entries_by_live_rev` rather than sorting all its entries; a push's
/// write trims each key's history by row id, not by reading the suite's history.
@Suite("PostgreSQL: plans after the tables grow", .timeLimit(.minutes(3)))
struct PostgresPlanTests {
    /// Small suites, and keys and batch records in each; and the keys of the large suite.
    static let smallSuites = 400
    static let keysPerSmallSuite = 50
    static let largeSuiteKeys = 30_000

    @Test("the push's cached read uses the indexes, and a page of a large suite's changes reads it in revision order")
    func plansFollowGrowth() async throws {
        try await StorageBackend.postgres.withStorage { storage in
            let storage = storage as! PostgresSyncStorage
            try await storage.client.withConnection { connection in
                let logger = Logger(label: "plan-test")
                // More than five runs while the tables are empty: PostgreSQL weighs a generic plan.
                for _ in 0..<7 { try await Self.read(connection, suite: "big", logger: logger) }
                try await Self.grow(connection, logger: logger)
                // The large suite, which the statistics know, and one written after they were made.
                _ = try await connection.query(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO entries (account, suite, key, value, hlc, origin, rev)
                            SELECT 'fresh', 'fresh', 'k' || r, '{"integer":1}'::json, r, 7, r FROM generate_series(1, \(Self.largeSuiteKeys)) AS r
                            """
                    ),
                    logger: logger
                ).collect()
                for suite in ["big", "fresh"] {
                    for _ in 0..<7 { try await Self.read(connection, suite: suite, logger: logger) }
                    let read = try await Self.lines(
                        connection,
                        "EXPLAIN EXECUTE \(SuiteReadStatement.name)('\(suite)', '\(suite)', ARRAY['k1','k2'], ARRAY['7'], ARRAY['b1'])",
                        logger: logger
                    )
                    #expect(!read.contains("Seq Scan on entries") && !read.contains("Seq Scan on batches"), "a whole table read:\n\(read)")
                    #expect(!read.contains("Filter: (key"), "the suite's entries filtered by key:\n\(read)")
                    #expect(read.contains("Index Scan using entries_pkey") && read.contains("batches_pkey"), "\(read)")
                }

                // A push's write, prepared and run seven times (guarded out: the head it expects is
                // not the suite's, so it writes nothing), then its plan: each key's history to trim
                // is found through the primary key and deleted by row id, never by reading the
                // suite's history (30,000 rows here).
                let entry = StoredEntry(
                    key: "k1",
                    valueJSON: Array(#"{"integer":2}"#.utf8),
                    stamp: Stamp(hlc: HLC(rawValue: 1 << 40), origin: 7),
                    rev: 99_999
                )
                let write = GroupWriteStatement(
                    account: "big",
                    suite: "big",
                    counters: .init(head: 99_999, keys: Self.largeSuiteKeys, bytes: 0),
                    expected: .init(head: 12_345, keys: 0, bytes: 0),
                    entries: EntryColumns([entry]),
                    history: EntryColumns([entry]),
                    depth: 1,
                    batchDevices: ["7"],
                    batchIDs: ["b-plan"],
                    batchDigests: [""],
                    batchResponses: ["{}"],
                    notice: "",
                    notify: false,
                    tokenIDs: [],
                    ownerIncarnation: "",
                    memberAccounts: []
                )
                for _ in 0..<7 { for try await _ in try await connection.execute(write, logger: logger) {} }
                // `write`'s arguments as literals (EXECUTE takes no bound parameters).
                let columns =
                    "ARRAY['k1'], ARRAY['{\"integer\":2}'], ARRAY[false], ARRAY['\(1 << 40)'], ARRAY['7'], ARRAY[99999]::bigint[], ARRAY[''], ARRAY[0]::bigint[]"
                let arguments = [
                    "'big', 'big', 99999, \(Self.largeSuiteKeys), 0, 0, 12345, 0", columns, columns,
                    "1, ARRAY['7'], ARRAY['b-plan'], ARRAY[''], ARRAY['{}'], 'unused', '', false, ARRAY[''], ARRAY[''], ARRAY[]::text[], 0, '', ARRAY[]::text[], 0",
                ]
                let writePlan = try await Self.lines(
                    connection,
                    "EXPLAIN EXECUTE \(GroupWriteStatement.name)(\(arguments.joined(separator: ", ")))",
                    logger: logger
                )
                #expect(writePlan.contains("Tid Scan on history"), "the history is not trimmed by row id:\n\(writePlan)")
                #expect(!writePlan.contains("Seq Scan on history"), "\(writePlan)")

                // `changes` runs as the unnamed statement, planned with its parameters (`rowsPlanningEach`).
                let statement = ChangesStatement(account: "big", suite: "big", since: 10, limit: 101)
                var changes = ""
                let plan = try await connection.query(
                    PostgresQuery(unsafeSQL: "EXPLAIN " + ChangesStatement.sql, binds: try statement.makeBindings()),
                    logger: logger
                )
                for try await line in plan.decode(String.self) { changes += line + "\n" }
                #expect(changes.contains("entries_by_live_rev"), "the page is not read in revision order:\n\(changes)")
                #expect(!changes.contains("Seq Scan on entries"), "\(changes)")
            }
            // And through the storage itself: a page of the large suite, in revision order.
            let page = try await storage.changes(account: "big", suite: "big", since: 10, limit: 100)
            #expect(page.entries.map(\.rev) == Array(11...110))
        }
    }

    /// The push's read, prepared, as the storage runs it for a small group.
    static func read(_ connection: PostgresConnection, suite: String, logger: Logger) async throws {
        let read = SuiteReadStatement(account: suite, suite: suite, keys: ["k1", "k2"], devices: ["7"], batchIDs: ["b1"])
        for try await _ in try await connection.execute(read, logger: logger) {}
    }

    /// The text rows of `sql` (an `EXPLAIN`), one line each.
    static func lines(_ connection: PostgresConnection, _ sql: String, logger: Logger) async throws -> String {
        var lines: [String] = []
        for try await line in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).decode(String.self) {
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    /// Fills `suites`, `entries` and `batches`: many small suites and one large one (`big`), then
    /// updates the planner's statistics.
    static func grow(_ connection: PostgresConnection, logger: Logger) async throws {
        let statements = [
            """
            INSERT INTO suites (account, suite, head_rev, key_count, byte_count, epoch)
            SELECT 'a' || n, 's' || n, \(keysPerSmallSuite), \(keysPerSmallSuite), 0, 0 FROM generate_series(1, \(smallSuites)) AS n
            UNION ALL SELECT 'big', 'big', \(largeSuiteKeys), \(largeSuiteKeys), 0, 0
            """,
            """
            INSERT INTO entries (account, suite, key, value, hlc, origin, rev)
            SELECT 'a' || n, 's' || n, 'k' || r, '{"integer":1}'::json, r, 7, r
            FROM generate_series(1, \(smallSuites)) AS n, generate_series(1, \(keysPerSmallSuite)) AS r
            UNION ALL SELECT 'big', 'big', 'k' || r, '{"integer":1}'::json, r, 7, r FROM generate_series(1, \(largeSuiteKeys)) AS r
            """,
            """
            INSERT INTO history (account, suite, key, rev, value, hlc, origin)
            SELECT 'big', 'big', 'k' || r, r, '{"integer":1}'::json, r, 7 FROM generate_series(1, \(largeSuiteKeys)) AS r
            """,
            """
            INSERT INTO batches (account, suite, device, batch_id, ops_digest, response)
            SELECT 'a' || n, 's' || n, 7, 'b' || r, '', '{}'
            FROM generate_series(1, \(smallSuites)) AS n, generate_series(1, \(keysPerSmallSuite)) AS r
            """,
            // The statistics stay as this ANALYZE makes them (the suite written after it stays unknown).
            "ALTER TABLE entries SET (autovacuum_enabled = false)",
            "ALTER TABLE history SET (autovacuum_enabled = false)",
            "ANALYZE suites, entries, batches, history",
        ]
        for sql in statements {
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger).collect()
        }
    }
}
