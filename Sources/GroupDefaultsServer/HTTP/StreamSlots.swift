import GroupDefaultsWire
import Synchronization

/// How many event streams and waiting long-polls each token holds open on this instance, and the
/// limit (`SyncLimits.maxStreamsPerToken`): a leaked token cannot take the server's memory or file
/// descriptors by opening streams, while other tokens are served as before.
///
/// A slot is taken before a stream starts (or a long-poll parks) and given back when its `Slot` is
/// released, however the request ends.
final class StreamSlots: Sendable {
    let limit: Int
    private let open = Mutex<[String: Int]>([:])

    init(limit: Int) {
        self.limit = limit
    }

    /// A slot for `token`, or 429 `too_many_streams` when it holds `limit` already.
    func take(for token: StoredToken) throws -> Slot {
        let taken = open.withLock { open -> Bool in
            let count = open[token.hash, default: 0]
            guard count < limit else { return false }
            open[token.hash] = count + 1
            return true
        }
        guard taken else {
            throw APIError(
                .tooManyStreams,
                "this token holds \(limit) event streams and waiting long-polls open on this server already, "
                    + "the most one token may; close one, or retry later",
                limit: limit
            )
        }
        return Slot(slots: self, tokenHash: token.hash)
    }

    /// How many slots `token` holds now.
    func count(for token: StoredToken) -> Int {
        open.withLock { $0[token.hash, default: 0] }
    }

    fileprivate func giveBack(_ tokenHash: String) {
        open.withLock { open in
            let count = open[tokenHash, default: 1] - 1
            open[tokenHash] = count > 0 ? count : nil
        }
    }

    /// One taken slot, given back when released (the stream's body holds it to its end).
    final class Slot: Sendable {
        private let slots: StreamSlots
        private let tokenHash: String

        fileprivate init(slots: StreamSlots, tokenHash: String) {
            self.slots = slots
            self.tokenHash = tokenHash
        }

        deinit { slots.giveBack(tokenHash) }
    }
}
