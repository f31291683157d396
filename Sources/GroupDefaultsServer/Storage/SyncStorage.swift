package import Foundation
package import GroupDefaultsWire
import ServiceLifecycle

// The seam between the server's HTTP layer and its two storage backends (embedded LMDB, the
// default, and PostgreSQL for several stateless instances). Both implement `SyncStorage` with the
// same semantics, checked by one conformance test suite run against each.
//
// Semantics every backend keeps:
// - Suites are namespaced per account: (account, suite) is the key of everything below.
// - `push` is one transaction, all or nothing, in which the backend loads what the push step
//   needs (the suite's counters, the batch record, the held entries of the push's keys), runs
//   `PushStep` (last writer wins, revisions, results, idempotency, quotas: the rule lives there,
//   once), and persists its output. Batch records are kept until `purgeTombstones`' horizon
//   passes the time they were pushed. Key and value sizes, batch size and clock skew are checked
//   by the HTTP layer before storage is called (`PushValidation`).
// - `changes(since:)`: the latest entry of each key whose revision is > since, in revision order,
//   at most `limit`; `lastRev` is the last entry's revision, or the head when none; a `since` older
//   than the suite's oldest valid revision (tombstones were purged after it) throws `cursorExpired`,
//   and one older than the revision of the suite's last reset (`resetSuite`) throws `suiteReset`.
// - `snapshot(after:)`: every live entry and unexpired tombstone in key order (UTF-8 byte order),
//   after `after`, at most `limit`; `next` is the last key returned when more follow, else nil.
// - A suite nobody has written is empty: head revision 0, no entries; listing suites shows only
//   suites that have been written.
// - `waitForChange` returns as soon as the suite's head passes `revision` (a push on this instance
//   or, for PostgreSQL, on any instance), or when `timeout` ends, or when the task is cancelled;
//   it is a hint: callers re-read the table afterwards.
// - Tokens: only the SHA-256 of a token is stored; `token(hash:)` finds one by it.
// - History: each push stores every version it makes (value or tombstone, stamp, revision, time
//   received) beside the entries, in the same transaction, and keeps the last `historyDepth` per
//   key. The purge removes versions older than the tombstone horizon unless they are their key's
//   current entry (so a purged tombstone takes its key's history with it).
// - Devices: a (token, device id) pair is one device; sightings merge into its record.
// - Pairings: keyed by the SHA-256 of their id; a claim and the token it makes are one transaction.

/// A bearer token as stored: never the token itself, only its SHA-256.
package struct StoredToken: Sendable, Hashable, Codable {
    /// A short public id (for `token list` and `token revoke`).
    package var id: String
    package var account: String
    /// Suite patterns: globs in which `*` matches any run of characters, dots included.
    package var suitePatterns: [String]
    package var readOnly: Bool
    /// The device the token is bound to (`token create --device NAME`): its name in device lists.
    package var device: String?
    package var created: Date
    package var expires: Date?
    package var revoked: Date?
    /// The token's SHA-256, lowercase hex.
    package var hash: String

    /// Whether the token works at `date`: not revoked, not expired.
    package func isActive(at date: Date) -> Bool {
        revoked == nil && (expires.map { $0 > date } ?? true)
    }

    package init(
        id: String,
        account: String,
        suitePatterns: [String],
        readOnly: Bool,
        device: String? = nil,
        created: Date,
        expires: Date?,
        revoked: Date?,
        hash: String
    ) {
        self.id = id
        self.device = device
        self.account = account
        self.suitePatterns = suitePatterns
        self.readOnly = readOnly
        self.created = created
        self.expires = expires
        self.revoked = revoked
        self.hash = hash
    }
}

/// A written suite and its counters, as the console shows it.
package struct SuiteSummary: Sendable, Hashable {
    package var account: String
    package var name: String
    package var headRev: UInt64
    /// Live keys (tombstones not counted) and the bytes they hold, as the quotas count them.
    package var keys: Int
    package var bytes: Int

    package init(account: String, name: String, headRev: UInt64, keys: Int, bytes: Int) {
        self.account = account
        self.name = name
        self.headRev = headRev
        self.keys = keys
        self.bytes = bytes
    }
}

