import Foundation
import Synchronization

/// Limits sign-ins: at most `failures` failed ones per `window` for one operator name from one
/// client address, and at most `addressFailures` from one address whatever the names; beyond that,
/// sign-ins for that name from that address (or every sign-in from that address) are refused (429)
/// until the window that counted them has passed, right password or not. Nobody can lock an
/// operator out from elsewhere: failures from other addresses never count against the operator's
/// own. An attempt is counted as failed when it is admitted, and given back if its password was
/// right, so that attempts sent in parallel cannot outrun the count.
///
/// Password checks are shared fairly between addresses: at most `concurrentChecks` run at once
/// (bcrypt is a quarter of a second of CPU each), and the attempts waiting for one are queued per
/// address and served one address at a time in turn (`check`), so an address that floods waits
/// behind its own attempts, and another address's sign-in waits at most one check per other
/// address that is waiting. One address has at most `attemptsPerAddress` attempts under way at
/// once; beyond that its next one is refused at once (`busy`), and no other address's is.
///
/// An address here is a client's `AddressGroup`: an IPv4 address, or a whole IPv6 /64 network, so
/// that a client given a /64 cannot make itself many addresses, each with its own limits and its
/// own turn.
///
/// In memory, per instance; at most `maxTracked` keys are kept (the oldest windows go first, in
/// the order they started, each eviction a constant step: `Windows`), and names are operator names
/// (at most 64 characters) by the time they get here. Behind a reverse proxy every client has the
/// proxy's address: the limits are then the proxy's.
package final class SignInThrottle: Sendable {
    let failures: Int
    /// Failed sign-ins allowed from one address for all names together: three names' worth.
    var addressFailures: Int { failures * 3 }
    let window: Duration
    let maxTracked: Int
    let concurrentChecks = 4
    /// Attempts one address may have under way at once (admitted, not finished).
    let attemptsPerAddress = 4

    private struct Count {
        var failures: Int
        var since: ContinuousClock.Instant
    }

    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    /// The keys counted, in the order their windows started, so that the oldest goes first in
    /// constant time. An entry whose key was counted again since (a new window) is stale and
    /// skipped.
    private struct Windows {
        private var entries: [(key: String, since: ContinuousClock.Instant)] = []
        private var first = 0

        var oldest: (key: String, since: ContinuousClock.Instant)? { first < entries.count ? entries[first] : nil }

        mutating func append(_ key: String, since: ContinuousClock.Instant) { entries.append((key, since)) }

        mutating func removeOldest() {
            first += 1
            // Dropped entries are given back once they are half the array: each append pays for one.
            if first * 2 >= entries.count {
                entries.removeFirst(first)
                first = 0
            }
        }
    }

    private struct State {
        var counts: [String: Count] = [:]
        var windows = Windows()
        /// Attempts under way per address (admitted, not finished).
        var underWay: [String: Int] = [:]
        /// Password checks running.
        var checking = 0
        /// Attempts waiting for a check, per address, oldest first.
        var waiting: [String: [Waiter]] = [:]
        /// The addresses with attempts waiting, in the order of their turns.
        var turns: [String] = []
        var nextWaiter: UInt64 = 0
    }

    private let state = Mutex(State())

    /// At most `failures` failed sign-ins per `window` per name and address, three times as many
    /// per address; at most `maxTracked` counts kept.
    package init(failures: Int = 10, window: Duration = .seconds(600), maxTracked: Int = 10_000) {
        self.failures = failures
        self.window = window
        self.maxTracked = maxTracked
    }

    /// What an attempt is told.
    package enum Admission: Equatable {
        /// Check the password (`check`), then call `finished`.
        case admitted
        /// Refused for this long (too many failures).
        case refused(retryAfter: Duration)
        /// Refused: this address has too many sign-ins under way at once.
        case busy
    }

    /// Admits an attempt from `address` as `name` (counting it as failed until `finished` says
    /// otherwise), or refuses it.
    package func admit(address given: String, name: String, now: ContinuousClock.Instant = .now) -> Admission {
        let address = AddressGroup(given).description
        return state.withLock { state in
            let limits = [(Self.pairKey(address, name), failures), (Self.addressKey(address), addressFailures)]
            let keys = limits.map(\.0)
            for key in keys {
                if let count = state.counts[key], now - count.since >= window { state.counts[key] = nil }
            }
            let waits = limits.compactMap { key, limit -> Duration? in
                guard let count = state.counts[key], count.failures >= limit else { return nil }
                return window - (now - count.since)
            }
            if let wait = waits.max() { return .refused(retryAfter: wait) }
            guard state.underWay[address, default: 0] < attemptsPerAddress else { return .busy }
            state.underWay[address, default: 0] += 1
            for key in keys {
                var count = state.counts[key] ?? Count(failures: 0, since: now)
                if state.counts[key] == nil { state.windows.append(key, since: now) }
                count.failures += 1
                state.counts[key] = count
            }
            Self.forgetOldest(&state, now: now, window: window, keep: maxTracked)
            return .admitted
        }
    }

    /// Forgets the oldest counts while more than `keep` are kept, and those whose window has
    /// passed (counted anew if their key comes again), in the order their windows started.
    private static func forgetOldest(_ state: inout State, now: ContinuousClock.Instant, window: Duration, keep: Int) {
        while let (key, since) = state.windows.oldest {
            let current = state.counts[key]
            if current?.since == since {
                guard state.counts.count > keep || now - since >= window else { return }
                state.counts[key] = nil
            }
            state.windows.removeOldest()
        }
    }

    /// How many attempts wait for a password check, all addresses together.
    package var waitingChecks: Int {
        state.withLock { state in state.waiting.values.reduce(0) { $0 + $1.count } }
    }

    /// Runs `check` (an admitted attempt's password check) once it is `address`'s turn and fewer
    /// than `concurrentChecks` run. Throws `CancellationError` if the task is cancelled while it
    /// waits.
    package func check<T: Sendable>(address: String, _ check: () async throws -> T) async throws -> T {
        try await turn(address: AddressGroup(address).description)
        defer { endCheck() }
        return try await check()
    }

    /// Waits for a check's turn: at once if a check is free and nobody waits, else queued behind
    /// `address`'s own waiting attempts, its address served in turn with the others.
    private func turn(address: String) async throws {
        let id = state.withLock { state -> UInt64? in
            if state.checking < concurrentChecks && state.turns.isEmpty {
                state.checking += 1
                return nil
            }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let id else { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = state.withLock { state -> Bool in
                    if Task.isCancelled { return true }
                    if state.waiting[address, default: []].isEmpty { state.turns.append(address) }
                    state.waiting[address, default: []].append(Waiter(id: id, continuation: continuation))
                    Self.startWaiting(&state, limit: concurrentChecks)
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let removed = state.withLock { state -> Waiter? in
                guard let index = state.waiting[address]?.firstIndex(where: { $0.id == id }) else { return nil }
                let waiter = state.waiting[address]!.remove(at: index)
                if state.waiting[address]!.isEmpty {
                    state.waiting[address] = nil
                    state.turns.removeAll { $0 == address }
                }
                return waiter
            }
            removed?.continuation.resume(throwing: CancellationError())
        }
    }

    /// A check ended: the next address in turn gets the free one.
    private func endCheck() {
        state.withLock { state in
            state.checking -= 1
            Self.startWaiting(&state, limit: concurrentChecks)
        }
    }

    /// Starts the waiting attempts while checks are free: the first waiting attempt of the address
    /// whose turn it is, which then goes to the back of the turns if it has more waiting.
    private static func startWaiting(_ state: inout State, limit: Int) {
        while state.checking < limit, !state.turns.isEmpty {
            let address = state.turns.removeFirst()
            guard var queue = state.waiting[address], !queue.isEmpty else { continue }
            let waiter = queue.removeFirst()
            if queue.isEmpty {
                state.waiting[address] = nil
            } else {
                state.waiting[address] = queue
                state.turns.append(address)
            }
            state.checking += 1
            waiter.continuation.resume()
        }
    }

    /// Ends an admitted attempt: a right password gives its count back.
    package func finished(address given: String, name: String, succeeded: Bool) {
        let address = AddressGroup(given).description
        state.withLock { state in
            let left = state.underWay[address, default: 1] - 1
            state.underWay[address] = left > 0 ? left : nil
            guard succeeded else { return }
            for key in [Self.pairKey(address, name), Self.addressKey(address)] {
                guard var count = state.counts[key] else { continue }
                count.failures = max(0, count.failures - 1)
                state.counts[key] = count
            }
        }
    }

    private static func addressKey(_ address: String) -> String { "a:" + address }
    private static func pairKey(_ address: String, _ name: String) -> String { "p:" + address + "\n" + name }
}
