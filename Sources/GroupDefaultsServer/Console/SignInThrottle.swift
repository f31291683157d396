import Foundation
import Synchronization

/// Limits failed sign-ins: at most `failures` per `window` from one client address, and as many
/// for one operator name from anywhere. Beyond that, every sign-in from that address or for that
/// name is refused (429) until the window that counted them has passed, right password or not.
/// In memory, per instance; at most `maxTracked` keys are kept (the oldest windows go first).
package final class SignInThrottle: Sendable {
    let failures: Int
    let window: Duration
    let maxTracked = 10_000

    private struct Count {
        var failures: Int
        var since: ContinuousClock.Instant
    }

    private let counts = Mutex<[String: Count]>([:])

    /// At most `failures` failed sign-ins per `window`, per address and per name.
    package init(failures: Int = 10, window: Duration = .seconds(600)) {
        self.failures = failures
        self.window = window
    }

    /// How long until `address` may try to sign in as `name` again; nil if it may now.
    func refusal(address: String, name: String, now: ContinuousClock.Instant = .now) -> Duration? {
        counts.withLock { counts in
            [Self.addressKey(address), Self.nameKey(name)].compactMap { key -> Duration? in
                guard let count = counts[key] else { return nil }
                if now - count.since >= window {
                    counts[key] = nil
                    return nil
                }
                return count.failures >= failures ? window - (now - count.since) : nil
            }.max()
        }
    }

    /// Counts a failed sign-in.
    func failed(address: String, name: String, now: ContinuousClock.Instant = .now) {
        counts.withLock { counts in
            for key in [Self.addressKey(address), Self.nameKey(name)] {
                var count = counts[key] ?? Count(failures: 0, since: now)
                if now - count.since >= window { count = Count(failures: 0, since: now) }
                count.failures += 1
                counts[key] = count
            }
            if counts.count > maxTracked {
                let oldest = counts.sorted { $0.value.since < $1.value.since }.prefix(counts.count - maxTracked)
                for (key, _) in oldest { counts[key] = nil }
            }
        }
    }

    private static func addressKey(_ address: String) -> String { "a:" + address }
    private static func nameKey(_ name: String) -> String { "n:" + name }
}
