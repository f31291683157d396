package import Foundation
package import GroupDefaultsWire
import Logging
import PostgresNIO

// Shared suites (migration 10): `members`, one row per membership with its record as JSON, and
// `invitations`, filed under their lookup, with the time each ended (or ends) as a column for the
// purge. Accepting locks the invitation's row, so one invitation makes one member. Migration 12:
// `rotations_due`, one row per suite with its `KeyRotationDue` as JSON, written and read under the
// suite's advisory lock (the one its key bags take).
extension PostgresSyncStorage: SharingStore {
    package func member(owner: String, suite: String, account: String) async throws -> StoredMember? {
        try await bounded("reading a membership") { storage in
            try await storage.decodeAll(
                StoredMember.self,
                "SELECT record::text FROM members WHERE owner = \(owner) AND suite = \(suite) AND account = \(account)"
            ).first
        }
    }

    package func members(owner: String, suite: String) async throws -> [StoredMember] {
        try await bounded("reading members") { storage in
            try await storage.decodeAll(
                StoredMember.self,
                "SELECT record::text FROM members WHERE owner = \(owner) AND suite = \(suite) ORDER BY account"
            )
        }
    }

    package func hasMembers(owner: String, suite: String) async throws -> Bool {
        try await bounded("reading members") { storage in
            let rows = try await storage.client.query(
                "SELECT EXISTS (SELECT 1 FROM members WHERE owner = \(owner) AND suite = \(suite))",
                logger: storage.logger
            )
            for try await exists in rows.decode(Bool.self) { return exists }
            return false
        }
    }

    package func memberships(account: String) async throws -> [StoredMember] {
        try await bounded("reading memberships") { storage in
            try await storage.decodeAll(
                StoredMember.self,
                "SELECT record::text FROM members WHERE account = \(account) ORDER BY owner COLLATE \"C\", suite"
            )
        }
    }

