import Foundation
import GroupDefaultsServer
import Logging
import TestSupport

extension PostgresFixture {
    /// A storage instance (a server instance, as far as the database is concerned) on `url`.
    static func storage(url: String) async throws -> PostgresSyncStorage {
        try await PostgresSyncStorage.start(try PostgresStorageConfiguration(url: url), logger: logger)
    }

    static let logger: Logger = {
        var logger = Logger(label: "groupdefaults-server-tests")
        logger.logLevel = .error
        return logger
    }()
}

/// The backends the storage conformance suites (`StorageConformance/`) run against, in process: the embedded LMDB store and PostgreSQL (a throwaway server, a fresh
/// database per test).
extension StorageBackend {
    /// A fresh, empty store, and how to remove it afterwards.
    func make() async throws -> (storage: any ServerStorage, cleanup: @Sendable () -> Void) {
        switch self {
        case .lmdb:
            let fixture = try Fixture()
            let directory = fixture.directory
            return (fixture.storage, { try? FileManager.default.removeItem(at: directory) })
        case .postgres:
            // The database is dropped with the throwaway server.
            return (try await PostgresFixture.storage(url: try await PostgresFixture.freshDatabase()), {})
        }
    }

    /// Runs `body` with a new storage and shuts it down afterwards, also when `body` throws.
    func withStorage(_ body: (any ServerStorage) async throws -> Void) async throws {
        let (storage, cleanup) = try await make()
        defer { cleanup() }
        do {
            try await body(storage)
        } catch {
            try? await storage.shutdown()
            throw error
        }
        try await storage.shutdown()
    }
}
