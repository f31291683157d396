import GroupDefaultsServer
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `StorageHealthCheck` (what the console's overview shows of the backend), over every backend.
    @Suite("StorageHealthCheck")
    struct StorageHealthCheckConformance: StorageConformance {
        @Test("health: the backend's name and checks, all well on a working store", arguments: StorageBackend.allCases)
        func health(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                // The listening connection is one of PostgreSQL's checks: up once it listens.
                if let postgres = storage as? PostgresSyncStorage { await postgres.waitUntilListening() }
                let health = await storage.health()
                #expect(health.backend == (backend == .lmdb ? "embedded LMDB" : "PostgreSQL"))
                #expect(!health.checks.isEmpty)
                #expect(health.checks.allSatisfy { $0.ok }, "\(health.checks)")
            }
        }
    }
}
