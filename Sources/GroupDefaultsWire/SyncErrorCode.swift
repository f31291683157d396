/// The machine-readable `error` of a sync server's error answer (`SyncErrorBody.error`): the one
/// list of codes the server sends and the client reads, each with the HTTP status it comes with.
///
/// Match a client error on its code:
/// ```swift
/// do { try await engine.push() }
/// catch SyncErrorCode.quotaExceeded { … }
/// ```
/// Codes this client does not know (from a newer server) are kept as they came; `isKnown` tells.
public struct SyncErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible, Codable {
    /// The code as it travels: lowercase words joined by `_`.
    public let rawValue: String

    /// A code, known or not; compare with the static members.
    public init(rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    /// The request cannot be read: not JSON, the wrong shape, a query parameter out of range (400).
    public static let malformed = SyncErrorCode(rawValue: "malformed")
    /// No token, or one that is unknown, expired or revoked (401).
    public static let unauthorized = SyncErrorCode(rawValue: "unauthorized")
    /// The suite is outside the token's patterns, or a read-only token tried to write (403). (What
    /// a shared suite's membership refuses has codes of its own: `notAMember`, `insufficientRole`.)
    public static let forbidden = SyncErrorCode(rawValue: "forbidden")
    /// No such route, or (token commands) no such token (404).
    public static let notFound = SyncErrorCode(rawValue: "not_found")
    /// The route does not take that method (405).
    public static let methodNotAllowed = SyncErrorCode(rawValue: "method_not_allowed")
    /// The revision asked for is older than the suite's oldest valid one: read the snapshot again
    /// (410; also the event stream's `cursor_expired` event).
    public static let cursorExpired = SyncErrorCode(rawValue: "cursor_expired")
    /// The request body is larger than the server takes (413).
    public static let bodyTooLarge = SyncErrorCode(rawValue: "body_too_large")
    /// The batch has more ops than the server takes (413).
    public static let batchTooLarge = SyncErrorCode(rawValue: "batch_too_large")
    /// The server cannot store a suite of this name (422).
    public static let invalidSuite = SyncErrorCode(rawValue: "invalid_suite")
    /// A key is longer than the server takes (422).
    public static let keyTooLong = SyncErrorCode(rawValue: "key_too_long")
    /// A value's typed JSON is larger than the server takes: the op's result is `refused` with this
    /// code, and the batch's other ops are applied (`PushResult`).
    public static let valueTooLarge = SyncErrorCode(rawValue: "value_too_large")
    /// A value nests arrays and dictionaries more than `PropertyListValue.maximumNestingDepth`
    /// levels deep (422).
    public static let valueTooDeep = SyncErrorCode(rawValue: "value_too_deep")
    /// The push would take the suite over its key or byte quota (422).
    public static let quotaExceeded = SyncErrorCode(rawValue: "quota_exceeded")
    /// An HLC is too far ahead of the server's clock: the op's result is `refused` with this code,
    /// and the batch's other ops are applied (`PushResult`). A sync engine also reports it when this
    /// device's clock is behind the server's.
    public static let clockSkew = SyncErrorCode(rawValue: "clock_skew")
    /// The batch id was already used for other ops (422).
    public static let idempotencyMismatch = SyncErrorCode(rawValue: "idempotency_mismatch")
    /// A plain push to a suite whose entries are end-to-end encrypted: configure this device with
    /// the suite's key (`--pairing-code` or `--recovery-key`) (409).
    public static let suiteEncrypted = SyncErrorCode(rawValue: "suite_encrypted")
    /// A sealed push to a suite whose entries are plain: a suite is encrypted for every device or
    /// for none (409).
    public static let suiteNotEncrypted = SyncErrorCode(rawValue: "suite_not_encrypted")
    /// A sealed push under a key epoch older than the suite's newest: the suite's key was rotated,
    /// pair this device again (409).
    public static let staleKeyEpoch = SyncErrorCode(rawValue: "stale_key_epoch")
    /// The operator reset the suite (`groupdefaults-server suites reset`) after this cursor: the
    /// server's copy starts again, empty. A device joins it again: it reads the (new) snapshot and
    /// uploads what it holds (410).
    public static let suiteReset = SyncErrorCode(rawValue: "suite_reset")
    /// The account whose suite the device syncs was deleted, and its name is now a new account's
    /// (the request's `Account-Incarnation` is not the account's): the device stops, keeping its
    /// data, and never uploads into the new account until its user starts over (410).
    public static let accountDeleted = SyncErrorCode(rawValue: "account_deleted")
    /// A key bag that is not signed by the suite's current key or its recovery key (or whose
    /// signature does not check out): only a holder of one of them moves a suite to a new key (403).
    public static let keyBagUnsigned = SyncErrorCode(rawValue: "key_bag_unsigned")
    /// A key bag for a suite that has no anchor yet (`PUT …/key-bags` first) (409).
    public static let keyAnchorMissing = SyncErrorCode(rawValue: "key_anchor_missing")
    /// The suite's keys were anchored by a device with other keys (another recovery key), or this
    /// anchor does not match the bags the server holds (409).
    public static let keyAnchorMismatch = SyncErrorCode(rawValue: "key_anchor_mismatch")
    /// No pairing has this code: mistyped, or never made (404).
    public static let pairingNotFound = SyncErrorCode(rawValue: "pairing_not_found")
    /// The pairing code was already used: each code pairs one device (409).
    public static let pairingUsed = SyncErrorCode(rawValue: "pairing_used")
    /// The pairing code expired (10 minutes after it was made): make a new one (410).
    public static let pairingExpired = SyncErrorCode(rawValue: "pairing_expired")
    /// No invitation has this code: mistyped, or never made; or the asking account cannot see the
    /// one named (404).
    public static let invitationNotFound = SyncErrorCode(rawValue: "invitation_not_found")
    /// The invitation was already accepted: each code adds one account (409).
    public static let invitationUsed = SyncErrorCode(rawValue: "invitation_used")
    /// The invitation expired, or its owner or an admin revoked it: ask for a new one (410).
    public static let invitationExpired = SyncErrorCode(rawValue: "invitation_expired")
    /// The suite the request names with `owner` is not shared with the token's account: never, or
    /// no longer (removed, or it left). A new invitation brings it back (403).
    public static let notAMember = SyncErrorCode(rawValue: "not_a_member")
    /// The account's role in a shared suite does not allow the request: a `read` member pushing, a
    /// member that is no admin inviting or removing, an admin making an admin (403).
    public static let insufficientRole = SyncErrorCode(rawValue: "insufficient_role")
    /// The account already shares the suite (its owner, or a member), or the change would leave
    /// a suite without its owner (409).
    public static let memberConflict = SyncErrorCode(rawValue: "member_conflict")
    /// One op of a member's push wrote a key the suite's owner (or an admin) pinned: the owner's
    /// value stands (per op, in a push's results; `PinnedKeys`).
    public static let pinnedKey = SyncErrorCode(rawValue: "pinned_key")
    /// The token made more requests than the server allows; retry after `Retry-After` (429).
    public static let rateLimited = SyncErrorCode(rawValue: "rate_limited")
    /// The token already holds as many open event streams and waiting long-polls as the server
    /// allows one token (`max_streams_per_token`); retry after `Retry-After`, once one has ended (429).
    public static let tooManyStreams = SyncErrorCode(rawValue: "too_many_streams")
    /// The server's storage cannot be reached; retry after `Retry-After` (503).
    public static let unavailable = SyncErrorCode(rawValue: "unavailable")

    /// Every code the server sends, in the order `openapi.yaml` lists them.
    public static let allKnown: [SyncErrorCode] = [
        .malformed, .unauthorized, .forbidden, .notFound, .methodNotAllowed, .cursorExpired, .suiteReset, .accountDeleted, .bodyTooLarge,
        .batchTooLarge, .invalidSuite, .keyTooLong, .valueTooLarge, .valueTooDeep, .quotaExceeded, .clockSkew,
        .idempotencyMismatch, .suiteEncrypted, .suiteNotEncrypted, .staleKeyEpoch, .keyBagUnsigned, .keyAnchorMissing,
        .keyAnchorMismatch, .pairingNotFound, .pairingUsed,
        .pairingExpired, .invitationNotFound, .invitationUsed, .invitationExpired, .notAMember, .insufficientRole, .memberConflict, .pinnedKey,
        .rateLimited,
        .tooManyStreams, .unavailable,
    ]

    /// Whether this is one of `allKnown`.
    public var isKnown: Bool { Self.allKnown.contains(self) }

    /// The HTTP status this code is answered with.
    public var status: Int {
        switch self {
        case .malformed: 400
        case .unauthorized: 401
        case .forbidden, .keyBagUnsigned, .insufficientRole, .notAMember, .pinnedKey: 403
        case .notFound: 404
        case .methodNotAllowed: 405
        case .pairingNotFound, .invitationNotFound: 404
        case .suiteEncrypted, .suiteNotEncrypted, .staleKeyEpoch, .keyAnchorMissing, .keyAnchorMismatch, .pairingUsed, .invitationUsed,
            .memberConflict:
            409
        case .cursorExpired, .suiteReset, .accountDeleted, .pairingExpired, .invitationExpired: 410
        case .bodyTooLarge, .batchTooLarge: 413
        case .rateLimited, .tooManyStreams: 429
        case .unavailable: 503
        default: 422
        }
    }

    /// Whether a push refused with this code names one key or the batch as the cause, so that the
    /// client sets the key aside (a limit broken by the value itself) rather than retrying.
    public var refusesChange: Bool {
        [.valueTooLarge, .valueTooDeep, .keyTooLong, .quotaExceeded, .batchTooLarge, .bodyTooLarge, .idempotencyMismatch].contains(self)
    }

    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

extension SyncErrorCode {
    /// Lets `catch SyncErrorCode.quotaExceeded` match any error that carries this code
    /// (`SyncErrorBody` on the wire, and the errors of the client and the server built on it).
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? any SyncErrorCoded)?.syncErrorCode == code
    }
}

/// An error that carries a sync error code, so that `catch SyncErrorCode.x` matches it.
public protocol SyncErrorCoded: Error {
    /// The code, if the error has one.
    var syncErrorCode: SyncErrorCode? { get }
}
