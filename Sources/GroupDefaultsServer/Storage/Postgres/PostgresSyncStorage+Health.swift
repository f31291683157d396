import Logging
import NIOCore
import PostgresNIO

// The console's account of the backend's health.
extension PostgresSyncStorage: StorageHealthCheck {
    package func health() async -> StorageHealth {
        let database = "\(router.primary)"
        var checks: [StorageHealth.Check] = []
        do {
            try await bounded("reaching the database") { storage in
                try await storage.client.query("SELECT 1", logger: storage.logger)
            }
            checks.append(.init(name: "database", ok: true, detail: "PostgreSQL at \(database) answers"))
        } catch {
            checks.append(.init(name: "database", ok: false, detail: "PostgreSQL at \(database): \(error)"))
        }
        let listening = listener.isListening
        checks.append(
            .init(
                name: "listening connection",
                ok: listening,
                detail: listening
                    ? "up: changes pushed on other instances wake this one"
                    : "down: reconnecting; other instances' changes are seen when it is back"
            )
        )
        return StorageHealth(backend: "PostgreSQL", checks: checks)
    }
}
