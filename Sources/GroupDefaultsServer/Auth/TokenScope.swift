package import Foundation
import GroupDefaultsWire

// What a token may do: the one place that says whether it works now and which suites it covers.
extension StoredToken {
    /// Why a token does not work.
    package enum Inactivity: Sendable {
        case revoked
        case expired
    }

    /// Why the token does not work at `date` (revoked wins over expired), nil if it works.
    package func inactivity(at date: Date) -> Inactivity? {
        if revoked != nil { return .revoked }
        if let expires, expires <= date { return .expired }
        return nil
    }

    /// Whether the token works at `date`: not revoked, not expired.
    package func isActive(at date: Date) -> Bool {
        inactivity(at: date) == nil
    }

    /// Whether one of the token's suite patterns matches `suite`.
    package func covers(_ suite: String) -> Bool {
        suitePatterns.contains { GlobPattern.matches($0, suite) }
    }

    /// 403 unless the token covers `suite` (and may write, for a write).
    func authorize(suite: String, write: Bool) throws {
        guard covers(suite) else { throw APIError.forbidden("the token does not cover the suite '\(suite)'") }
        if write, readOnly { throw APIError.forbidden("the token is read-only") }
    }
}
