import GroupDefaultsLMDB

// The storage's incarnation: `meta`'s `incarnation` key, made with the store and replaced by a
// restore (`LMDBBackup.restore`), which writes it into the restored copy before it is put in place.
extension LMDBSyncStorage: StorageIncarnation {
    static let incarnationKey = Array("incarnation".utf8)

    package func incarnation() async throws -> String {
        let environment = self.environment
        let held: String? = try await onReadQueue {
            var held: String?
            try environment.readTransaction { txn in
                held = try Self.get(txn, DB.meta, Self.incarnationKey).map { String(decoding: $0, as: UTF8.self) }
            }
            return held
        }
        if let held { return held }
        return try await onWriteQueue {
            var made = IncarnationID.random()
            try environment.writeTransaction(sync: true) { txn in
                if let held = try Self.get(txn, DB.meta, Self.incarnationKey) {
                    made = String(decoding: held, as: UTF8.self)  // another process made it first
                } else {
                    try Self.put(txn, DB.meta, Self.incarnationKey, Array(made.utf8))
                }
            }
            return made
        }
    }

    package func renewIncarnation() async throws -> String {
        let environment = self.environment
        let made = IncarnationID.random()
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in try Self.put(txn, DB.meta, Self.incarnationKey, Array(made.utf8)) }
        }
        return made
    }
}
