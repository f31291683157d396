import GroupDefaultsLMDB
import GroupDefaultsWire

// The console's records (operators, sessions).
extension LMDBSyncStorage: ConsoleRecordStore {
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
