package import GroupDefaultsWire
import Logging
import PostgresNIO

// Key bags: one row per suite and epoch in `key_bags`, its `bundle` column holding the row's
// `StoredKeyBag.storedText`. Each write holds the suite's row (or, for a suite not yet written,
// a lock of the suite's name) while the rule reads what is stored.
extension PostgresSyncStorage: KeyBagStore {
    package func putKeyBag(account: String, suite: String, epoch: UInt32, bag: SignedKeyBag) async throws {
        try await bounded("storing a key bag") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let found = try await Self.lockSuite(connection, account: account, suite: suite, logger: storage.logger)
                let stored = try await Self.keyBags(connection, account: account, suite: suite, logger: storage.logger)
                let (new, row) = try KeyBagRule.put(bag, epoch: epoch, suite: suite, suiteEpoch: found.epoch, stored: stored)
                try await connection.query(
                    "UPDATE suites SET epoch = \(Int64(new)) WHERE account = \(account) AND suite = \(suite)",
                    logger: storage.logger
                )
                try await Self.write([epoch: row], connection, account: account, suite: suite, logger: storage.logger)
                // A rotation after a member's removal, sealed without it, ends the rotation due.
                if let due = try await Self.rotationDue(connection, owner: account, suite: suite, logger: storage.logger),
                    due.isEnded(by: bag, epoch: epoch)
                {
                    try await Self.putRotationDue(connection, owner: account, suite: suite, nil, logger: storage.logger)
                }
            }
        }
    }

    package func anchorKeyBags(account: String, suite: String, anchor: KeyAnchor) async throws {
        try await bounded("anchoring key bags") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let found = try await Self.lockSuite(connection, account: account, suite: suite, logger: storage.logger)
                let stored = try await Self.keyBags(connection, account: account, suite: suite, logger: storage.logger)
                let (rows, newEpoch) = try KeyBagRule.anchor(
                    anchor,
                    suite: suite,
                    suiteEpoch: found.epoch ?? 0,
                    written: found.head > found.modeRev,
                    reset: found.modeRev > 0,
                    stored: stored
                )
                try await Self.write(rows, connection, account: account, suite: suite, logger: storage.logger)
                if let newEpoch {
                    try await connection.query(
                        """
                        INSERT INTO suites (account, suite, epoch) VALUES (\(account), \(suite), \(Int64(newEpoch)))
                        ON CONFLICT (account, suite) DO UPDATE SET epoch = EXCLUDED.epoch
                        """,
                        logger: storage.logger
                    )
                }
            }
        }
    }

    package func keyBags(account: String, suite: String) async throws -> [UInt32: StoredKeyBag] {
        try await bounded("reading key bags") { storage in
            try await storage.client.withConnection { connection in
                try await Self.keyBags(connection, account: account, suite: suite, logger: storage.logger)
            }
        }
    }

    /// The suite's epoch, head and mode revision (nil, 0 and 0 for a suite without a row), its
    /// row locked; and a lock of its name for the transaction, so that two anchors of a new suite
    /// come one at a time.
    private static func lockSuite(
        _ connection: PostgresConnection,
        account: String,
        suite: String,
        logger: Logger
    ) async throws -> (epoch: UInt32?, head: UInt64, modeRev: UInt64) {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(account)), hashtext(\(suite)))", logger: logger)
        let rows = try await connection.query(
            "SELECT epoch, head_rev, mode_rev FROM suites WHERE account = \(account) AND suite = \(suite) FOR UPDATE",
            logger: logger
        )
        var found: (epoch: UInt32?, head: UInt64, modeRev: UInt64) = (nil, 0, 0)
        for try await (epoch, head, modeRev) in rows.decode((Int64, Int64, Int64).self) {
            found = (UInt32(clamping: epoch), UInt64(clamping: head), UInt64(clamping: modeRev))
        }
        return found
    }

    private static func keyBags(
        _ connection: PostgresConnection,
        account: String,
        suite: String,
        logger: Logger
    ) async throws -> [UInt32: StoredKeyBag] {
        let rows = try await connection.query(
            "SELECT epoch, bundle FROM key_bags WHERE account = \(account) AND suite = \(suite)",
            logger: logger
        )
        var bags: [UInt32: StoredKeyBag] = [:]
        for try await (epoch, text) in rows.decode((Int64, String).self) { bags[UInt32(clamping: epoch)] = StoredKeyBag(storedText: text) }
        return bags
    }

    private static func write(
        _ rows: [UInt32: StoredKeyBag],
        _ connection: PostgresConnection,
        account: String,
        suite: String,
        logger: Logger
    ) async throws {
        for (epoch, row) in rows.sorted(by: { $0.key < $1.key }) {
            try await connection.query(
                """
                INSERT INTO key_bags (account, suite, epoch, bundle) VALUES (\(account), \(suite), \(Int64(epoch)), \(row.storedText))
                ON CONFLICT (account, suite, epoch) DO UPDATE SET bundle = EXCLUDED.bundle
                """,
                logger: logger
            )
        }
    }
}
