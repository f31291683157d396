import Logging
import NIOCore
import PostgresNIO

// The console's records (operators, sessions).
extension PostgresSyncStorage: ConsoleRecordStore {
    package func consoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> [UInt8]? {
        try await bounded("reading a console record") { storage in
            let rows = try await storage.client.query(
                "SELECT value FROM console_records WHERE kind = \(kind.rawValue) AND name = \(name)",
                logger: storage.logger
            )
            for try await value in rows.decode(ByteBuffer.self) { return Array(buffer: value) }
            return nil
        }
    }

    package func consoleRecords(_ kind: ConsoleRecordKind) async throws -> [(name: String, value: [UInt8])] {
        let rows = try await bounded("listing console records") { storage in
            let rows = try await storage.client.query(
                "SELECT name, value FROM console_records WHERE kind = \(kind.rawValue) ORDER BY name COLLATE \"C\"",
                logger: storage.logger
            )
            var records: [ConsoleRecordRow] = []
            for try await (name, value) in rows.decode((String, ByteBuffer).self) {
                records.append(ConsoleRecordRow(name: name, value: Array(buffer: value)))
            }
            return records
        }
        return rows.map { ($0.name, $0.value) }
    }

    package func putConsoleRecord(_ kind: ConsoleRecordKind, name: String, value: [UInt8], onlyIfNew: Bool) async throws -> Bool {
        try await bounded("storing a console record") { storage in
            let rows = try await storage.client.query(
                onlyIfNew
                    ? """
                    INSERT INTO console_records (kind, name, value) VALUES (\(kind.rawValue), \(name), \(ByteBuffer(bytes: value)))
                    ON CONFLICT (kind, name) DO NOTHING RETURNING 1
                    """
                    : """
                    INSERT INTO console_records (kind, name, value) VALUES (\(kind.rawValue), \(name), \(ByteBuffer(bytes: value)))
                    ON CONFLICT (kind, name) DO UPDATE SET value = excluded.value RETURNING 1
                    """,
                logger: storage.logger
            )
            for try await _ in rows { return true }
            return false
        }
    }

    package func deleteConsoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> Bool {
        try await bounded("removing a console record") { storage in
            let rows = try await storage.client.query(
                "DELETE FROM console_records WHERE kind = \(kind.rawValue) AND name = \(name) RETURNING 1",
                logger: storage.logger
            )
            for try await _ in rows { return true }
            return false
        }
    }
}

/// A console record as read (a tuple is not `Sendable`).
private struct ConsoleRecordRow: Sendable {
    var name: String
    var value: [UInt8]
}
