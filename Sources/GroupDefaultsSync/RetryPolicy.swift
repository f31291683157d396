import Foundation

extension SyncClient {
    /// How a client sends a request again that the server refused for a while.
    ///
    /// Repeated: every 429 (`rate_limited`, `too_many_streams`: the server did nothing of it), and a
    /// 503 (`unavailable`) to a request that may arrive twice: a read, or a push (its batch id makes
    /// the server apply it once). A 503 to any other request (an invitation, a member, a pairing, a
    /// key bag) is reported at once, since the server may have done it. Each wait is the longer of
    /// the backoff (exponential, with jitter: `Backoff`) and the server's `Retry-After` (seconds, or
    /// an HTTP date); the waits for one request add up to at most `totalWait`, so that no answer,
    /// however absurd its `Retry-After`, makes a client wait longer. Then the refusal is reported.
    public struct RetryPolicy: Sendable, Hashable {
        /// How many times one request is sent at most (1: never again).
        public var attempts = 6
        /// The ceiling of the first wait of the backoff; it doubles after each wait up to
        /// `maximumBackoff`, each wait random between half the ceiling and the ceiling.
        public var initialBackoff: Duration = .milliseconds(200)
        /// The highest ceiling of a wait of the backoff (a `Retry-After` may ask for longer).
        public var maximumBackoff: Duration = .seconds(10)
        /// The most that the waits for one request add up to: a wait that would pass it (a
        /// `Retry-After` longer than what is left) is not waited, and the refusal is reported.
        public var totalWait: Duration = .seconds(60)

        /// The policy with every setting at its default: six tries within a minute.
        public init() {}

        func start() -> Retries { Retries(policy: self, backoff: Backoff(initial: initialBackoff, maximum: maximumBackoff)) }
    }

    /// The retries of one request so far.
    struct Retries {
        let policy: RetryPolicy
        var backoff: Backoff
        private(set) var attempt = 1
        private(set) var waited: Duration = .zero
        /// The server's `Retry-After` that was not waited for: longer than what was left of `totalWait`.
        private(set) var declined: Duration?

        init(policy: RetryPolicy, backoff: Backoff) {
            self.policy = policy
            self.backoff = backoff
        }

        /// Whether the policy repeats a request that got `error`.
        static func covers(_ error: SyncError, repeatable: Bool) -> Bool {
            error.status == 429 || (error.status == 503 && repeatable)
        }

        /// How long to wait before sending the request again after `error`; nil when it is not sent
        /// again (not a refusal for a while, or the policy's tries or time are spent).
        mutating func wait(after error: SyncError, repeatable: Bool) -> Duration? {
            guard Self.covers(error, repeatable: repeatable), attempt < policy.attempts else { return nil }
            let wait = max(backoff.next(), error.retryAfter ?? .zero)
            guard waited + wait <= policy.totalWait else {
                declined = error.retryAfter.flatMap { $0 == wait ? $0 : nil }
                return nil
            }
            attempt += 1
            waited += wait
            return wait
        }
    }
}

extension SyncError {
    /// The error the request ended with after `retries`: marked as one the client already
    /// repeated (a one-shot step does not repeat it again), saying how often and for how long.
    func retried(by retries: SyncClient.Retries) -> SyncError {
        guard status == 429 || status == 503 else { return self }
        var error = self
        error.isRetriedByClient = true
        if retries.attempt > 1 {
            error.detail += " (sent \(retries.attempt) times over \(Self.seconds(retries.waited)) s)"
        }
        if let declined = retries.declined {
            error.detail += " (it asks to wait \(Self.seconds(declined)) s: longer than this client waits)"
        }
        return error
    }

    /// `duration` in seconds, to a tenth.
    private static func seconds(_ duration: Duration) -> String {
        String(format: "%.1f", Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }
}

/// A `Retry-After` header as a wait (RFC 9110, 10.2.3): delay-seconds, or an HTTP date measured
/// from the answer's own `Date` (so that this machine's clock does not matter) or, without one,
/// from this machine's clock.
enum RetryAfter {
    /// What a larger number of seconds counts as: a year (the policy's `totalWait` bounds the wait).
    static let longestSeconds: UInt64 = 365 * 86_400

    /// The wait `text` asks for; nil for anything else than digits or an IMF-fixdate (a negative
    /// number, a fraction, garbage). A date already past is no wait.
    static func wait(_ text: String, answeredAt date: String?, now: Date = Date()) -> Duration? {
        let text = text.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            return .seconds(min(UInt64(text) ?? longestSeconds, longestSeconds))
        }
        guard let at = ServerClock.parse(text) else { return nil }
        let reference = date.flatMap(ServerClock.parse) ?? UInt64(max(0, now.timeIntervalSince1970 * 1000))
        guard at > reference else { return .zero }
        return .milliseconds(min(at - reference, longestSeconds * 1000))
    }
}
