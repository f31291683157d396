import Synchronization

/// Tokens already looked up, by their hash (never the token itself), each with the token
/// generation it was read under (`TokenStore.tokenGeneration`): an entry serves only while the
/// generation is unchanged, so a token revoked by any process (`token revoke`, another instance)
/// is refused on the next request, as without the cache. Bounded: when full it starts afresh.
///
/// Only tokens that were found are kept; an unknown token is looked up every time (a token made a
/// moment ago by another process works at once).
final class TokenCache: Sendable {
    let capacity: Int
    private let entries = Mutex<[String: (token: StoredToken, generation: UInt64)]>([:])

    init(capacity: Int = 10_000) {
        self.capacity = capacity
    }

    /// The token stored under `hash` if it was read under `generation`.
    func token(hash: String, generation: UInt64) -> StoredToken? {
        entries.withLock { entries in
            guard let entry = entries[hash], entry.generation == generation else { return nil }
            return entry.token
        }
    }

    /// Keeps `token`, read under `generation` (read before the token itself was).
    func store(_ token: StoredToken, generation: UInt64) {
        entries.withLock { entries in
            if entries.count >= capacity && entries[token.hash] == nil { entries.removeAll(keepingCapacity: true) }
            entries[token.hash] = (token, generation)
        }
    }
}
