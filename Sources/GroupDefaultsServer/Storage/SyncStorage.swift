public import Foundation
public import GroupDefaults

// The seam between the server's HTTP layer and its two storage backends (embedded LMDB, the
// default, and PostgreSQL for several stateless instances). Both implement `SyncStorage` with the
// same semantics, checked by one conformance test suite run against each.
//
// Semantics every backend keeps:
// - Suites are namespaced per account: (account, suite) is the key of everything below.
// - `push` is one transaction, all or nothing. Per key the larger (HLC, origin) wins against the
//   stored entry, value or tombstone (`SyncMerge.wins`); the device id is the origin of every op.
//   Each applied op gets its own revision from the suite's counter, in commit order (a counter
//   updated in the push transaction, never a sequence). Superseded ops get none.
// - A batch is idempotent by (account, suite, device, batch id): the same ops again return the
//   stored response and change nothing; other ops under the same id throw `idempotencyMismatch`.
//   Batch records are kept until `purgeTombstones`' horizon passes the time they were pushed.
// - A push's results come in the order of its ops; each result's `winner` is what the server holds
//   for the key after the whole push (with several ops on one key, every result shows the last).
// - Quotas (keys per suite, bytes per suite: the sum over live keys of key bytes plus the value's
//   typed JSON bytes) are checked inside the push transaction, after the merge: a push that would
//   exceed one throws `quotaExceeded` and changes nothing. Key and value sizes, batch size and clock
//   skew are checked by the HTTP layer before storage is called (`PushValidation`).
// - `changes(since:)`: the latest entry of each key whose revision is > since, in revision order,
//   at most `limit`; `lastRev` is the last entry's revision, or the head when none; a `since` older
//   than the suite's oldest valid revision (tombstones were purged after it) throws `cursorExpired`.
// - `snapshot(after:)`: every live entry and unexpired tombstone in key order (UTF-8 byte order),
//   after `after`, at most `limit`; `next` is the last key returned when more follow, else nil.
// - A suite nobody has written is empty: head revision 0, no entries; listing suites shows only
//   suites that have been written.
// - `waitForChange` returns as soon as the suite's head passes `revision` (a push on this instance
//   or, for PostgreSQL, on any instance), or when `timeout` ends, or when the task is cancelled;
//   it is a hint: callers re-read the table afterwards.
// - Tokens: only the SHA-256 of a token is stored; `token(hash:)` finds one by it.

/// A bearer token as stored: never the token itself, only its SHA-256.
public struct StoredToken: Sendable, Hashable, Codable {
    /// A short public id (for `token list` and `token revoke`).
    public var id: String
    public var account: String
    /// Suite patterns: globs in which `*` matches any run of characters, dots included.
    public var suitePatterns: [String]
    public var readOnly: Bool
    public var created: Date
    public var expires: Date?
    public var revoked: Date?
    /// The token's SHA-256, lowercase hex.
    public var hash: String

    public init(id: String, account: String, suitePatterns: [String], readOnly: Bool, created: Date,
                expires: Date?, revoked: Date?, hash: String) {
        self.id = id
        self.account = account
        self.suitePatterns = suitePatterns
        self.readOnly = readOnly
        self.created = created
        self.expires = expires
        self.revoked = revoked
        self.hash = hash
    }
}

/// What storage refuses, with what the HTTP layer needs to answer (the error middleware maps each
/// code to its status and JSON `error` code).
public struct SyncStorageError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case idempotencyMismatch = "idempotency_mismatch"  // 422
        case quotaExceeded = "quota_exceeded"              // 422
        case cursorExpired = "cursor_expired"              // 410
        case unavailable                                   // 503 with Retry-After
        case notFound = "not_found"                        // 404 (token id unknown, for revoke)
    }

    public var code: Code
    public var detail: String
    /// The limit concerned (quotas).
    public var limit: Int?

    public init(_ code: Code, _ detail: String, limit: Int? = nil) {
        self.code = code
        self.detail = detail
        self.limit = limit
    }

    public var description: String { "\(code.rawValue): \(detail)" }
}

/// The quotas storage enforces inside a push.
public struct SuiteQuota: Sendable, Hashable {
    public var maxKeys: Int
    public var maxBytes: Int

    public init(maxKeys: Int, maxBytes: Int) {
        self.maxKeys = maxKeys
        self.maxBytes = maxBytes
    }
}

public protocol SyncStorage: Sendable {
    /// Applies a push (see the semantics above). `serverTime` is written into the response.
    func push(account: String, suite: String, request: PushRequest, quota: SuiteQuota, serverTime: String) async throws -> PushResponse

    func changes(account: String, suite: String, since: UInt64, limit: Int) async throws -> ChangesPage

    func snapshot(account: String, suite: String, after: String?, limit: Int) async throws -> SnapshotPage

    /// The account's written suites, by name, with head revision and live key count.
    func suites(account: String) async throws -> SuiteList

    func headRevision(account: String, suite: String) async throws -> UInt64

    /// Returns when the suite's head passes `revision`, `timeout` ends, or the task is cancelled.
    func waitForChange(account: String, suite: String, after revision: UInt64, timeout: Duration) async

    /// Removes tombstones whose HLC is older than `horizon`, raising each affected suite's oldest
    /// valid revision to the highest purged revision. Returns how many were removed.
    func purgeTombstones(olderThan horizon: HLC) async throws -> Int

    // Tokens
    func createToken(_ token: StoredToken) async throws
    func token(hash: String) async throws -> StoredToken?
    func tokens() async throws -> [StoredToken]
    /// Marks a token revoked at `date`; throws `notFound` for an unknown id.
    func revokeToken(id: String, at date: Date) async throws

    /// Closes connections and files.
    func shutdown() async throws
}

/// Last writer wins, shared by every backend.
public enum SyncMerge {
    /// Whether an op stamped `incoming` replaces what is stored (stamped `stored`, nil if nothing).
    public static func wins(_ incoming: Stamp, over stored: Stamp?) -> Bool {
        guard let stored else { return true }
        return incoming > stored
    }

    /// The bytes a live entry counts against a suite's byte quota: its key's UTF-8 and its value's
    /// typed JSON.
    public static func quotaBytes(key: String, value: PropertyListValue) throws -> Int {
        key.utf8.count + (try JSONEncoder().encode(value).count)
    }
}
