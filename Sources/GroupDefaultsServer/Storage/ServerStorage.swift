// The seam between the server's HTTP layer and its two storage backends (embedded LMDB, the
// default, and PostgreSQL for several stateless instances). Both implement every protocol below
// with the same semantics, checked by one conformance suite per protocol run against each:
// `SyncStore` (pushes, reads, waits, purge, history), `TokenStore`, `DeviceStore`,
// `PairingStore`, `KeyBagStore`, `SuiteAdmin` (the operator's view and reset),
// `ConsoleRecordStore`, `StorageHealthCheck`, `StorageIncarnation`, `AccountStore` (deleting an
// account), `AuditStore` (the audit log) and `SharingStore` (shared suites' members and
// invitations). Each route, console page and command takes the one it needs; `ServerStorage` is all of them, what the server opens and closes.
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
//   current entry (so a purged tombstone takes its key's history with it). The suite's history is
//   read a page at a time (`history(account:suite:after:limit:)`): keys in UTF-8 byte order, each
//   whole, whole keys while their versions number at most `limit`, at least one key.
// - Devices: a (token, device id) pair is one device; sightings merge into its record.
// - Pairings: keyed by the SHA-256 of their id; a claim and the token it makes are one transaction.
// - Shared suites: a member's pushes and reads are the owner's suite, under the owner's account
//   (its quotas); invitations are keyed by the SHA-256 of their id; accepting one and the
//   membership it makes are one transaction; removing a member wakes the suite's waits.
// - Incarnation: made at the first `incarnation()`, the same from then on for every process and
//   instance, until `renewIncarnation()` (a restore) replaces it.

/// Everything a backend keeps, and closing it: what `buildApplication` opens and the commands of
/// `groupdefaults-server` use.
package protocol ServerStorage: SyncStore, TokenStore, DeviceStore, PairingStore, KeyBagStore, SuiteAdmin, ConsoleRecordStore,
    StorageHealthCheck, StorageIncarnation, AccountStore, AuditStore, SharingStore
{
    /// Closes connections and files.
    func shutdown() async throws
}