/// The storage backend's health as the console shows it: which backend, and each check.
package struct StorageHealth: Sendable, Hashable {
    /// One thing checked: what, whether it is well, and what was seen.
    package struct Check: Sendable, Hashable {
        package var name: String
        package var ok: Bool
        package var detail: String

        package init(name: String, ok: Bool, detail: String) {
            self.name = name
            self.ok = ok
            self.detail = detail
        }
    }

    /// "embedded LMDB" or "PostgreSQL".
    package var backend: String
    package var checks: [Check]

    package init(backend: String, checks: [Check]) {
        self.backend = backend
        self.checks = checks
    }
}

/// The kinds of record the console keeps in storage: operators and their sign-in sessions.
package enum ConsoleRecordKind: String, Sendable, CaseIterable {
    case `operator`, session
}

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

/// The bounds storage enforces inside a push: the quotas, and how many versions of each key the
/// history keeps.
package struct SuiteQuota: Sendable, Hashable {
    package var maxKeys: Int
    package var maxBytes: Int
    /// How many versions of each key the history keeps (the current one included); 0 keeps none.
    /// History does not count against `maxKeys` or `maxBytes`.
    package var historyDepth: Int

    package init(maxKeys: Int, maxBytes: Int, historyDepth: Int = 10) {
        self.maxKeys = maxKeys
        self.maxBytes = maxBytes
        self.historyDepth = historyDepth
    }
}

