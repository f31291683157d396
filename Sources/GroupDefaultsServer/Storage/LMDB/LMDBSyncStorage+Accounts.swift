package import Foundation
import GroupDefaultsLMDB
import GroupDefaultsWire

// Deleting an account, in one write transaction: its suites' rows (under each suite's id, as a
// reset deletes them) and records, then the rows keyed by its name (`key-bags`, `devices`), then
// those that only name it inside (`tokens` with their hash index, `pairings` with their indexes),
// and its place in shared suites (its memberships, and its own suites' members and invitations).
// Their bytes stay in the file's free space until the store is rebuilt: the delete leaves an erase
// pending first (`LMDBErase`).
extension LMDBSyncStorage: AccountStore {
    package func pairings(account: String) async throws -> [StoredPairing] {
        let environment = self.environment
        return try await onReadQueue {
            var pairings: [StoredPairing] = []
            try environment.readTransaction { txn in
                try txn.forEach(DB.pairings) { key, value in
                    // The index rows (`x/…`, `t/…`) beside the records are not pairings.
                    if !key.starts(with: Array("x/".utf8)), !key.starts(with: Array("t/".utf8)) {
                        let pairing = try JSONDecoder().decode(StoredPairing.self, from: Data(value))
                        if pairing.account.isSameName(as: account) { pairings.append(pairing) }
                    }
                    return true
                }
            }
            return pairings.sorted { $0.created < $1.created }
        }
    }

    package func accountIncarnation(_ account: String) async throws -> String {
        let environment = self.environment
        let key = LMDBKeys.accountPrefix(account)
        let held: [UInt8]? = try await onReadQueue {
            var held: [UInt8]?
            try environment.readTransaction { txn in held = try Self.get(txn, DB.accountIncarnations, key) }
            return held
        }
        if let held { return String(decoding: held, as: UTF8.self) }
        return try await onWriteQueue {
            var made = ""
            try environment.writeTransaction(sync: true) { txn in made = try Self.makeAccountIncarnationIfNew(txn, account) }
            return made
        }
    }

    /// The account's incarnation, made in `txn` if it has none (its first token, or an account of
    /// a store from before incarnations).
    @discardableResult
    static func makeAccountIncarnationIfNew(_ txn: LMDBTransaction, _ account: String) throws -> String {
        let key = LMDBKeys.accountPrefix(account)
        if let held = try get(txn, DB.accountIncarnations, key) { return String(decoding: held, as: UTF8.self) }
        let made = IncarnationID.random()
        try put(txn, DB.accountIncarnations, key, Array(made.utf8))
        return made
    }

    package func deleteAccount(_ account: String, audit: AuditRecord?) async throws -> Bool {
        let environment = self.environment
        let prefix = LMDBKeys.accountPrefix(account)
        let directory = self.directory
        let auditRow = try audit.map(Self.auditRow)
        let marked = try LMDBErase.markPending(in: directory)
        InterruptionPoint.reached("accounts-delete.erase-marked")
        let deleted: (found: Bool, suites: [String], shared: [(owner: String, suite: String)])? = try await onWriteQueue {
            var outcome: (found: Bool, suites: [String], shared: [(owner: String, suite: String)])?
            try environment.writeTransaction(sync: true) { txn in
                var suites: [(key: [UInt8], record: SuiteRecord)] = []
                try prefix.withUnsafeBytes { start in
                    try txn.forEach(DB.suites, from: start) { key, value in
                        guard key.starts(with: prefix) else { return false }
                        guard let record = SuiteRecord(value) else { throw SyncStorageError(.unavailable, "a damaged suite record") }
                        suites.append((Array(key), record))
                        return true
                    }
                }
                var found = !suites.isEmpty
                for suite in suites {
                    for database in [DB.entries, DB.revisions, DB.batches, DB.history] {
                        try Self.deleteAll(txn, database, prefix: LMDBKeys.bigEndian(suite.record.id))
                    }
                    try Self.delete(txn, DB.suites, suite.key)
                }
                for database in [DB.keyBags, DB.devices] {
                    if try Self.deleteAll(txn, database, prefix: prefix) > 0 { found = true }
                }
                var tokens: [StoredToken] = []
                try txn.forEach(DB.tokens) { _, value in
                    let token = try JSONDecoder().decode(StoredToken.self, from: Data(value))
                    if token.account.isSameName(as: account) { tokens.append(token) }
                    return true
                }
                for token in tokens {
                    try Self.delete(txn, DB.tokens, Array(token.id.utf8))
                    try Self.delete(txn, DB.tokenHashes, Array(token.hash.utf8))
                }
                if try Self.deletePairings(txn, account: account) { found = true }
                let shared = try Self.deleteSharing(txn, account: account)
                if !shared.isEmpty { found = true }
                // The name's incarnation goes with it: a token made for the name later makes a new one.
                let incarnation = try LMDBKeys.accountPrefix(account).withUnsafeBytes { try txn.delete(DB.accountIncarnations, $0) }
                if !tokens.isEmpty || incarnation {
                    found = true
                    try Self.bumpTokenGeneration(txn)  // also what a server's cache of incarnations follows
                }
                if found, let auditRow { try Self.put(txn, DB.audit, auditRow.key, auditRow.json) }
                outcome = found ? (true, suites.map { String(decoding: $0.key.dropFirst(prefix.count), as: UTF8.self) }, shared) : nil
            }
            return outcome
        }
        guard let deleted else {
            if marked { LMDBErase.clearMark(in: directory) }  // nothing was deleted: nothing to erase
            return false
        }
        // Streams on the account's suites wake now and re-check their token, which is gone.
        for suite in deleted.suites { waiters.notify(.init(account: account, suite: suite), head: .max) }
        // And the streams of the suites it shared or was a member of re-check their access.
        for suite in deleted.shared { waiters.notify(.init(account: suite.owner, suite: suite.suite), head: .max) }
        return true
    }

