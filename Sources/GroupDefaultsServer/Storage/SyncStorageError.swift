package import GroupDefaultsWire

/// What storage refuses, with what the HTTP layer needs to answer (the error middleware maps each
/// code to its status and JSON `error` code).
package struct SyncStorageError: Error, Sendable, CustomStringConvertible, SyncErrorCoded {
    /// Storage uses the wire's codes: `idempotencyMismatch`, `quotaExceeded`, `cursorExpired`,
    /// `unavailable` (503 with Retry-After) and `notFound` (an unknown token id, for revoke).
    package typealias Code = SyncErrorCode

    package var code: Code
    package var detail: String
    /// The limit concerned (quotas).
    package var limit: Int?

    package init(_ code: Code, _ detail: String, limit: Int? = nil) {
        self.code = code
        self.detail = detail
        self.limit = limit
    }

    package var description: String { "\(code.rawValue): \(detail)" }

    package var syncErrorCode: SyncErrorCode? { code }

    /// `suiteReset` for a cursor from before the suite's last reset.
    package static func suiteReset(_ suite: String, since: UInt64) -> SyncStorageError {
        SyncStorageError(
            .suiteReset,
            "suite \(suite) was reset by the server's operator since revision \(since): join it again (read the snapshot, upload what this device holds)"
        )
    }
}
