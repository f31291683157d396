import Foundation
import GroupDefaultsWire
import Hummingbird
import Synchronization

/// How many requests a token may make: a token bucket per token, refilled at `requestsPerSecond`,
/// holding at most `burst`. In memory, per server instance.
package struct RateLimit: Sendable, Hashable {
    package var requestsPerSecond: Double
    package var burst: Double

    /// How many seconds of requests a burst holds unless told: 2 (`burst` twice the rate).
    package static let burstSeconds = 2.0

    /// A bucket refilled at `requestsPerSecond`, holding `burst` (by default `burstSeconds` of
    /// requests).
    package init(requestsPerSecond: Double, burst: Double? = nil) {
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst ?? Self.burstSeconds * requestsPerSecond
    }
}

/// The buckets, by token id.
package final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let limit: RateLimit
    private let buckets = Mutex<[String: Bucket]>([:])

    package init(_ limit: RateLimit) {
        self.limit = limit
    }

    /// Takes one request from `key`'s bucket: nil if admitted, else how long until one is available.
    package func admit(_ key: String, now: ContinuousClock.Instant = .now) -> Duration? {
        buckets.withLock { buckets in
            var bucket = buckets[key] ?? Bucket(tokens: limit.burst, updated: now)
            let elapsed = now - bucket.updated
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(limit.burst, bucket.tokens + seconds * limit.requestsPerSecond)
            bucket.updated = now
            defer { buckets[key] = bucket }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return .seconds((1 - bucket.tokens) / limit.requestsPerSecond)
        }
    }
}

/// What a request's rate limit is kept under: its token, or for the pairing routes without one
/// (claims, and the claiming device's reads of its state), its client address.
protocol RateLimitedContext: RequestContext {
    /// The bucket's key, nil for a request nothing limits.
    var rateLimitBucket: String? { get }
    /// Who used the allowance, in the refusal: "this token" or "pairing claims".
    var rateLimitSubject: String { get }
}

extension TokenRequestContext: RateLimitedContext {
    var rateLimitBucket: String? { token.id }
    var rateLimitSubject: String { "this token" }
}

extension ServerRequestContext: RateLimitedContext {
    // Only the pairing groups limit this context: each client address has a budget for the
    // requests that come without a token, as a token has.
    var rateLimitBucket: String? { token?.id ?? "pairings from \(clientAddress ?? "an unknown address")" }
    var rateLimitSubject: String { token == nil ? "pairing claims" : "this token" }
}

/// After the authentication of its group: 429 `rate_limited` with `Retry-After` (whole seconds, at
/// least 1) when the request's bucket has used its allowance.
struct RateLimitMiddleware<Context: RateLimitedContext>: RouterMiddleware {
    let limiter: RateLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let bucket = context.rateLimitBucket, let wait = limiter.admit(bucket) {
            let seconds = max(1, Int((Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18).rounded(.up)))
            throw APIError(
                .rateLimited,
                "\(context.rateLimitSubject) made more than \(Self.rate(limiter.limit.requestsPerSecond)) requests per second; retry after \(seconds) s",
                headers: [.retryAfter: String(seconds)]
            )
        }
        return try await next(request, context)
    }

    /// A rate as the refusal says it: `200`, `0.5` (a fraction is not cut to `0`).
    static func rate(_ requestsPerSecond: Double) -> String {
        requestsPerSecond == requestsPerSecond.rounded() ? String(Int(requestsPerSecond)) : String(requestsPerSecond)
    }
}
