import GroupDefaults
public import GroupDefaultsWire

/// Why a sync step failed, in words a person can act on.
public struct SyncError: Error, Sendable, Hashable, CustomStringConvertible, SyncErrorCoded {
    /// What kind of failure an error is, which decides what the sync engine does: wait for a token,
    /// skip the key, retry with backoff, or report it.
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

    /// What kind of failure this is, which says what the engine does about it.
    public var kind: Kind
    /// The server's error code (`valueTooLarge`, `quotaExceeded`, …) when it gave one.
    public var code: SyncErrorCode?
    /// What went wrong, for a person.
    public var detail: String
    /// The key concerned, when there is one.
    public var key: String?
    /// The limit that was exceeded, when there is one.
    public var limit: Int?
    /// How long the server asked to wait (`Retry-After`).
    public var retryAfter: Duration?
    /// The HTTP status, when the server answered.
    public var status: Int?
    /// Whether this is a change the engine set aside (`SyncStatus.rejected`): refused alone by the
    /// server, or one this device cannot send. It stays local and pending.
    public var isSetAside = false
    /// Whether the request got no answer because the server could not be reached (refused, unknown
    /// host, TLS failure, no connection in time) or did not answer in time: a one-shot step reports
    /// it at once rather than waiting through retries; `SyncEngine.run()` retries it with backoff.
    public var isUnreached = false
    /// Whether waiting will not fix it: the server's host name is unknown, or TLS cannot work with
    /// its URL (a plain-HTTP server named https://, a certificate that does not verify). Check the
    /// URL (or `--ca-file`) instead of trying again later.
    public var isLasting = false
    /// Whether the client already sent the request again as its `SyncClient.RetryPolicy` says (a
    /// 429, or a 503 to a request that may arrive twice): a one-shot step reports it rather than
    /// repeating the step.
    var isRetriedByClient = false
    /// What a person can do about it, when the engine knows. `description` says it in words that
    /// name no program; a tool names its own verbs and options (`description(remedy:)`).
    public var remedy: Remedy?

    /// What a person can do about an error of the encrypted suite's keys.
    public enum Remedy: String, Sendable, Hashable {
        /// This device lacks the suite's keys: it gets them by pairing with a device that has them
        /// (`DevicePairing`), or from the suite's recovery key (`SyncSetup.Keys`).
        case getSuiteKeys
        /// The suite's key was rotated since this device got its keys: pair it again with a device
        /// that has the new key.
        case pairAgain
        /// This device rotated the key, and the server never stored the new epoch's key bag: rotate
        /// again on this device to store it.
        case rotateAgain
        /// This device's keys are newer than the suite's on the server, which a device with older
        /// keys anchored after a reset: pair that device from this one, or have the server's
        /// operator reset the suite's keys again and sync this device first.
        case pairFromThisDevice
        /// The suite is anchored to other keys than this device's: set this device up again with
        /// the suite's own recovery key or a pairing code, or have the operator reset its keys.
        case setUpAgainOrReset
        /// The account the suite synced with was deleted on the server and its name is a new
        /// account's: set the suite up again to start over in the new account (what this device
        /// holds is uploaded there, by the joining rule), or stop syncing it and keep it here.
        case startOver
        /// The account that owns the shared suite this copy is a member's of was deleted on the
        /// server, and its name is a new account's: the copy joins none of its suites, nor the
        /// member's own; keep it on this device.
        case keepCopy

        /// The remedy in words that name no program.
        public var description: String {
            switch self {
            case .getSuiteKeys:
                "pair this device with one that has the key, or set it up with the suite's recovery key"
            case .pairAgain:
                "pair this device again with one that has the new key"
            case .rotateAgain:
                "rotate the key again on this device to store it"
            case .pairFromThisDevice:
                "pair that device from this one, or have the server's operator reset the suite's keys again and sync this device first"
            case .setUpAgainOrReset:
                "set this device up again with the suite's own recovery key or a pairing code, or have the server's operator reset the suite's keys"
            case .startOver:
                "set the suite up again to start over in the new account (what this device holds is uploaded there), or stop syncing it and keep it on this device"
            case .keepCopy:
                "the suite's owner's account was deleted: this copy joins none of the new account's suites, nor this account's; stop syncing it and keep it on this device"
            }
        }
    }

    /// A failure of the given kind.
    public init(
        _ kind: Kind,
        code: SyncErrorCode? = nil,
        _ detail: String,
        key: String? = nil,
        limit: Int? = nil,
        retryAfter: Duration? = nil,
        status: Int? = nil
    ) {
        self.kind = kind
        self.code = code
        self.detail = detail
        self.key = key
        self.limit = limit
        self.retryAfter = retryAfter
        self.status = status
    }

