import GroupDefaults

/// Why a sync step failed, in words a person can act on.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        /// The token is missing, unknown, expired or revoked (401), or does not cover the suite or
        /// writing (403): sync pauses until it is given a working token; nothing pending is lost.
        case authenticationNeeded
        /// The server refused a key or a batch (413, 422): the key and the limit are named; the local
        /// value is kept and the other keys go on.
        case rejected
        /// The server could not be reached, was busy (429) or unavailable (503): retried with backoff.
        case unavailable
        /// The server answered something this client does not understand.
        case protocolError
        /// The local suite failed (a `SharedDefaultsError`).
        case local
    }

    public var kind: Kind
    /// The server's error code (`value_too_large`, `quota_exceeded`, …) when it gave one.
    public var code: String?
    public var detail: String
    /// The key concerned, when there is one.
    public var key: String?
    /// The limit that was exceeded, when there is one.
    public var limit: Int?
    /// How long the server asked to wait (`Retry-After`).
    public var retryAfter: Duration?
    /// The HTTP status, when the server answered.
    public var status: Int?

    public init(
        _ kind: Kind, code: String? = nil, _ detail: String, key: String? = nil, limit: Int? = nil,
        retryAfter: Duration? = nil, status: Int? = nil
    ) {
        self.kind = kind
        self.code = code
        self.detail = detail
        self.key = key
        self.limit = limit
        self.retryAfter = retryAfter
        self.status = status
    }

    /// Whether trying again later can succeed without anyone doing anything.
    public var isTransient: Bool { kind == .unavailable }

    public var description: String {
        switch kind {
        case .authenticationNeeded:
            return "authentication needed: \(detail)"
        case .rejected:
            var text = "the server refused "
            text += key.map { "'\($0)'" } ?? "the change"
            text += " (\(code ?? "rejected")): \(detail)"
            if let limit { text += " (limit \(limit))" }
            return text
        case .unavailable:
            return "the server is unavailable: \(detail)"
        case .protocolError:
            return "unexpected answer from the server: \(detail)"
        case .local:
            return detail
        }
    }

    /// A 4xx/5xx answer, by its status and JSON error body.
    static func answer(status: Int, body: SyncErrorBody?, retryAfter: Duration?) -> SyncError {
        let code = body?.error
        let detail = body?.detail ?? "HTTP status \(status)"
        switch status {
        case 401, 403:
            return SyncError(.authenticationNeeded, code: code, detail, status: status)
        case 408, 429, 500...:
            return SyncError(.unavailable, code: code, detail, retryAfter: retryAfter, status: status)
        case 410:
            return SyncError(.rejected, code: code ?? "cursor_expired", detail, status: status)
        case 413, 422:
            return SyncError(.rejected, code: code, detail, key: body?.key, limit: body?.limit, status: status)
        default:
            return SyncError(.protocolError, code: code, "\(detail) (HTTP \(status))", status: status)
        }
    }

    /// The task was cancelled while waiting.
    static let cancelled = SyncError(.local, "cancelled")

    var isCursorExpired: Bool { status == 410 || code == "cursor_expired" }

    static func local(_ error: any Error) -> SyncError {
        if let error = error as? SyncError { return error }
        return SyncError(.local, "\(error)")
    }
}
