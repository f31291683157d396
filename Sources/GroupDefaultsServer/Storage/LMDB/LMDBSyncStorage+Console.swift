import GroupDefaultsLMDB
import GroupDefaultsWire

// The console's view (suites of every account, health) and its records (operators, sessions).
extension LMDBSyncStorage {
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

    package func health() async -> StorageHealth {
        let environment = self.environment
        let check: StorageHealth.Check
        do {
            try await onReadQueue { try environment.readTransaction { _ in } }
            check = .init(name: "store", ok: true, detail: "sync.lmdb is open and readable")
        } catch {
            check = .init(name: "store", ok: false, detail: "\(error)")
        }
        return StorageHealth(backend: "embedded LMDB", checks: [check])
    }

    static func consoleKey(_ kind: ConsoleRecordKind, _ name: String) -> [UInt8] {
        Array(kind.rawValue.utf8) + [0] + Array(name.utf8)
    }

    package func consoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> [UInt8]? {
        let environment = self.environment
        return try await onReadQueue {
            var value: [UInt8]?
            try environment.readTransaction { txn in value = try Self.get(txn, DB.console, Self.consoleKey(kind, name)) }
            return value
        }
    }

    package func consoleRecords(_ kind: ConsoleRecordKind) async throws -> [(name: String, value: [UInt8])] {
        let environment = self.environment
        let prefix = Self.consoleKey(kind, "")
        let records = try await onReadQueue {
            var records: [ConsoleRecordRow] = []
            try environment.readTransaction { txn in
                try prefix.withUnsafeBytes { start in
                    try txn.forEach(DB.console, from: start) { key, value in
                        guard key.starts(with: prefix) else { return false }
                        records.append(ConsoleRecordRow(name: String(decoding: key.dropFirst(prefix.count), as: UTF8.self), value: Array(value)))
                        return true
                    }
                }
            }
            return records
        }
        return records.map { ($0.name, $0.value) }
    }

    package func putConsoleRecord(_ kind: ConsoleRecordKind, name: String, value: [UInt8], onlyIfNew: Bool) async throws -> Bool {
        let environment = self.environment
        return try await onWriteQueue {
            var stored = false
            try environment.writeTransaction(sync: true) { txn in
                let key = Self.consoleKey(kind, name)
                if onlyIfNew, try Self.get(txn, DB.console, key) != nil { return }
                try Self.put(txn, DB.console, key, value)
                stored = true
            }
            return stored
        }
    }

    package func deleteConsoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> Bool {
        let environment = self.environment
        return try await onWriteQueue {
            var deleted = false
            try environment.writeTransaction(sync: true) { txn in
                let key = Self.consoleKey(kind, name)
                guard try Self.get(txn, DB.console, key) != nil else { return }
                try Self.delete(txn, DB.console, key)
                deleted = true
            }
            return deleted
        }
    }
}

/// A console record read off the read queue (a tuple is not `Sendable`).
private struct ConsoleRecordRow: Sendable {
    var name: String
    var value: [UInt8]
}
