import GroupDefaultsLMDB
import GroupDefaultsWire

// The operator's view of every account's suites, and the operator's reset.
//
// `resetSuite`: the suite's rows in `entries`, `revisions`, `batches` and `history` (all under its
// suite id), and with `keys` in `key-bags` (under its name), are deleted in one write transaction,
// and its record starts again under a new suite id, remembering the reset's revision.
extension LMDBSyncStorage: SuiteAdmin {
    package func suiteSummaries(account: String?) async throws -> [SuiteSummary] {
        let environment = self.environment
        return try await onReadQueue {
            var summaries: [SuiteSummary] = []
            let prefix = account.map(LMDBKeys.accountPrefix) ?? []
            try environment.readTransaction { txn in
                try prefix.withUnsafeBytes { start in
                    try txn.forEach(DB.suites, from: prefix.isEmpty ? nil : start) { key, value in
                        guard key.starts(with: prefix) else { return false }
                        guard let record = SuiteRecord(value), let separator = key.firstIndex(of: 0) else {
                            throw SyncStorageError(.unavailable, "a damaged suite record")
                        }
                        guard record.head > 0 else { return true }
                        summaries.append(
                            SuiteSummary(
                                account: String(decoding: key[..<separator], as: UTF8.self),
                                name: String(decoding: key[(separator + 1)...], as: UTF8.self),
                                headRev: record.head,
                                keys: Int(record.liveKeys),
                                bytes: Int(record.liveBytes)
                            )
                        )
                        return true
                    }
                }
            }
            return summaries
        }
    }

    package func resetSuite(account: String, suite: String, keys: Bool, audit: AuditRecord?) async throws -> Int? {
        let environment = self.environment
        let auditRow = try audit.map(Self.auditRow)
        let suiteKey = LMDBKeys.suiteName(account: account, suite: suite)
        let reset: (keys: Int, head: UInt64)? = try await onWriteQueue {
            var outcome: (keys: Int, head: UInt64)?
            try environment.writeTransaction(sync: true) { txn in
                guard let old = try Self.suiteRecord(txn, suiteKey) else { return }
                let prefix = LMDBKeys.bigEndian(old.id)
                for database in [DB.entries, DB.revisions, DB.batches, DB.history] {
                    try Self.deleteAll(txn, database, prefix: prefix)
                }
                if keys { try Self.deleteAll(txn, DB.keyBags, prefix: suiteKey + [0]) }
                var record = SuiteRecord(id: try Self.allocateSuiteID(txn))
                record.epoch = keys ? 0 : old.epoch
                record.head = SuiteReset.revision(after: old.head)
                record.oldestValid = record.head
                record.resetRev = record.head
                record.modeRev = keys ? record.head : old.modeRev
                try Self.put(txn, DB.suites, suiteKey, record.bytes)
                if let auditRow { try Self.put(txn, DB.audit, auditRow.key, auditRow.json) }
                outcome = (Int(old.liveKeys), record.head)
            }
            return outcome
        }
        guard let reset else { return nil }
        waiters.notify(.init(account: account, suite: suite), head: reset.head)
        return reset.keys
    }

    /// Deletes every row of `database` whose key starts with `prefix`; returns how many.
    @discardableResult
    static func deleteAll(_ txn: LMDBTransaction, _ database: Database, prefix: [UInt8]) throws -> Int {
        var doomed: [[UInt8]] = []
        try prefix.withUnsafeBytes { start in
            try txn.forEach(database, from: start) { key, _ in
                guard key.starts(with: prefix) else { return false }
                doomed.append(Array(key))
                return true
            }
        }
        for key in doomed { try key.withUnsafeBytes { _ = try txn.delete(database, $0) } }
        return doomed.count
    }
}
