package import Foundation
import GroupDefaultsWire
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

    package func accountIncarnation(_ account: String) async throws -> String {
        let made = IncarnationID.random()
        return try await bounded("reading an account's incarnation") { storage in
            // Made here if missing (an account of a store from before incarnations); a concurrent
            // first call wins the insert, and both read its row.
            let rows = try await storage.client.query(
                """
                WITH made AS (
                    INSERT INTO account_incarnations (account, id) VALUES (\(account), \(made))
                    ON CONFLICT (account) DO NOTHING RETURNING id
                )
                SELECT id FROM made UNION ALL SELECT id FROM account_incarnations WHERE account = \(account)
                """,
                logger: storage.logger
            )
            for try await id in rows.decode(String.self) { return id }
            throw SyncStorageError(.unavailable, "the incarnation of account \(account) is missing")
        }
    }

    package func deleteAccount(_ account: String, audit: AuditRecord?) async throws -> Bool {
        let auditJSON = try audit.map { String(decoding: try AuditRecord.encoder.encode($0), as: UTF8.self) }
        return try await bounded("deleting an account") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let rows = try await connection.query("SELECT suite FROM suites WHERE account = \(account)", logger: storage.logger)
                var suites: [String] = []
                for try await suite in rows.decode(String.self) { suites.append(suite) }
                var found = !suites.isEmpty
                // Tokens and the incarnation first: the order in which a push locks them (FOR KEY SHARE)
                // before its suite's row (`GroupWriteStatement`).
                for table in ["tokens", "account_incarnations", "entries", "history", "batches", "key_bags", "devices", "suites"] {
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
                if let audit, let auditJSON {
                    try await connection.query(
                        "INSERT INTO audit (time, account, record) VALUES (\(audit.time), \(audit.account), \(auditJSON)::json)",
                        logger: storage.logger
                    )
                }
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
        guard AuditRepeats.applies(to: record) else {
            try await bounded("recording an administrative act") { storage in
                try await storage.client.query(
                    "INSERT INTO audit (time, account, record) VALUES (\(record.time), \(record.account), \(json)::json)",
                    logger: storage.logger
                )
            }
            return
        }
        // A token's act: counted with the acts like it of the window (`AuditRepeats`), under a
        // lock of the token's, in the transaction that writes it.
        let since = AuditRepeats.windowStart(before: record.time)
        let actor = record.actor
        let act = record.act.rawValue
        try await bounded("recording an administrative act") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext('audit'), hashtext(\(actor)))", logger: storage.logger)
                let rows = try await connection.query(
                    """
                    SELECT id, record::text FROM audit
                    WHERE time >= \(since) AND record->>'actor' = \(actor) AND record->>'act' = \(act) ORDER BY time, id
                    """,
                    logger: storage.logger
                )
                var recent: [(id: Int64, record: AuditRecord)] = []
                for try await (id, text) in rows.decode((Int64, String).self) {
                    let held = try AuditRecord.decoder.decode(AuditRecord.self, from: Data(text.utf8))
                    if AuditRepeats.isLike(held, record) { recent.append((id, held)) }
                }
                switch AuditRepeats.decide(record, recent: recent.map(\.record)) {
                case .append(let written):
                    let text = String(decoding: try AuditRecord.encoder.encode(written), as: UTF8.self)
                    try await connection.query(
                        "INSERT INTO audit (time, account, record) VALUES (\(written.time), \(written.account), \(text)::json)",
                        logger: storage.logger
                    )
                case .replace(let index, let counted):
                    let text = String(decoding: try AuditRecord.encoder.encode(counted), as: UTF8.self)
                    try await connection.query("UPDATE audit SET record = \(text)::json WHERE id = \(recent[index].id)", logger: storage.logger)
                }
            }
        }
    }

    package func auditRecords(account: String?, since: Date?, before: Date?, limit: Int) async throws -> [AuditRecord] {
        let since = since ?? Date(timeIntervalSince1970: 0)
        let before = before ?? Date.distantFuture
        let limit = max(limit, 0)
        let texts = try await bounded("reading the audit log") { storage in
            let rows = try await storage.client.query(
                """
                SELECT record::text FROM (
                    SELECT id, time, record FROM audit
                    WHERE time >= \(since) AND time < \(before) AND (\(account)::text IS NULL OR account = \(account))
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
