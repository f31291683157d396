import Foundation
import Synchronization

/// Limits sign-ins: at most `failures` failed ones per `window` from one client address, and as
/// many for one operator name from anywhere; beyond that, every sign-in from that address or for
/// that name is refused (429) until the window that counted them has passed, right password or
/// not. An attempt is counted as failed when it is admitted, and given back if its password was
/// right, so that attempts sent in parallel cannot outrun the count. At most `concurrentChecks`
/// passwords are checked at once (bcrypt is a quarter of a second of CPU each).
///
/// In memory, per instance; at most `maxTracked` keys are kept (the oldest windows go first), and
/// names are operator names (at most 64 characters) by the time they get here. Behind a reverse
/// proxy every client has the proxy's address: the per-address limit is then the proxy's.
package final class SignInThrottle: Sendable {
    let failures: Int
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

    /// At most `failures` failed sign-ins per `window`, per address and per name.
    package init(failures: Int = 10, window: Duration = .seconds(600)) {
        self.failures = failures
        self.window = window
    }

    /// What an attempt is told.
    enum Admission: Equatable {
        /// Check the password, then call `finished`.
        case admitted
        /// Refused for this long (too many failures).
        case refused(retryAfter: Duration)
        /// Refused: too many passwords are being checked at once.
        case busy
    }

    /// Admits an attempt from `address` as `name` (counting it as failed until `finished` says
    /// otherwise), or refuses it.
    func admit(address: String, name: String, now: ContinuousClock.Instant = .now) -> Admission {
        state.withLock { state in
            let keys = [Self.addressKey(address), Self.nameKey(name)]
            for key in keys {
                if let count = state.counts[key], now - count.since >= window { state.counts[key] = nil }
            }
            let waits = keys.compactMap { key -> Duration? in
                guard let count = state.counts[key], count.failures >= failures else { return nil }
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
    func finished(address: String, name: String, succeeded: Bool) {
        state.withLock { state in
            state.checking -= 1
            guard succeeded else { return }
            for key in [Self.addressKey(address), Self.nameKey(name)] {
                guard var count = state.counts[key] else { continue }
                count.failures = max(0, count.failures - 1)
                state.counts[key] = count
            }
        }
    }

    private static func addressKey(_ address: String) -> String { "a:" + address }
    private static func nameKey(_ name: String) -> String { "n:" + name }
}
