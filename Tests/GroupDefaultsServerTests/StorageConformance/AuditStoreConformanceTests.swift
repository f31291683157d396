import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `AuditStore` (the audit log), over every backend.
    @Suite("AuditStore")
    struct AuditStoreConformance: StorageConformance {
        @Test(
            "audit records: kept in time order, filtered by account and time, the last ones to a limit, purged by age",
            arguments: StorageBackend.allCases
        )
        func records(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let start = Date(timeIntervalSince1970: 1_800_000_000)
                func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }
                let records = [
                    AuditRecord(
                        time: at(0),
                        actor: "command line",
                        act: .tokenCreate,
                        account: "alice",
                        target: "token tok_1",
                        source: "command line (user root, uid 0)"
                    ),
                    AuditRecord(time: at(10), actor: "ops", act: .signIn, source: "console, 127.0.0.1"),
                    AuditRecord(time: at(20), actor: "unknown", act: .signInFailed, source: "console, 127.0.0.1", outcome: "failed"),
                    AuditRecord(time: at(30), actor: "ops", act: .accountDelete, account: "bob", source: "console, 127.0.0.1"),
                    AuditRecord(time: at(40), actor: "ops", act: .suiteReset, account: "alice", target: "suite s", source: "console, 127.0.0.1"),
                ]
                // Appended out of order: listed by time.
                for record in records.reversed() { try await storage.appendAudit(record) }
                #expect(try await storage.auditRecords(account: nil, since: nil, limit: 100) == records)
                #expect(try await storage.auditRecords(account: "alice", since: nil, limit: 100) == [records[0], records[4]])
                #expect(try await storage.auditRecords(account: nil, since: at(20), limit: 100) == Array(records[2...]))
                #expect(try await storage.auditRecords(account: nil, since: nil, limit: 2) == Array(records[3...]))
                #expect(try await storage.purgeAudit(olderThan: at(15)) == 2)
                #expect(try await storage.auditRecords(account: nil, since: nil, limit: 100) == Array(records[2...]))
                #expect(try await storage.purgeAudit(olderThan: at(15)) == 0)
            }
        }

        @Test("replacing the audit log: exactly the records given, in time order, two of one time both kept", arguments: StorageBackend.allCases)
        func replace(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let start = Date(timeIntervalSince1970: 1_800_000_000)
                func record(_ seconds: Double, _ act: AuditRecord.Act, _ account: String? = nil) -> AuditRecord {
                    AuditRecord(time: start.addingTimeInterval(seconds), actor: "command line", act: act, account: account, source: "command line")
                }
                try await storage.appendAudit(record(5, .backup))
                let kept = [record(0, .tokenCreate, "alice"), record(10, .tokenRevoke, "alice"), record(10, .accountDelete, "carol")]
                try await storage.replaceAudit(with: kept)
                #expect(Set(try await storage.auditRecords(account: nil, since: nil, limit: 100)) == Set(kept))
                #expect(try await storage.auditRecords(account: nil, since: nil, limit: 100).map(\.time) == kept.map(\.time))
                try await storage.replaceAudit(with: [])
                #expect(try await storage.auditRecords(account: nil, since: nil, limit: 100).isEmpty)
            }
        }
    }
}
