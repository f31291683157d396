package import Foundation
import GroupDefaultsWire
import Logging
import PostgresNIO

// Tokens: one row each, found by hash, id or account.
extension PostgresSyncStorage: TokenStore {
    package func createToken(_ token: StoredToken) async throws {
        try await bounded("creating a token") { storage in
            // One statement: the token, and its account's incarnation if the account has none yet.
            try await storage.client.query(
                """
                WITH incarnation AS (
                    INSERT INTO account_incarnations (account, id) VALUES (\(token.account), \(IncarnationID.random()))
                    ON CONFLICT (account) DO NOTHING
                )
                INSERT INTO tokens (id, account, patterns, read_only, device, created, expires, revoked, hash)
                VALUES (\(token.id), \(token.account), \(token.suitePatterns)::text[], \(token.readOnly), \(token.device),
                        \(token.created), \(token.expires), \(token.revoked), \(token.hash))
                """,
                logger: storage.logger
            )
        }
    }

    package func token(hash: String) async throws -> StoredToken? {
        try await bounded("finding a token") { storage in
            try await storage.readTokens(
                "SELECT id, account, patterns, read_only, device, created, expires, revoked, hash FROM tokens WHERE hash = \(hash)"
            ).first
        }
    }

    /// The count of token writes announced to this instance's listening connection (migration 4's
    /// trigger), nil while it is not listening: a verification cached under one generation is used
    /// only while no write was announced since, on any instance. (A write is seen once its
    /// notification arrives, a few milliseconds after its commit.)
    package func tokenGeneration() throws -> UInt64? {
        listener.tokenGeneration
    }

    package func token(id: String) async throws -> StoredToken? {
        try await bounded("finding a token") { storage in
            try await storage.readTokens(
                "SELECT id, account, patterns, read_only, device, created, expires, revoked, hash FROM tokens WHERE id = \(id)"
            ).first
        }
    }

    package func tokens(account: String?) async throws -> [StoredToken] {
        try await bounded("listing tokens") { storage in
            try await storage.readTokens(
                """
                SELECT id, account, patterns, read_only, device, created, expires, revoked, hash FROM tokens
                WHERE \(account)::text IS NULL OR account = \(account) ORDER BY created, id
                """
            )
        }
    }

    package func revokeToken(id: String, at date: Date) async throws {
        let found = try await bounded("revoking a token") { storage in
            let rows = try await storage.client.query(
                "UPDATE tokens SET revoked = COALESCE(revoked, \(date)) WHERE id = \(id) RETURNING id",
                logger: storage.logger
            )
            for try await _ in rows.decode(String.self) { return true }
            return false
        }
        if !found { throw SyncStorageError(.notFound, "no token has the id \(id)") }
    }

    package func replaceTokens(with tokens: [StoredToken]) async throws {
        try await bounded("replacing the tokens") { storage in
            try await storage.client.withTransaction(logger: storage.logger) { connection in
                // Each write fires migration 4's trigger, which moves every instance's token generation on.
                try await connection.query("DELETE FROM tokens", logger: storage.logger)
                for token in tokens {
                    try await connection.query(
                        """
                        INSERT INTO tokens (id, account, patterns, read_only, device, created, expires, revoked, hash)
                        VALUES (\(token.id), \(token.account), \(token.suitePatterns)::text[], \(token.readOnly), \(token.device),
                                \(token.created), \(token.expires), \(token.revoked), \(token.hash))
                        """,
                        logger: storage.logger
                    )
                }
            }
        }
    }

    private func readTokens(_ query: PostgresQuery) async throws -> [StoredToken] {
        let rows = try await client.query(query, logger: logger)
        var tokens: [StoredToken] = []
        for try await (id, account, patterns, readOnly, device, created, expires, revoked, hash)
            in rows.decode((String, String, [String], Bool, String?, Date, Date?, Date?, String).self)
        {
            tokens.append(
                StoredToken(
                    id: id,
                    account: account,
                    suitePatterns: patterns,
                    readOnly: readOnly,
                    device: device,
                    created: created,
                    expires: expires,
                    revoked: revoked,
                    hash: hash
                )
            )
        }
        return tokens
    }
}