    /// Deletes the account's pairings and their index rows (`LMDBSyncStorage+Pairings.swift`: each
    /// index row ends with the pairing's lookup). Returns whether there were any.
    private static func deletePairings(_ txn: LMDBTransaction, account: String) throws -> Bool {
        var lookups: Set<[UInt8]> = []
        try txn.forEach(DB.pairings) { key, value in
            if !key.starts(with: Array("x/".utf8)), !key.starts(with: Array("t/".utf8)),
                let pairing = try? JSONDecoder().decode(StoredPairing.self, from: Data(value)), pairing.account.isSameName(as: account)
            {
                lookups.insert(Array(key))
            }
            return true
        }
        guard !lookups.isEmpty else { return false }
        var doomed: [[UInt8]] = []
        try txn.forEach(DB.pairings) { key, _ in
            let bytes = Array(key)
            if lookups.contains(where: { bytes.count >= $0.count && Array(bytes.suffix($0.count)) == $0 }) { doomed.append(bytes) }
            return true
        }
        for key in doomed { try delete(txn, DB.pairings, key) }
        return true
    }
}

// The audit log, in `audit`: time (ms, big-endian) + 8 random bytes → `AuditRecord` JSON, so that
// the records are in time order and the purge deletes from the front.
extension LMDBSyncStorage: AuditStore {
    package func appendAudit(_ record: AuditRecord) async throws {
        let environment = self.environment
        let (key, json) = try Self.auditRow(record)
        guard AuditRepeats.applies(to: record) else {
            try await onWriteQueue {
                try environment.writeTransaction(sync: true) { txn in try Self.put(txn, DB.audit, key, json) }
            }
            return
        }
        // A token's act: counted with the acts like it of the window (`AuditRepeats`), in the
        // transaction that writes it.
        let start = LMDBKeys.bigEndian(Self.milliseconds(AuditRepeats.windowStart(before: record.time)))
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                var recent: [(key: [UInt8], record: AuditRecord)] = []
                try start.withUnsafeBytes { start in
                    try txn.forEach(DB.audit, from: start) { key, value in
                        let held = try AuditRecord.decoder.decode(AuditRecord.self, from: Data(value))
                        if AuditRepeats.isLike(held, record) { recent.append((Array(key), held)) }
                        return true
                    }
                }
                switch AuditRepeats.decide(record, recent: recent.map(\.record)) {
                case .append(let written):
                    try Self.put(txn, DB.audit, key, Array(try AuditRecord.encoder.encode(written)))
                case .replace(let index, let counted):
                    try Self.put(txn, DB.audit, recent[index].key, Array(try AuditRecord.encoder.encode(counted)))
                }
            }
        }
    }

    package func replaceAudit(with records: [AuditRecord]) async throws {
        let environment = self.environment
        let rows = try records.map(Self.auditRow)
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                try txn.empty(DB.audit)
                for (key, json) in rows { try Self.put(txn, DB.audit, key, json) }
            }
        }
    }

    /// A record's key (its time, then random bytes: records of one millisecond all stay) and value.
    static func auditRow(_ record: AuditRecord) throws -> (key: [UInt8], json: [UInt8]) {
        let key = LMDBKeys.bigEndian(milliseconds(record.time)) + LMDBKeys.bigEndian(UInt64.random(in: 0...UInt64.max))
        return (key, Array(try AuditRecord.encoder.encode(record)))
    }

    package func auditRecords(account: String?, since: Date?, before: Date?, limit: Int) async throws -> [AuditRecord] {
        let environment = self.environment
        let start = LMDBKeys.bigEndian(since.map(Self.milliseconds) ?? 0)
        // Compared as it is: a page's bound is half a millisecond off a record's (`auditPage`).
        let end = before.map { $0.timeIntervalSince1970 * 1000 } ?? .infinity
        return try await onReadQueue {
            var records: [AuditRecord] = []
            try environment.readTransaction { txn in
                try start.withUnsafeBytes { start in
                    try txn.forEach(DB.audit, from: start) { key, value in
                        guard key.count < 8 || Double(LMDBKeys.readBigEndian(key)) < end else { return false }
                        let record = try AuditRecord.decoder.decode(AuditRecord.self, from: Data(value))
                        if account.map({ record.account.isSameName(as: $0) }) ?? true { records.append(record) }
                        return true
                    }
                }
            }
            return Array(records.suffix(max(limit, 0)))
        }
    }

    package func purgeAudit(olderThan horizon: Date) async throws -> Int {
        let environment = self.environment
        let limit = Self.milliseconds(horizon)
        return try await onWriteQueue {
            var removed = 0
            try environment.writeTransaction(sync: true) { txn in
                removed = 0
                try txn.deleteLeading(DB.audit) { key in
                    guard key.count == 16, LMDBKeys.readBigEndian(key) < limit else { return false }
                    removed += 1
                    return true
                }
            }
            return removed
        }
    }

    /// A record's millisecond: rounded, as records are made at whole milliseconds (`AuditRecord`).
    private static func milliseconds(_ date: Date) -> UInt64 {
        UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded()))
    }
}
