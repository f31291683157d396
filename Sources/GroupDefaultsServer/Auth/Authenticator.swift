import Foundation
import GroupDefaultsWire
import Hummingbird

/// Checks a request's bearer token on every request: against storage, or against what an earlier
/// request read if no token was written since (`TokenCache`; a revocation takes effect on the next
/// request, also from another process).
struct Authenticator: Sendable {
    let storage: any TokenStore
    let cache = TokenCache()

    /// The stored token whose hash is `hash`: from the cache while no token was written since it
    /// was read, else from storage.
    private func lookUp(hash: String) async throws -> StoredToken? {
        let generation = try storage.tokenGeneration()
        if let generation, let cached = cache.token(hash: hash, generation: generation) { return cached }
        let token = try await storage.token(hash: hash)
        if let generation, let token { cache.store(token, generation: generation) }
        return token
    }

    /// The token of a request: 401 if missing, unknown, expired or revoked.
    func token(for request: Request, now: Date = Date()) async throws -> StoredToken {
        guard let header = request.headers[.authorization] else {
            throw APIError.unauthorized("an Authorization: Bearer token is needed")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw APIError.unauthorized("the Authorization header must be 'Bearer TOKEN'")
        }
        // Spaces and tabs around the token (HTTP's optional whitespace) are not part of it.
        var bytes = parts[1].utf8[...]
        while let first = bytes.first, first == 0x20 || first == 0x09 { bytes = bytes.dropFirst() }
        while let last = bytes.last, last == 0x20 || last == 0x09 { bytes = bytes.dropLast() }
        let secret = String(Substring(bytes))
        guard let token = try await lookUp(hash: Tokens.hash(secret)) else {
            throw APIError.unauthorized("the token is not known")
        }
        let inactivity = token.inactivity(at: now)
        if inactivity == .revoked { throw APIError.unauthorized("the token was revoked") }
        // The store keys suites by account + NUL + suite: a token for an account name it could not
        // keep apart from another's is refused.
        if NameKind.account.problem(withStored: token.account) != nil { throw APIError.unauthorized("the token's account name is not valid") }
        if inactivity == .expired { throw APIError.unauthorized("the token expired") }
        return token
    }

    /// Whether `token` still works now: not revoked (possibly by another process) and not expired.
    /// An event stream asks before each wait, so that a revocation ends open streams too.
    func isStillValid(_ token: StoredToken, now: Date = Date()) async -> Bool {
        (try? await lookUp(hash: token.hash))?.isActive(at: now) ?? false
    }
}
