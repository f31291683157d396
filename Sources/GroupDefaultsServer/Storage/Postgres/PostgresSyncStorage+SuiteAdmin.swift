import Foundation
import Logging
import NIOCore
import PostgresNIO

// The operator's view of every account's suites, and the operator's reset.
//
// `resetSuite`: one transaction deletes the suite's entries, history and batch records (and with
// `keys` its key bags), moves its row to the reset's revision, and announces the new head to every
// instance.
extension PostgresSyncStorage: SuiteAdmin {
    package func suiteSummaries(account: String?) async throws -> [SuiteSummary] {
        try await bounded("listing suites") { storage in
            let rows = try await storage.client.query(
                """
                SELECT account, suite, head_rev, key_count, byte_count FROM suites
                WHERE head_rev > 0 AND (\(account)::text IS NULL OR account = \(account))
                ORDER BY account COLLATE "C", suite
                """,
                logger: storage.logger
            )
            var summaries: [SuiteSummary] = []
            for try await (account, name, head, keys, bytes) in rows.decode((String, String, Int64, Int64, Int64).self) {
                summaries.append(SuiteSummary(account: account, name: name, headRev: UInt64(head), keys: Int(keys), bytes: Int(bytes)))
            }
            return summaries
        }
    }

    package func resetSuite(account: String, suite: String, keys: Bool, audit: AuditRecord?) async throws -> Int? {
        let auditJSON = try audit.map { String(decoding: try AuditRecord.encoder.encode($0), as: UTF8.self) }
        return try await bounded("resetting a suite") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let rows = try await connection.query(
                    "SELECT head_rev, key_count FROM suites WHERE account = \(account) AND suite = \(suite) FOR UPDATE",
                    logger: storage.logger
                )
                var found: (head: Int64, keys: Int64)?
                for try await row in rows.decode((Int64, Int64).self) { found = row }
                guard let found else { return nil }
                for table in ["entries", "history", "batches"] + (keys ? ["key_bags"] : []) {
                    try await connection.query(
                        PostgresQuery(
                            unsafeSQL: "DELETE FROM \(table) WHERE account = $1 AND suite = $2",
                            binds: Self.binds(account, suite)
                        ),
                        logger: storage.logger
                    )
                }
                let head = Int64(clamping: SuiteReset.revision(after: UInt64(max(0, found.head))))
                try await connection.query(
                    """
                    UPDATE suites SET head_rev = \(head), oldest_valid_rev = \(head), reset_rev = \(head), key_count = 0, byte_count = 0,
                        epoch = CASE WHEN \(keys) THEN 0 ELSE epoch END, mode_rev = CASE WHEN \(keys) THEN \(head) ELSE mode_rev END
                    WHERE account = \(account) AND suite = \(suite)
                    """,
                    logger: storage.logger
                )
                let notice = String(
                    decoding: try JSONEncoder().encode(ChangeNotice(account: account, suite: suite, head: UInt64(head))),
                    as: UTF8.self
                )
                if let audit, let auditJSON {
                    try await connection.query(
                        "INSERT INTO audit (time, account, record) VALUES (\(audit.time), \(audit.account), \(auditJSON)::json)",
                        logger: storage.logger
                    )
                }
                try await connection.query("SELECT pg_notify(\(ChangeNotice.channel), \(notice))", logger: storage.logger)
                return Int(found.keys)
            }
        }
    }

    private static func binds(_ account: String, _ suite: String) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(account)
        bindings.append(suite)
        return bindings
    }
}
