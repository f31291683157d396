internal import GroupDefaultsLMDB
import Logging

extension SharedDefaults {
    /// One step in the evolution of a suite's settings: a version and the change that brings a
    /// suite from the previous version to it.
    ///
    /// ```swift
    /// let migrations = [
    ///     SharedDefaults.Migration(1, "sound moves under notification.") { tx in
    ///         try tx.renameKey("sound", to: "notification.sound")
    ///     },
    ///     SharedDefaults.Migration(2, "volume becomes a percentage") { tx in
    ///         if case .double(let volume)? = try tx.value(forKey: "volume") {
    ///             try tx.set(.integer(Int((volume * 100).rounded())), forKey: "volume")
    ///         }
    ///     },
    /// ]
    /// try defaults.migrate(migrations)   // at every start, in every process
    /// ```
    public struct Migration: Sendable {
        /// The version the suite has after this step; versions start at 1 and increase.
        public let version: Int
        /// What the step does, for logs and errors.
        public let name: String
        let body: @Sendable (Transaction) throws -> Void

        /// A step to `version`; `body` runs in the write transaction that records the version. Keep
        /// its effects inside that transaction (`tx`): a transaction can be run again before it
        /// commits (when the file grows), and only what it wrote is all or nothing.
        public init(_ version: Int, _ name: String, _ body: @escaping @Sendable (Transaction) throws -> Void) {
            self.version = version
            self.name = name
            self.body = body
        }
    }

    /// The version of the last migration applied to the suite (0 if none).
    public var migrationVersion: Int {
        get throws {
            do {
                return try store.read { txn in Int(try Self.migrationVersion(txn)) }
            } catch {
                throw store.translate(error, key: nil)
            }
        }
    }

    /// Brings the suite to the last version of `migrations`: each step the suite has not had runs
    /// once, in order, in a write transaction of its own that also records its version, so that it
    /// is all or nothing and, however many processes call this at once, runs in exactly one of them
    /// (the others find the version already recorded). Call it at every start, before using the suite.
    ///
    /// - Returns: The versions applied by this call (empty when the suite was up to date).
    /// - Throws: `SharedDefaultsError` (`invalidKey` for versions that do not start at 1 or do not
    ///   increase), or what a step throws: that step and the ones after it are not applied, and the
    ///   next call tries again from it.
    @discardableResult
    public func migrate(_ migrations: [Migration]) throws -> [Int] {
        for (index, migration) in migrations.enumerated() where migration.version <= (index == 0 ? 0 : migrations[index - 1].version) {
            throw store.error(
                .invalidKey,
                key: nil,
                "migration versions must start at 1 and increase: \(migration.version) (\(migration.name)) comes after "
                    + (index == 0 ? "nothing" : "\(migrations[index - 1].version)")
            )
        }
        var applied: [Int] = []
        for migration in migrations {
            let ran = try write { tx -> Bool in
                let current = try tx.perform(key: nil) { try Self.migrationVersion(tx.txn) }
                guard current < UInt64(migration.version) else { return false }
                try migration.body(tx)
                try tx.perform(key: nil) {
                    try withUnsafeBytes(of: UInt64(migration.version).littleEndian) {
                        try tx.txn.put(.meta, MetaKey.migrationVersion, $0)
                    }
                }
                return true
            }
            if ran {
                applied.append(migration.version)
                store.logger.info("migrated \(suiteName) to version \(migration.version): \(migration.name)")
            }
        }
        return applied
    }

    static func migrationVersion(_ txn: LMDBTransaction) throws -> UInt64 {
        guard let raw = try txn.get(.meta, MetaKey.migrationVersion), raw.count == 8 else { return 0 }
        return UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
    }
}

extension SharedDefaults.Transaction {
    /// Moves the value of `old` to `new` (a new write of `new`), unless `new` holds a value
    /// already; `old` is removed either way. Nothing happens when `old` holds none.
    /// For migrations: `try tx.renameKey("sound", to: "notification.sound")`.
    public func renameKey(_ old: String, to new: String) throws {
        guard let moved = try value(forKey: old) else { return }
        if try value(forKey: new) == nil { try set(moved, forKey: new) }
        try removeValue(forKey: old)
    }
}