package protocol SyncStorage: Sendable {
    /// Applies a push (see the semantics above): loads what `PushStep` needs, runs it, and persists
    /// its output in one transaction. `serverTime` is written into the response.
    func push(account: String, suite: String, push: PreparedPush, quota: SuiteQuota, serverTime: String) async throws -> PushResponse

    func changes(account: String, suite: String, since: UInt64, limit: Int) async throws -> ChangesPage

    func snapshot(account: String, suite: String, after: String?, limit: Int) async throws -> SnapshotPage

    /// The account's written suites, by name, with head revision and live key count.
    func suites(account: String) async throws -> SuiteList

    func headRevision(account: String, suite: String) async throws -> UInt64

    /// Returns when the suite's head passes `revision`, `timeout` ends, or the task is cancelled.
    func waitForChange(account: String, suite: String, after revision: UInt64, timeout: Duration) async

    /// Removes tombstones whose HLC is older than `horizon`, raising each affected suite's oldest
    /// valid revision to the highest purged revision, and the history versions older than it that
    /// are not their key's current entry. Returns how many tombstones were removed.
    func purgeTombstones(olderThan horizon: HLC) async throws -> Int

    // History
    /// The versions of `key` the history keeps, newest first; empty for a key never written, purged,
    /// or written while history was off.
    func history(account: String, suite: String, key: String) async throws -> [StoredVersion]

    // Devices
    /// Records that a device was seen: creates its record, or merges this sighting into it (first
    /// seen: the earlier; last seen and last push: the later; suites: the union).
    func recordDevice(_ sighting: StoredDevice) async throws
    /// The devices of `account` (every account's, for nil), most recently seen first.
    func devices(account: String?) async throws -> [StoredDevice]

    // Tokens
    func createToken(_ token: StoredToken) async throws
    /// A number that changes whenever any process writes a token (creates, revokes, pairs), read
    /// without blocking: a verification cached under one generation holds while it lasts. Nil when
    /// the backend cannot tell cheaply (then nothing is cached).
    func tokenGeneration() throws -> UInt64?
    func token(hash: String) async throws -> StoredToken?
    func tokens() async throws -> [StoredToken]
    /// Marks a token revoked at `date`; throws `notFound` for an unknown id.
    func revokeToken(id: String, at date: Date) async throws

    // Pairings (`StoredPairing`: its rules are its own; backends apply them in a transaction)
    /// Stores a new pairing, and drops those that expired; `pairingUsed` if its lookup exists.
    func createPairing(_ pairing: StoredPairing) async throws
    /// The pairing under `lookup`, expired or not; nil if there is none.
    func pairing(lookup: String) async throws -> StoredPairing?
    /// Claims the pairing (`StoredPairing.claim`) and stores `token`, the claiming device's, in one
    /// transaction; `pairingNotFound`, `pairingExpired`, `pairingUsed`.
    func claimPairing(lookup: String, claim: PairingClaim, token: StoredToken, now: Date) async throws -> StoredPairing
    /// Stores the sealed keys (`StoredPairing.complete`) and gives the claiming device's token its
    /// lasting expiry, `tokenExpires` (nil: none), in one transaction; until then it works for
    /// nothing (it is made expired). `pairingNotFound`, `pairingExpired`, `pairingUsed`.
    func completePairing(lookup: String, bundle: String, now: Date, tokenExpires: Date?) async throws -> StoredPairing
    /// Cancels the pairing (`StoredPairing.cancel`) and revokes the claiming device's token, if
    /// any, at `now`, in one transaction. `pairingNotFound`, `pairingUsed`.
    func cancelPairing(lookup: String, now: Date) async throws -> StoredPairing

    // The operator's reset (`SuiteReset`)
    /// Clears the suite: its entries, history and batch records are deleted (with `keys`, its key
    /// bags and anchor too, and its key epoch forgotten), in one transaction; its revisions go on
    /// from one taken by the reset (`SuiteReset.revision(after:)`), which it remembers, so that a
    /// cursor from before is answered `suiteReset` (`changes`). Returns how many live keys it held;
    /// nil if there is no such suite.
    func resetSuite(account: String, suite: String, keys: Bool) async throws -> Int?

    // Key bags: each key epoch's key sealed to the suite's recovery key (opaque here), signed
    // (`KeyBagRule`: its rules are its own; backends apply them in a transaction)
    /// Stores the key bag of `epoch` and moves the suite to that epoch, if `KeyBagRule.put` takes it.
    func putKeyBag(account: String, suite: String, epoch: UInt32, bag: SignedKeyBag) async throws
    /// Stores the suite's anchor, if `KeyBagRule.anchor` takes it (the same anchor again: nothing).
    func anchorKeyBags(account: String, suite: String, anchor: KeyAnchor) async throws
    /// The stored key bags of the suite, by epoch (epoch 1: the anchor).
    func keyBags(account: String, suite: String) async throws -> [UInt32: StoredKeyBag]

    // The console's view and state
    /// The written suites of `account` (of every account, for nil) with their counters, by account
    /// then name.
    func suiteSummaries(account: String?) async throws -> [SuiteSummary]
    /// What the backend can tell of its health now (the console's overview); never throws.
    func health() async -> StorageHealth
    /// The console's record of `kind` named `name`, if any (opaque bytes: `ConsoleRecords` gives them meaning).
    func consoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> [UInt8]?
    /// Every console record of `kind`, by name.
    func consoleRecords(_ kind: ConsoleRecordKind) async throws -> [(name: String, value: [UInt8])]
    /// Stores a console record; with `onlyIfNew`, a record that exists is left as it is and the
    /// answer is false.
    func putConsoleRecord(_ kind: ConsoleRecordKind, name: String, value: [UInt8], onlyIfNew: Bool) async throws -> Bool
    /// Removes a console record; false if there was none.
    func deleteConsoleRecord(_ kind: ConsoleRecordKind, name: String) async throws -> Bool

    /// Wakes every `waitForChange` now, and makes later ones return at once (graceful shutdown:
    /// event streams and long-polls end instead of waiting out their time).
    func endWaits()

    /// Closes connections and files.
    func shutdown() async throws
}

extension SyncStorage {
    /// `waitForChange`, ended early by graceful shutdown (which ends every wait: `endWaits`).
    /// Returns whether the server is shutting down.
    func waitForChangeUntilShutdown(account: String, suite: String, after revision: UInt64, timeout: Duration) async -> Bool {
        await withGracefulShutdownHandler {
            await waitForChange(account: account, suite: suite, after: revision, timeout: timeout)
        } onGracefulShutdown: {
            endWaits()
        }
        return Task.isShuttingDownGracefully
    }

    /// Nothing is cached unless a backend says when tokens change.
    package func tokenGeneration() throws -> UInt64? { nil }

    /// Applies a push given as a plain request (its values encoded here).
    package func push(account: String, suite: String, request: PushRequest, quota: SuiteQuota, serverTime: String) async throws -> PushResponse {
        try await push(account: account, suite: suite, push: PreparedPush(request), quota: quota, serverTime: serverTime)
    }
}
