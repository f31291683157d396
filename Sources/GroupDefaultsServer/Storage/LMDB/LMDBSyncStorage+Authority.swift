import GroupDefaultsLMDB
import GroupDefaultsWire

// A restore's staged copy takes the present store's authority (`StoredTables`): every authority
// database copied record by record over the backup's, in one write transaction, then each suite's
// key state (`SuiteKeyState`), the console's sessions ended and the token generation moved on.
extension LMDBSyncStorage {
    /// Replaces this store's authority (the backup's, in a restore's staged copy) with `present`'s.
    /// Returns how many authority records were copied.
    func takeAuthority(from present: LMDBSyncStorage) async throws -> Int {
        let environment = self.environment
        let presentEnvironment = present.environment
        let databases = try StoredTables.lmdb(.authority).map { name in
            guard let index = DB.names.firstIndex(of: name) else {
                throw SyncStorageError(.unavailable, "the store has no database \(name)")
            }
            return Database(index)
        }
        return try await onWriteQueue {
            var copied = 0
            try environment.writeTransaction(sync: true) { txn in
                try presentEnvironment.readTransaction { presentTxn in
                    for database in databases {
                        try txn.empty(database)
                        try presentTxn.forEach(database) { key, value in
                            try txn.put(database, key, value)
                            copied += 1
                            return true
                        }
                    }
                    try Self.takeSuiteKeyStates(txn, from: presentTxn)
                }
                let sessionPrefix = Self.consoleKey(.session, "")
                var sessions: [[UInt8]] = []
                try txn.forEach(DB.console) { key, _ in
                    if key.starts(with: sessionPrefix) { sessions.append(Array(key)) }
                    return true
                }
                for session in sessions { try Self.delete(txn, DB.console, session) }
                try Self.bumpTokenGeneration(txn)
            }
            return copied
        }
    }

    /// Each suite's key state follows the key bags, which are authority: a suite the present store
    /// holds takes its epoch from there (so a rotation made since the backup stays, and the removed
    /// member it left out stays out); one whose keys an operator's reset forgot since the backup
    /// has its mode decided again by its next push, as after that reset. A suite the present store
    /// does not hold keeps the backup's. An encrypted suite made since the backup (its key bags
    /// kept, its data not in the backup) gets an empty record at its epoch, so that its devices
    /// upload what they hold under the epoch they have.
    private static func takeSuiteKeyStates(_ txn: LMDBTransaction, from presentTxn: LMDBTransaction) throws {
        var updates: [([UInt8], SuiteRecord)] = []
        try txn.forEach(DB.suites) { key, value in
            guard var record = SuiteRecord(value), let presentValue = try presentTxn.get(DB.suites, key),
                let present = SuiteRecord(presentValue)
            else { return true }
            let forgotten = present.epoch == 0 && record.epoch != 0
            record.epoch = present.epoch
            if forgotten { record.modeRev = record.head }
            updates.append((Array(key), record))
            return true
        }
        try presentTxn.forEach(DB.suites) { key, value in
            guard let present = SuiteRecord(value), present.epoch != 0, try txn.get(DB.suites, key) == nil else { return true }
            var record = SuiteRecord(id: try allocateSuiteID(txn))
            record.epoch = present.epoch
            updates.append((Array(key), record))
            return true
        }
        for (key, record) in updates { try put(txn, DB.suites, key, record.bytes) }
    }
}

extension LMDBSyncStorage {
    /// Every account's incarnation the store holds (`account-incarnations`), for a restore to
    /// tell which accounts were deleted since the backup (`KeptAuthority.deleteAgain`).
    func accountIncarnations() async throws -> [(account: String, id: String)] {
        let environment = self.environment
        return try await onReadQueue {
            var incarnations: [(account: String, id: String)] = []
            try environment.readTransaction { txn in
                try txn.forEach(DB.accountIncarnations) { key, value in
                    // account + NUL → id
                    incarnations.append((String(decoding: key.dropLast(), as: UTF8.self), String(decoding: value, as: UTF8.self)))
                    return true
                }
            }
            return incarnations
        }
    }
}