    package func createInvitation(_ invitation: StoredInvitation, now: Date) async throws {
        let json = String(decoding: try JSONEncoder().encode(invitation), as: UTF8.self)
        let purgeBefore = now.addingTimeInterval(-StoredInvitation.keptAfterEnd)
        let inserted = try await bounded("creating an invitation") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                // Counted and inserted under a lock of the suite's, so that invitations made at
                // once cannot outrun the cap.
                try await connection.query(
                    "SELECT pg_advisory_xact_lock(hashtext(\(invitation.owner)), hashtext(\(invitation.suite)))",
                    logger: storage.logger
                )
                try await connection.query(
                    "DELETE FROM invitations WHERE owner = \(invitation.owner) AND suite = \(invitation.suite) AND ended < \(purgeBefore)",
                    logger: storage.logger
                )
                let rows = try await connection.query(
                    "SELECT record::text FROM invitations WHERE owner = \(invitation.owner) AND suite = \(invitation.suite)",
                    logger: storage.logger
                )
                var held: [StoredInvitation] = []
                for try await text in rows.decode(String.self) { held.append(try JSONDecoder().decode(StoredInvitation.self, from: Data(text.utf8))) }
                let pending = held.count { $0.state(at: now) == .pending }
                let dropped = StoredInvitation.endedToDrop(held, at: now)
                if !dropped.isEmpty {
                    try await connection.query("DELETE FROM invitations WHERE lookup = ANY(\(dropped))", logger: storage.logger)
                }
                try StoredInvitation.checkCount(pending)
                let inserted = try await connection.query(
                    """
                    INSERT INTO invitations (lookup, owner, suite, ended, record)
                    VALUES (\(invitation.lookup), \(invitation.owner), \(invitation.suite), \(invitation.ended), \(json)::json)
                    ON CONFLICT DO NOTHING RETURNING lookup
                    """,
                    logger: storage.logger
                )
                for try await _ in inserted.decode(String.self) { return true }
                return false
            }
        }
        if !inserted { throw SyncStorageError(.invitationUsed, "an invitation with this id exists: make a new code") }
    }

    package func invitation(lookup: String) async throws -> StoredInvitation? {
        try await bounded("reading an invitation") { storage in
            try await storage.decodeAll(StoredInvitation.self, "SELECT record::text FROM invitations WHERE lookup = \(lookup)").first
        }
    }

    package func invitations(owner: String, suite: String) async throws -> [StoredInvitation] {
        let now = Date()
        let found = try await bounded("reading invitations") { storage in
            try await storage.decodeAll(
                StoredInvitation.self,
                "SELECT record::text FROM invitations WHERE owner = \(owner) AND suite = \(suite)"
            )
        }
        return found.filter { $0.isKept(at: now) }.sorted { ($0.created, $0.id) > ($1.created, $1.id) }
    }

    package func acceptInvitation(lookup: String, account: String, claim: InvitationClaim?, now: Date) async throws -> StoredMember {
        try await bounded("accepting an invitation") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let rows = try await connection.query(
                    "SELECT record::text FROM invitations WHERE lookup = \(lookup) FOR UPDATE",
                    logger: storage.logger
                )
                var found: StoredInvitation?
                for try await text in rows.decode(String.self) { found = try JSONDecoder().decode(StoredInvitation.self, from: Data(text.utf8)) }
                guard var invitation = found else {
                    throw SyncStorageError(.invitationNotFound, "no invitation has this code: check it, or ask for a new one")
                }
                let held = try await connection.query(
                    """
                    SELECT record::text FROM members
                    WHERE owner = \(invitation.owner) AND suite = \(invitation.suite) AND account = \(account) FOR UPDATE
                    """,
                    logger: storage.logger
                )
                var existing: StoredMember?
                for try await text in held.decode(String.self) { existing = try JSONDecoder().decode(StoredMember.self, from: Data(text.utf8)) }
                let member = try invitation.accept(by: account, existing: existing, claim: claim, now: now)
                let invitationJSON = String(decoding: try JSONEncoder().encode(invitation), as: UTF8.self)
                let memberJSON = String(decoding: try JSONEncoder().encode(member), as: UTF8.self)
                try await connection.query(
                    "UPDATE invitations SET record = \(invitationJSON)::json, ended = \(invitation.ended) WHERE lookup = \(lookup)",
                    logger: storage.logger
                )
                // Two accounts' first acceptances of two invitations at once both insert: the
                // primary key keeps one membership per account.
                let inserted = try await connection.query(
                    """
                    INSERT INTO members (owner, suite, account, record) VALUES (\(member.owner), \(member.suite), \(member.account), \(memberJSON)::json)
                    ON CONFLICT DO NOTHING RETURNING account
                    """,
                    logger: storage.logger
                )
                var stored = false
                for try await _ in inserted.decode(String.self) { stored = true }
                guard stored else {
                    throw SyncStorageError(.memberConflict, "\(account) is already a member of \(member.owner)'s suite \(member.suite)")
                }
                return member
            }
        }
    }

    package func handOverKeys(owner: String, suite: String, id: String, keys: String, admission: MemberAdmission) async throws -> StoredInvitation {
        try await bounded("handing over a suite's keys") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                var invitation = try await storage.invitationForUpdate(connection, owner: owner, suite: suite, id: id)
                var member: StoredMember?
                if let account = invitation.acceptedBy {
                    let held = try await connection.query(
                        "SELECT record::text FROM members WHERE owner = \(owner) AND suite = \(suite) AND account = \(account) FOR UPDATE",
                        logger: storage.logger
                    )
                    for try await text in held.decode(String.self) { member = try JSONDecoder().decode(StoredMember.self, from: Data(text.utf8)) }
                }
                try invitation.handOver(keys: keys, admission: admission, to: &member)
                guard let member else { throw SyncStorageError(.notAMember, "the invitation's member is gone") }
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(owner)), hashtext(\(suite)))", logger: storage.logger)
                if let due = try await Self.rotationDue(connection, owner: owner, suite: suite, logger: storage.logger) {
                    try await Self.putRotationDue(connection, owner: owner, suite: suite, due.admitting(member.account), logger: storage.logger)
                }
                let invitationJSON = String(decoding: try JSONEncoder().encode(invitation), as: UTF8.self)
                let memberJSON = String(decoding: try JSONEncoder().encode(member), as: UTF8.self)
                try await connection.query(
                    "UPDATE invitations SET record = \(invitationJSON)::json WHERE lookup = \(invitation.lookup)",
                    logger: storage.logger
                )
                try await connection.query(
                    "UPDATE members SET record = \(memberJSON)::json WHERE owner = \(owner) AND suite = \(suite) AND account = \(member.account)",
                    logger: storage.logger
                )
                return invitation
            }
        }
    }

    /// The invitation of `owner`'s `suite` whose public id is `id`, locked for this transaction.
    private func invitationForUpdate(_ connection: PostgresConnection, owner: String, suite: String, id: String) async throws -> StoredInvitation {
        let rows = try await connection.query(
            "SELECT record::text FROM invitations WHERE owner = \(owner) AND suite = \(suite) AND record->>'id' = \(id) FOR UPDATE",
            logger: logger
        )
        for try await text in rows.decode(String.self) { return try JSONDecoder().decode(StoredInvitation.self, from: Data(text.utf8)) }
        throw SyncStorageError(.invitationNotFound, "the suite has no invitation \(id)")
    }

    package func revokeInvitation(owner: String, suite: String, id: String, by role: SuiteRole, now: Date) async throws -> StoredInvitation {
        try await bounded("revoking an invitation") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                var invitation = try await storage.invitationForUpdate(connection, owner: owner, suite: suite, id: id)
                try invitation.revoke(by: role, now: now)
                let json = String(decoding: try JSONEncoder().encode(invitation), as: UTF8.self)
                try await connection.query(
                    "UPDATE invitations SET record = \(json)::json, ended = \(invitation.ended) WHERE lookup = \(invitation.lookup)",
                    logger: storage.logger
                )
                return invitation
            }
        }
    }

    package func removeMember(owner: String, suite: String, account: String) async throws -> Bool {
        try await bounded("removing a member") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let rows = try await connection.query(
                    "DELETE FROM members WHERE owner = \(owner) AND suite = \(suite) AND account = \(account) RETURNING record::text",
                    logger: storage.logger
                )
                var found: StoredMember?
                for try await text in rows.decode(String.self) { found = try JSONDecoder().decode(StoredMember.self, from: Data(text.utf8)) }
                guard let member = found else { return false }
                let removed = true
                try await Self.markRotationDue(removing: member, on: connection, logger: storage.logger)
                // The invitations it made that are still waiting add nobody now.
                let now = Date()
                let made = try await connection.query(
                    """
                    SELECT record::text FROM invitations
                    WHERE owner = \(owner) AND suite = \(suite) AND ended > \(now) AND record->>'createdBy' = \(account) FOR UPDATE
                    """,
                    logger: storage.logger
                )
                var revoked: [StoredInvitation] = []
                for try await text in made.decode(String.self) {
                    var invitation = try JSONDecoder().decode(StoredInvitation.self, from: Data(text.utf8))
                    guard invitation.state(at: now) == .pending else { continue }
                    try invitation.revoke(by: .owner, now: now)
                    revoked.append(invitation)
                }
                for invitation in revoked {
                    let json = String(decoding: try JSONEncoder().encode(invitation), as: UTF8.self)
                    try await connection.query(
                        "UPDATE invitations SET record = \(json)::json, ended = \(invitation.ended) WHERE lookup = \(invitation.lookup)",
                        logger: storage.logger
                    )
                }
                // Every instance's streams of the suite wake and re-check their access.
                if removed { try await Self.wakeAll(owner: owner, suite: suite, on: connection, logger: storage.logger) }
                return removed
            }
        }
    }

    /// Deletes every membership of `account` and every member and invitation of its suites, on
    /// `connection` (an account's deletion), and wakes the streams of the suites concerned.
    /// Returns whether there was any.
    static func deleteSharing(account: String, on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        var touched: [(String, String)] = []
        var removedFrom: [StoredMember] = []
        let rows = try await connection.query(
            "DELETE FROM members WHERE account = \(account) OR owner = \(account) RETURNING owner, suite, record::text",
            logger: logger
        )
        for try await (owner, suite, text) in rows.decode((String, String, String).self) {
            touched.append((owner, suite))
            if !owner.isSameName(as: account) { removedFrom.append(try JSONDecoder().decode(StoredMember.self, from: Data(text.utf8))) }
        }
        // A deleted member's devices still hold the keys it was handed: a rotation is due there.
        for member in removedFrom { try await markRotationDue(removing: member, on: connection, logger: logger) }
        try await connection.query("DELETE FROM rotations_due WHERE owner = \(account)", logger: logger)
        try await connection.query("DELETE FROM pinned_keys WHERE owner = \(account)", logger: logger)
        let invitations = try await connection.query("DELETE FROM invitations WHERE owner = \(account) RETURNING 1", logger: logger)
        var found = !touched.isEmpty
        for try await _ in invitations { found = true }
        for (owner, suite) in touched { try await wakeAll(owner: owner, suite: suite, on: connection, logger: logger) }
        return found
    }

    package func rotationDue(owner: String, suite: String) async throws -> KeyRotationDue? {
        try await bounded("reading a rotation due") { storage in
            try await storage.decodeAll(
                KeyRotationDue.self,
                "SELECT record::text FROM rotations_due WHERE owner = \(owner) AND suite = \(suite)"
            ).first
        }
    }

    /// Marks a key rotation due in the suite `member` was removed from, if its device held the
    /// keys (`KeyRotationDue.after(removing:epoch:existing:now:)`), on `connection`, under the
    /// suite's advisory lock.
    static func markRotationDue(removing member: StoredMember, on connection: PostgresConnection, logger: Logger) async throws {
        guard member.admission != nil else { return }
        let (owner, suite) = (member.owner, member.suite)
        try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(owner)), hashtext(\(suite)))", logger: logger)
        var epoch: UInt32 = 0
        let rows = try await connection.query("SELECT epoch FROM suites WHERE account = \(owner) AND suite = \(suite)", logger: logger)
        for try await value in rows.decode(Int64.self) { epoch = UInt32(clamping: value) }
        let existing = try await rotationDue(connection, owner: owner, suite: suite, logger: logger)
        let due = KeyRotationDue.after(removing: member, epoch: epoch, existing: existing, now: Date())
        if due != existing { try await putRotationDue(connection, owner: owner, suite: suite, due, logger: logger) }
    }

    /// The rotation due in `owner`'s `suite`, on `connection` (the caller holds the suite's lock).
    static func rotationDue(_ connection: PostgresConnection, owner: String, suite: String, logger: Logger) async throws -> KeyRotationDue? {
        let rows = try await connection.query(
            "SELECT record::text FROM rotations_due WHERE owner = \(owner) AND suite = \(suite)",
            logger: logger
        )
        for try await text in rows.decode(String.self) { return try JSONDecoder().decode(KeyRotationDue.self, from: Data(text.utf8)) }
        return nil
    }

    /// Stores `due` as the rotation due in `owner`'s `suite`, or deletes its row for nil.
    static func putRotationDue(_ connection: PostgresConnection, owner: String, suite: String, _ due: KeyRotationDue?, logger: Logger) async throws {
        guard let due else {
            try await connection.query("DELETE FROM rotations_due WHERE owner = \(owner) AND suite = \(suite)", logger: logger)
            return
        }
        let json = String(decoding: try JSONEncoder().encode(due), as: UTF8.self)
        try await connection.query(
            """
            INSERT INTO rotations_due (owner, suite, record) VALUES (\(owner), \(suite), \(json)::json)
            ON CONFLICT (owner, suite) DO UPDATE SET record = EXCLUDED.record
            """,
            logger: logger
        )
    }

    /// Wakes the waits on `owner`'s `suite` on every instance (at the transaction's commit), as a
    /// push past every revision would.
    static func wakeAll(owner: String, suite: String, on connection: PostgresConnection, logger: Logger) async throws {
        let notice = String(decoding: try JSONEncoder().encode(ChangeNotice(account: owner, suite: suite, head: UInt64(Int64.max))), as: UTF8.self)
        try await connection.query("SELECT pg_notify(\(ChangeNotice.channel), \(notice))", logger: logger)
    }

    /// Every row of `query` (one JSON text column) decoded as `T`.
    private func decodeAll<T: Decodable>(_ type: T.Type, _ query: PostgresQuery) async throws -> [T] {
        var found: [T] = []
        for try await text in try await client.query(query, logger: logger).decode(String.self) {
            found.append(try JSONDecoder().decode(T.self, from: Data(text.utf8)))
        }
        return found
    }

    // MARK: Pinned keys

    package func pinnedKeys(owner: String, suite: String) async throws -> [StoredPin] {
        try await bounded("reading pinned keys") { storage in
            let rows = try await storage.client.query(
                "SELECT key, name::text FROM pinned_keys WHERE owner = \(owner) AND suite = \(suite) ORDER BY key",
                logger: storage.logger
            )
            return try await Self.pins(rows)
        }
    }

    package func changePins(owner: String, suite: String, _ change: PinChange) async throws -> [StoredPin] {
        try await bounded("changing pinned keys") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                for key in change.pin {
                    let name = try change.names?[key].map { String(decoding: try JSONEncoder().encode($0), as: UTF8.self) }
                    try await connection.query(
                        """
                        INSERT INTO pinned_keys (owner, suite, key, name) VALUES (\(owner), \(suite), \(key), \(name)::json)
                        ON CONFLICT (owner, suite, key) DO UPDATE SET name = EXCLUDED.name
                        """,
                        logger: storage.logger
                    )
                }
                if !change.unpin.isEmpty {
                    try await connection.query(
                        "DELETE FROM pinned_keys WHERE owner = \(owner) AND suite = \(suite) AND key = ANY(\(change.unpin))",
                        logger: storage.logger
                    )
                }
                let rows = try await connection.query(
                    "SELECT key, name::text FROM pinned_keys WHERE owner = \(owner) AND suite = \(suite) ORDER BY key",
                    logger: storage.logger
                )
                let pins = try await Self.pins(rows)
                try PinRule.checkCount(pins.count)
                return pins
            }
        }
    }

    private static func pins(_ rows: PostgresRowSequence) async throws -> [StoredPin] {
        var pins: [StoredPin] = []
        for try await (key, name) in rows.decode((String, String?).self) {
            pins.append(StoredPin(key: key, name: name.flatMap { try? JSONDecoder().decode(SealedPayload.self, from: Data($0.utf8)) }))
        }
        return pins
    }

    /// The keys of `owner`'s `suite` among `keys` that are pinned, on `connection`.
    static func pinnedKeys(
        _ connection: PostgresConnection,
        owner: String,
        suite: String,
        among keys: [String],
        logger: Logger
    ) async throws -> [String] {
        let rows = try await connection.query(
            "SELECT key FROM pinned_keys WHERE owner = \(owner) AND suite = \(suite) AND key = ANY(\(keys))",
            logger: logger
        )
        var found: [String] = []
        for try await key in rows.decode(String.self) { found.append(key) }
        return found
    }
}
