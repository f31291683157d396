package import Foundation
package import GroupDefaultsWire
import Logging
import PostgresNIO

// Pairings: one row each, the record as JSON; a claim and its token in one transaction.
extension PostgresSyncStorage: PairingStore {
    package func createPairing(_ pairing: StoredPairing) async throws {
        let json = String(decoding: try JSONEncoder().encode(pairing), as: UTF8.self)
        let inserted = try await bounded("creating a pairing") { storage in
            try await storage.client.query("DELETE FROM pairings WHERE expires < now()", logger: storage.logger)
            // Counted and inserted under a lock of the token's, so that pairings made at once cannot
            // outrun the cap.
            return try await storage.client.withTransaction(logger: storage.logger) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(hashtext(\(pairing.creatorTokenID)))", logger: storage.logger)
                let counted = try await connection.query(
                    """
                    SELECT count(*) FROM pairings WHERE expires >= \(pairing.created) AND record->>'creatorTokenID' = \(pairing.creatorTokenID)
                    """,
                    logger: storage.logger
                )
                for try await live in counted.decode(Int64.self) { try StoredPairing.checkCount(Int(live)) }
                let rows = try await connection.query(
                    """
                    INSERT INTO pairings (lookup, expires, record) VALUES (\(pairing.lookup), \(pairing.expires), \(json)::json)
                    ON CONFLICT DO NOTHING RETURNING lookup
                    """,
                    logger: storage.logger
                )
                for try await _ in rows.decode(String.self) { return true }
                return false
            }
        }
        if !inserted { throw SyncStorageError(.pairingUsed, "a pairing with this id exists: make a new code") }
    }

    package func pairing(lookup: String) async throws -> StoredPairing? {
        try await bounded("reading a pairing") { storage in
            let rows = try await storage.client.query(
                "SELECT record::text FROM pairings WHERE lookup = \(lookup)",
                logger: storage.logger
            )
            for try await json in rows.decode(String.self) {
                return try JSONDecoder().decode(StoredPairing.self, from: Data(json.utf8))
            }
            return nil
        }
    }

    package func claimPairing(lookup: String, claim: PairingClaim, token: StoredToken, now: Date) async throws -> StoredPairing {
        try await updatePairing(lookup) { pairing, connection, logger in
            try pairing.claim(claim, tokenID: token.id, now: now)
            try await connection.query(
                """
                INSERT INTO tokens (id, account, patterns, read_only, device, created, expires, revoked, hash)
                VALUES (\(token.id), \(token.account), \(token.suitePatterns)::text[], \(token.readOnly), \(token.device),
                        \(token.created), \(token.expires), \(token.revoked), \(token.hash))
                """,
                logger: logger
            )
        }
    }

    package func completePairing(lookup: String, bundle: String, now: Date, tokenExpires: Date?) async throws -> StoredPairing {
        try await updatePairing(lookup) { pairing, connection, logger in
            try pairing.complete(bundle: bundle, now: now)
            guard let id = pairing.tokenID else { return }
            try await connection.query("UPDATE tokens SET expires = \(tokenExpires) WHERE id = \(id)", logger: logger)
        }
    }

    package func cancelPairing(lookup: String, now: Date) async throws -> StoredPairing {
        try await updatePairing(lookup) { pairing, connection, logger in
            try pairing.cancel(now: now)
            guard let id = pairing.tokenID else { return }
            try await connection.query("UPDATE tokens SET revoked = COALESCE(revoked, \(now)) WHERE id = \(id)", logger: logger)
        }
    }

    /// Locks, changes and writes one pairing in one transaction.
    private func updatePairing(
        _ lookup: String,
        _ change: @escaping @Sendable (inout StoredPairing, PostgresConnection, Logger) async throws -> Void
    ) async throws -> StoredPairing {
        try await bounded("updating a pairing") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                let rows = try await connection.query(
                    "SELECT record::text FROM pairings WHERE lookup = \(lookup) FOR UPDATE",
                    logger: storage.logger
                )
                var found: StoredPairing?
                for try await json in rows.decode(String.self) {
                    found = try JSONDecoder().decode(StoredPairing.self, from: Data(json.utf8))
                }
                guard var pairing = found else {
                    throw SyncStorageError(.pairingNotFound, "no pairing has this code: check it, or make a new one")
                }
                try await change(&pairing, connection, storage.logger)
                let json = String(decoding: try JSONEncoder().encode(pairing), as: UTF8.self)
                try await connection.query(
                    "UPDATE pairings SET record = \(json)::json, expires = \(pairing.expires) WHERE lookup = \(lookup)",
                    logger: storage.logger
                )
                return pairing
            }
        }
    }
}
