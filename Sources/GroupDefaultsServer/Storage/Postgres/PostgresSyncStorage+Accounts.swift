package import Foundation
import Logging
import NIOCore
import PostgresNIO

// Deleting an account: one transaction deletes its rows from every table that has an account
// column, and its pairings (whose account is inside their record); the tokens table's trigger
// announces the change to every instance's token cache (migration 4), and a change notice per
// suite wakes the streams waiting on them, which then re-check their token.
extension PostgresSyncStorage: AccountStore {
    package func pairings(account: String) async throws -> [StoredPairing] {
        let texts = try await bounded("listing an account's pairings") { storage in
            let rows = try await storage.client.query(
                "SELECT record::text FROM pairings WHERE record->>'account' = \(account)",
                logger: storage.logger
            )
            var texts: [String] = []
            for try await text in rows.decode(String.self) { texts.append(text) }
            return texts
        }
        return try texts.map { try JSONDecoder().decode(StoredPairing.self, from: Data($0.utf8)) }.sorted { $0.created < $1.created }
    }

    package func deleteAccount(_ account: String) async throws -> Bool {
        try await bounded("deleting an account") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let rows = try await connection.query("SELECT suite FROM suites WHERE account = \(account)", logger: storage.logger)
                var suites: [String] = []
                for try await suite in rows.decode(String.self) { suites.append(suite) }
                var found = !suites.isEmpty
                for table in ["entries", "history", "batches", "key_bags", "devices", "suites", "tokens"] {
                    var binds = PostgresBindings(capacity: 1)
                    binds.append(account)
                    // Static table names: nothing from outside.
                    let deleted = try await connection.query(
                        PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE account = $1 RETURNING 1", binds: binds),
                        logger: storage.logger
                    )
                    for try await _ in deleted { found = true }
                }
                let pairings = try await connection.query(
                    "DELETE FROM pairings WHERE record->>'account' = \(account) RETURNING 1",
                    logger: storage.logger
                )
                for try await _ in pairings { found = true }
                if try await Self.deleteSharing(account: account, on: connection, logger: storage.logger) { found = true }
                guard found else { return false }
                for suite in suites {
                    let notice = String(
                        decoding: try JSONEncoder().encode(ChangeNotice(account: account, suite: suite, head: UInt64(Int64.max))),
                        as: UTF8.self
                    )
                    try await connection.query("SELECT pg_notify(\(ChangeNotice.channel), \(notice))", logger: storage.logger)
                }
                return true
            }
        }
    }
}

// The audit log: one row per record, its time and account as columns for the queries.
extension PostgresSyncStorage: AuditStore {
    package func appendAudit(_ record: AuditRecord) async throws {
        let json = String(decoding: try AuditRecord.encoder.encode(record), as: UTF8.self)
        try await bounded("recording an administrative act") { storage in
            try await storage.client.query(
                "INSERT INTO audit (time, account, record) VALUES (\(record.time), \(record.account), \(json)::json)",
                logger: storage.logger
            )
        }
    }

    package func auditRecords(account: String?, since: Date?, limit: Int) async throws -> [AuditRecord] {
        let since = since ?? Date(timeIntervalSince1970: 0)
        let limit = max(limit, 0)
        let texts = try await bounded("reading the audit log") { storage in
            let rows = try await storage.client.query(
                """
                SELECT record::text FROM (
                    SELECT id, time, record FROM audit WHERE time >= \(since) AND (\(account)::text IS NULL OR account = \(account))
                    ORDER BY time DESC, id DESC LIMIT \(limit)
                ) AS last ORDER BY time, id
                """,
                logger: storage.logger
            )
            var texts: [String] = []
            for try await text in rows.decode(String.self) { texts.append(text) }
            return texts
        }
        return try texts.map { try AuditRecord.decoder.decode(AuditRecord.self, from: Data($0.utf8)) }
    }

    package func replaceAudit(with records: [AuditRecord]) async throws {
        let rows = try records.map { ($0, String(decoding: try AuditRecord.encoder.encode($0), as: UTF8.self)) }
        try await bounded("replacing the audit log") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                try await connection.query("DELETE FROM audit", logger: storage.logger)
                // In order: the id keeps records of one time in the order given.
                for (record, json) in rows {
                    try await connection.query(
                        "INSERT INTO audit (time, account, record) VALUES (\(record.time), \(record.account), \(json)::json)",
                        logger: storage.logger
                    )
                }
            }
        }
    }

    package func purgeAudit(olderThan horizon: Date) async throws -> Int {
        try await bounded("purging the audit log") { storage in
            let rows = try await storage.client.query("DELETE FROM audit WHERE time < \(horizon) RETURNING 1", logger: storage.logger)
            var removed = 0
            for try await _ in rows { removed += 1 }
            return removed
        }
    }
}
