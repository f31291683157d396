/// The storage backend's health as the console shows it: which backend, and each check.
package struct StorageHealth: Sendable, Hashable {
    /// One thing checked: what, whether it is well, and what was seen.
    package struct Check: Sendable, Hashable {
        package var name: String
        package var ok: Bool
        package var detail: String

        package init(name: String, ok: Bool, detail: String) {
            self.name = name
            self.ok = ok
            self.detail = detail
        }
    }

    /// "embedded LMDB" or "PostgreSQL".
    package var backend: String
    package var checks: [Check]

    package init(backend: String, checks: [Check]) {
        self.backend = backend
        self.checks = checks
    }
}

/// The backend's own account of its health (the console's overview).
package protocol StorageHealthCheck: Sendable {
    /// What the backend can tell of its health now; never throws.
    func health() async -> StorageHealth
}