    /// A refusal by the server, classified by its code (or, for a code this client does not know,
    /// by its HTTP status): the one place that decides what each code means to the engine.
    package init(
        refusal code: SyncErrorCode?,
        status: Int?,
        _ detail: String,
        key: String? = nil,
        limit: Int? = nil,
        retryAfter: Duration? = nil
    ) {
        self.init(
            Self.kind(of: code, status: status),
            code: code,
            detail,
            key: key,
            limit: limit,
            retryAfter: retryAfter,
            status: status
        )
        if code == .accountDeleted { remedy = .startOver }
    }

    /// The account the suite synced with was deleted on the server, and its name is a new
    /// account's (an answer, or the server's refusal, named another incarnation of the account than
    /// the suite remembers): sync pauses, keeping everything here, until the suite is set up again.
    static func accountDeleted(_ detail: String) -> SyncError {
        var error = SyncError(.authenticationNeeded, code: .accountDeleted, detail)
        error.remedy = .startOver
        return error
    }

    static func kind(of code: SyncErrorCode?, status: Int?) -> Kind {
        if let status, status == 408 || status == 429 || status >= 500 { return .unavailable }
        switch code {
        case .unauthorized?, .forbidden?, .notAMember?, .accountDeleted?: return .authenticationNeeded
        case .rateLimited?, .tooManyStreams?, .unavailable?: return .unavailable
        case .malformed?, .notFound?, .methodNotAllowed?: return .protocolError
        case let code? where code.isKnown: return .rejected
        default: break
        }
        switch status {
        case 401, 403: return .authenticationNeeded
        case 410, 413, 422: return .rejected
        default: return .protocolError
        }
    }

    /// Whether trying again later can succeed without anyone doing anything.
    public var isTransient: Bool { kind == .unavailable }

    /// What went wrong, and what to do about it (`remedy`) in words that name no program.
    public var description: String { description(remedy: \.description) }

    /// What went wrong, with the remedy, if any, in the words `remedy` gives for it: a tool names
    /// its verbs and options.
    public func description(remedy words: (Remedy) -> String) -> String {
        guard let remedy else { return problem }
        return "\(problem): \(words(remedy))"
    }

    /// What went wrong, without the remedy.
    private var problem: String {
        switch kind {
        case .authenticationNeeded where code == .accountDeleted:
            return "account deleted: \(detail)"
        case .authenticationNeeded:
            return "authentication needed: \(detail)"
        case .rejected:
            var text = isSetAside ? "not pushed: " : "the server refused "
            text += key.map { "'\($0)'" } ?? (Self.requestCodes.contains(code) ? "the request" : "the change")
            text += " (\(code?.rawValue ?? "rejected")): \(detail)"
            if let limit { text += " (limit \(limit))" }
            return text
        case .unavailable:
            // No status: the detail says why no answer came ("cannot reach URL: connection refused").
            return status == nil ? detail : "the server is unavailable: \(detail)"
        case .protocolError:
            return "unexpected answer from the server: \(detail)"
        case .local:
            return detail
        }
    }

    /// A 4xx/5xx answer, by its status and JSON error body.
    package static func answer(status: Int, body: SyncErrorBody?, retryAfter: Duration?) -> SyncError {
        let code = body?.error ?? (status == 410 ? .cursorExpired : nil)
        var error = SyncError(
            refusal: code,
            status: status,
            body?.detail ?? "HTTP status \(status)",
            key: body?.key,
            limit: body?.limit,
            retryAfter: retryAfter
        )
        if error.kind == .protocolError { error.detail += " (HTTP \(status))" }
        return error
    }

    /// The server's error code (`code`), so that `catch SyncErrorCode.x` matches this error.
    public var syncErrorCode: SyncErrorCode? { code }

    /// Codes that refuse a request other than a push (a pull, a key bag), which changed nothing.
    private static let requestCodes: Set<SyncErrorCode?> = [
        .suiteReset, .cursorExpired, .keyBagUnsigned, .keyAnchorMissing, .keyAnchorMismatch, .invitationNotFound, .invitationUsed,
        .invitationExpired, .insufficientRole, .memberConflict, .notAMember, .accountDeleted,
    ]

    /// The task was cancelled while waiting.
    static let cancelled = SyncError(.local, "cancelled")

    var isCursorExpired: Bool { code == .cursorExpired }

    static func local(_ error: any Error) -> SyncError {
        if let error = error as? SyncError { return error }
        return SyncError(.local, "\(error)")
    }
}
