import Foundation
import Synchronization

/// Limits sign-ins: at most `failures` failed ones per `window` for one operator name from one
/// client address, and at most `addressFailures` from one address whatever the names; beyond that,
/// sign-ins for that name from that address (or every sign-in from that address) are refused (429)
/// until the window that counted them has passed, right password or not. Nobody can lock an
/// operator out from elsewhere: failures from other addresses never count against the operator's
/// own. An attempt is counted as failed when it is admitted, and given back if its password was
/// right, so that attempts sent in parallel cannot outrun the count. At most `concurrentChecks`
/// passwords are checked at once (bcrypt is a quarter of a second of CPU each).
///
/// In memory, per instance; at most `maxTracked` keys are kept (the oldest windows go first), and
/// names are operator names (at most 64 characters) by the time they get here. Behind a reverse
/// proxy every client has the proxy's address: the limits are then the proxy's.
package final class SignInThrottle: Sendable {
    let failures: Int
    /// Failed sign-ins allowed from one address for all names together: three names' worth.
    var addressFailures: Int { failures * 3 }
    let window: Duration
    let maxTracked = 10_000
    let concurrentChecks = 4

    private struct Count {
        var failures: Int
        var since: ContinuousClock.Instant
    }

    private struct State {
        var counts: [String: Count] = [:]
        var checking = 0
    }

    private let state = Mutex(State())

    /// At most `failures` failed sign-ins per `window` per name and address, three times as many
    /// per address.
    package init(failures: Int = 10, window: Duration = .seconds(600)) {
        self.failures = failures
        self.window = window
    }

    /// What an attempt is told.
    package enum Admission: Equatable {
        /// Check the password, then call `finished`.
        case admitted
        /// Refused for this long (too many failures).
        case refused(retryAfter: Duration)
        /// Refused: too many passwords are being checked at once.
        case busy
    }

    /// Admits an attempt from `address` as `name` (counting it as failed until `finished` says
    /// otherwise), or refuses it.
    package func admit(address: String, name: String, now: ContinuousClock.Instant = .now) -> Admission {
        state.withLock { state in
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
            guard state.checking < concurrentChecks else { return .busy }
            state.checking += 1
            for key in keys {
                var count = state.counts[key] ?? Count(failures: 0, since: now)
                count.failures += 1
                state.counts[key] = count
            }
            if state.counts.count > maxTracked {
                let oldest = state.counts.sorted { $0.value.since < $1.value.since }.prefix(state.counts.count - maxTracked)
                for (key, _) in oldest { state.counts[key] = nil }
            }
            return .admitted
        }
    }

    /// Ends an admitted attempt: a right password gives its count back.
    package func finished(address: String, name: String, succeeded: Bool) {
        state.withLock { state in
            state.checking -= 1
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
