import GroupDefaultsLMDB
import GroupDefaultsWire

// The console's account of the backend's health.
extension LMDBSyncStorage: StorageHealthCheck {
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
}
