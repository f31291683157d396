/// The identity of the storage's history: a random id, made with the store and replaced by a
/// restore (`groupdefaults-server restore`), which every `/v1` answer carries in the
/// `Server-Incarnation` header (`IncarnationHeader`).
///
/// A device remembers the incarnation it synced with; when it changes, the server went back in
/// time (a backup was put back), so the device uploads everything it holds, each value and
/// deletion with its own stamp, and reads the suite again (`SyncEngine`). Revisions alone cannot
/// say it: a restored server reuses the revisions it had lost.
package protocol StorageIncarnation: Sendable {
    /// The current incarnation; made at the first call if the store has none yet.
    func incarnation() async throws -> String

    /// Replaces the incarnation with a new random one and returns it: what a restore does, and
    /// what an operator announces after putting a PostgreSQL dump back (`restore --announce`).
    func renewIncarnation() async throws -> String
}

/// How an incarnation id is made: 16 random bytes, as 32 lowercase hex digits.
package enum IncarnationID {
    /// A new random id.
    package static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16)
        }.joined()
    }
}
