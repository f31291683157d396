package import Foundation

/// A bearer token as stored: never the token itself, only its SHA-256.
package struct StoredToken: Sendable, Hashable, Codable {
    /// A short public id (for `token list` and `token revoke`).
    package var id: String
    package var account: String
    /// Suite patterns: globs in which `*` matches any run of characters, dots included.
    package var suitePatterns: [String]
    package var readOnly: Bool
    /// The device the token is bound to (`token create --device NAME`): its name in device lists.
    package var device: String?
    package var created: Date
    package var expires: Date?
    package var revoked: Date?
    /// The token's SHA-256, lowercase hex.
    package var hash: String

    package init(
        id: String,
        account: String,
        suitePatterns: [String],
        readOnly: Bool,
        device: String? = nil,
        created: Date,
        expires: Date?,
        revoked: Date?,
        hash: String
    ) {
        self.id = id
        self.device = device
        self.account = account
        self.suitePatterns = suitePatterns
        self.readOnly = readOnly
        self.created = created
        self.expires = expires
        self.revoked = revoked
        self.hash = hash
    }
}

/// Bearer tokens, found by their hash (each request), their id (revoking) or their account.
package protocol TokenStore: Sendable {
    /// Stores a new token.
    func createToken(_ token: StoredToken) async throws
    /// A number that changes whenever any process writes a token (creates, revokes, pairs), read
    /// without blocking: a verification cached under one generation holds while it lasts. Nil when
    /// the backend cannot tell cheaply (then nothing is cached).
    func tokenGeneration() throws -> UInt64?
    /// The token whose SHA-256 is `hash`, if any.
    func token(hash: String) async throws -> StoredToken?
    /// The token whose public id is `id`, if any.
    func token(id: String) async throws -> StoredToken?
    /// The tokens of `account` (every account's, for nil), oldest first.
    func tokens(account: String?) async throws -> [StoredToken]
    /// Marks a token revoked at `date`; throws `notFound` for an unknown id.
    func revokeToken(id: String, at date: Date) async throws
    /// Replaces every token with `tokens` (revoked ones too, as they are), in one transaction, and
    /// moves the token generation on: a restore keeps the token table of the store it replaces, so
    /// that no revoked token works again and no token made since stops working.
    func replaceTokens(with tokens: [StoredToken]) async throws
}

extension TokenStore {
    /// Nothing is cached unless a backend says when tokens change.
    package func tokenGeneration() throws -> UInt64? { nil }

    /// Every token, oldest first.
    package func tokens() async throws -> [StoredToken] {
        try await tokens(account: nil)
    }

    /// The ids of `account`'s tokens that work at `date` (`StoredToken.isActive`).
    package func activeTokenIDs(account: String, at date: Date) async throws -> Set<String> {
        Set(try await tokens(account: account).filter { $0.isActive(at: date) }.map(\.id))
    }
}
