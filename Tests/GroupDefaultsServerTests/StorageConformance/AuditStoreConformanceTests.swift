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

        @Test(
            "paging back through the log shows every record once, oldest first, records of one millisecond never split across pages",
            arguments: StorageBackend.allCases
        )
        func pages(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let start = Date(timeIntervalSince1970: 1_800_000_000)
                // 23 records, in groups of three sharing one millisecond (the last group, two).
                let records = (0..<23).map { (n: Int) -> AuditRecord in
                    let offset: TimeInterval = Double(n / 3) / 1000 + Double(n % 3) / 10_000
                    return AuditRecord(
                        time: start.addingTimeInterval(offset),
                        actor: "command line",
                        act: .tokenCreate,
                        account: n % 2 == 0 ? "alice" : "bob",
                        target: "token tok_\(n)",
                        source: "command line"
                    )
                }
                for record in records { try await storage.appendAudit(record) }
                var seen: [AuditRecord] = []
                var before: Date?
                var pages = 0
                repeat {
                    let page = try await storage.auditPage(account: nil, since: nil, before: before, limit: 5)
                    #expect(!page.records.isEmpty && page.records.count <= 5)
                    seen = page.records + seen
                    before = page.earlier
                    pages += 1
                } while before != nil && pages < 20
                // Every record once, in time order (within a millisecond, in any order).
                #expect(seen.count == records.count && Set(seen.map(\.target)) == Set(records.map(\.target)), "\(seen.map(\.target))")
                let milliseconds = seen.map { Int64(($0.time.timeIntervalSince1970 * 1000).rounded(.down)) }
                #expect(milliseconds == milliseconds.sorted())
                let lastPage = try await storage.auditPage(account: "bob", since: nil, before: nil, limit: 100)
                #expect(Set(lastPage.records.map(\.target)) == Set(records.filter { $0.account == "bob" }.map(\.target)) && lastPage.earlier == nil)
            }
        }

        @Test(
            "one token's invitations for write to one suite are recorded 20 times per 10 minutes, the rest counted in one record; its invitations to another suite, for another role, from another address, and admin invitations, members removed and others' acts one by one",
            arguments: StorageBackend.allCases
        )
        func repeats(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let start = Date()
                func act(
                    _ n: Int,
                    by actor: String = "token tok_flood",
                    _ act: AuditRecord.Act = .invitationCreate,
                    suite: String = "junk",
                    role: SuiteRole = .write,
                    from source: String = "127.0.0.1"
                ) -> AuditRecord {
                    AuditRecord(
                        time: start.addingTimeInterval(Double(n) / 1000),
                        actor: actor,
                        act: act,
                        account: "alice",
                        target: "inv_\(n) (\(role.rawValue)) of suite \(suite)",
                        source: source,
                        invitation: AuditInvitation(id: "inv_\(n)", suite: suite, role: role)
                    )
                }
                for n in 0..<50 { try await storage.appendAudit(act(n)) }
                // After the flood, acts alike in all but one thing, and acts of consequence.
                let distinct = [
                    act(60, suite: "payroll"), act(61, role: .admin), act(62, role: .admin, from: "192.0.2.7"),
                    act(63, suite: "payroll", role: .admin), act(64, role: .read), act(65, from: "2001:db8:0:2::1"),
                    act(66, by: "token tok_other"), act(67, .invitationRevoke, suite: "payroll", role: .admin),
                ]
                for record in distinct { try await storage.appendAudit(record) }
                // From one IPv6 /64, many addresses: alike.
                for n in 0..<25 { try await storage.appendAudit(act(100 + n, .invitationRevoke, from: "2001:db8:0:1::\(n + 1)")) }
                for n in 0..<25 { try await storage.appendAudit(act(200 + n, by: "ops", .tokenRevoke)) }
                for n in 0..<25 {
                    var removal = act(300 + n, .memberRemove)
                    removal.invitation = nil
                    removal.target = "member m\(n) of suite junk"
                    try await storage.appendAudit(removal)
                }
                let all = try await storage.auditRecords(account: nil, since: nil, limit: 1000)
                let flood = all.filter {
                    $0.actor == "token tok_flood" && $0.act == .invitationCreate && $0.source == "127.0.0.1"
                        && $0.target?.hasSuffix("(write) of suite junk") == true
                }
                #expect(flood.count == AuditRepeats.individually + 1)
                #expect(flood.prefix(AuditRepeats.individually).allSatisfy { $0.repeats == nil })
                let counted = try #require(flood.last)
                #expect(counted.repeats == 50 - AuditRepeats.individually && counted.target == "inv_20 (write) of suite junk")
                #expect(counted.until.map { abs($0.timeIntervalSince(start.addingTimeInterval(0.049))) < 0.002 } == true)
                #expect(counted.outcome?.hasPrefix("repeated: 30 like it from then until ") == true, "\(counted.outcome ?? "")")
                for record in distinct {
                    let kept = all.filter { $0.target == record.target && $0.act == record.act && $0.source == record.source }
                    let what = "\(record.act) \(record.target ?? "") from \(record.source)"
                    #expect(kept.count == 1 && kept.first?.repeats == nil, "\(what) stays visible on its own")
                }
                let revokes = all.filter { $0.act == .invitationRevoke && $0.source.hasPrefix("2001:db8:0:1::") }
                #expect(revokes.count == AuditRepeats.individually + 1 && revokes.last?.repeats == 5, "one /64's addresses are alike")
                #expect(all.filter { $0.actor == "ops" }.count == 25, "an operator's acts are recorded one by one")
                #expect(all.filter { $0.act == .memberRemove }.count == 25, "members removed are recorded one by one")
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
