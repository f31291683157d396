import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `ConsoleRecordStore` (the console's operators and sessions), over every backend.
    @Suite("ConsoleRecordStore")
    struct ConsoleRecordStoreConformance: StorageConformance {
        @Test("console records: put (or only if new), read, list by name, delete; kinds apart", arguments: StorageBackend.allCases)
        func consoleRecords(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                #expect(try await storage.consoleRecord(.operator, name: "ada") == nil)
                #expect(try await storage.putConsoleRecord(.operator, name: "ada", value: [1], onlyIfNew: true))
                #expect(try await !storage.putConsoleRecord(.operator, name: "ada", value: [2], onlyIfNew: true))
                #expect(try await storage.consoleRecord(.operator, name: "ada") == [1])
                #expect(try await storage.putConsoleRecord(.operator, name: "ada", value: [3], onlyIfNew: false))
                #expect(try await storage.consoleRecord(.operator, name: "ada") == [3])
                _ = try await storage.putConsoleRecord(.operator, name: "007", value: [4], onlyIfNew: true)
                _ = try await storage.putConsoleRecord(.session, name: "ada", value: [5], onlyIfNew: true)
                let operators = try await storage.consoleRecords(.operator)
                #expect(operators.map(\.name) == ["007", "ada"])
                #expect(operators.map(\.value) == [[4], [3]])
                #expect(try await storage.consoleRecords(.session).map(\.name) == ["ada"])
                #expect(try await storage.deleteConsoleRecord(.operator, name: "ada"))
                #expect(try await !storage.deleteConsoleRecord(.operator, name: "ada"))
                #expect(try await storage.consoleRecord(.session, name: "ada") == [5])
            }
        }
    }
}
