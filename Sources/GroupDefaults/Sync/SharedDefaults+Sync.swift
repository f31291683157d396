internal import GroupDefaultsLMDB
package import GroupDefaultsWire

// The core's hooks for sync (ARCHITECTURE.md): what the sync engine (GroupDefaultsSync) needs
// from a suite, each in one LMDB transaction with the changes it concerns.
//
// - A suite is synced when `meta` holds `sync.server`. Then every local change, by any process,
//   is stored with the pending flag in its own record (value or tombstone), whose stamp is the
//   change's: the mark is written in the change's own transaction, at no extra cost (see
//   `StoredRecord`). Every write transaction pays one lookup in `meta` to know.
// - `applyRemote` stores entries pulled from the server with their own stamps, last writer wins
//   against the stored value and tombstone, logs them as remote changes, never marks them pending,
//   and saves the server cursor in the same transaction.
// - A push acknowledgement clears a mark only if the key still has the stamp that was pushed
//   (`clearPending`): a change made while the push was in flight stays pending.
// - `enableSync` records the moment of the joining rule (`JoiningRule`, which states it).
// - A local value that `applyRemote` replaces while it was pending, or that only the joining rule
//   made lose, is kept in the conflict journal in the same transaction (`ConflictJournal`).
// - The transaction's side of all this is in `Transaction+Sync.swift`.
// - Local-only keys (patterns in `meta`) are never marked pending and pulled entries for them are
//   not applied (counted in `SyncState.ignoredCount`).

/// The sync bookkeeping stored in a suite.
package struct SyncState: Sendable, Equatable {
    /// The server the suite mirrors to; nil when the suite is not synced.
    package var server: String?
    /// The file the sync token is read from (the token itself is never stored in the suite).
    package var tokenFile: String?
    /// A PEM file of a private certificate authority to trust, besides the system's.
    package var caFile: String?
    /// The file of the suite's end-to-end encryption keys; nil for a plain suite.
    package var keyFile: String?
    /// For a suite another account shares: the sync client's record of whose it is (opaque to
    /// the core); nil for the account's own.
    package var share: String?
    /// The last server revision applied; nil before the first pull (a new device reads the snapshot).
    package var cursor: UInt64?
    /// The batch being pushed, kept so that a retry sends the same body under the same id.
    package var inFlight: InFlightBatch?
    /// The incarnation of the server's storage this suite last synced with; nil before it was told
    /// one. A different one means the server was restored from a backup.
    package var serverIncarnation: String?
    /// The incarnation of the account that owns the suite on the server, as the server first named
    /// it to this suite (trust on first use); nil before it was told one. A different one means the
    /// account was deleted and its name is a new account's.
    package var accountIncarnation: String?
    /// What the sync engine last reported that needs attention (paused for authentication, failing);
    /// nil when all is well. Written by the engine, read by `groupdefaults-sync status`.
    package var note: String?
    /// The HLC at which sync was turned on, the moment of the joining rule (``JoiningRule``); nil
    /// for a suite configured before it was recorded.
    package var configuredAt: HLC?
    /// The patterns of keys that never leave this device.
    package var localOnlyKeys: [String] = []
    /// How many pulled entries were not applied because their key is local-only.
    package var ignoredCount: UInt64 = 0

    package var isSynced: Bool { server != nil }
}

/// A push batch as it was (or is about to be) sent: its id and its exact body.
package struct InFlightBatch: Sendable, Equatable {
    package var id: String
    package var body: [UInt8]

    package init(id: String, body: [UInt8]) {
        self.id = id
        self.body = body
    }
}

/// A local change waiting to be pushed: the key, the stamp of its latest local change, and what it
/// holds now (nil: removed).
package struct PendingChange: Sendable, Equatable {
    package var key: String
    package var stamp: Stamp
    package var value: PropertyListValue?
}

/// How `applyRemote` decides between a remote entry and what the store holds.
package enum RemotePolicy: Sendable, Equatable {
    /// The larger (HLC, origin) wins, as always.
    case lastWriterWins
    /// A joining device: the joining rule (``JoiningRule``).
    case joining(JoiningRule)

    /// The joining rule, if the policy is one.
    var joiningRule: JoiningRule? {
        if case .joining(let rule) = self { return rule }
        return nil
    }
}

/// An entry sync refused from the server, to keep in the conflict journal (`Conflict.refusal`).
package struct RefusedRecord: Sendable, Equatable {
    /// The key's name, or its key id when the entry did not open.
    package var key: String
    /// The stamp the entry claimed.
    package var stamp: Stamp
    /// Why it was refused.
    package var reason: String

    package init(key: String, stamp: Stamp, reason: String) {
        self.key = key
        self.stamp = stamp
        self.reason = reason
    }

    /// The reason of an entry older than what the store accepted before.
    package static let rolledBack = "older than the version this device already accepted (rolled back)"
}

/// What `applyRemote` did.
package struct RemoteApplyResult: Sendable, Equatable {
    /// Keys whose remote entry was stored.
    package var applied: [String] = []
    /// Keys whose stored state was newer (or the same write).
    package var superseded: [String] = []
    /// Keys removed because the server no longer has them (`pruning`).
    package var pruned: [String] = []
    /// Keys whose local value or deletion was replaced and kept in the conflict journal.
    package var replaced: [String] = []
    /// The origins of the newer writes that replaced them (not of `replacedOnJoining`'s).
    package var replacedBy: Set<UInt64> = []
    /// Of `replaced`, the keys whose local value was the newer write, replaced by the server's
    /// older one because the suite was joining (held before sync was turned on).
    package var replacedOnJoining: [String] = []
    /// Of `replaced`, the keys the suite's owner pinned (on a member's device): the owner's value
    /// replaced this device's, whatever the stamps.
    package var replacedByPin: [String] = []
    /// Keys not applied because they are local-only.
    package var ignored: [String] = []
    /// Of `superseded`, the keys whose stored write is strictly newer and not pending: accepted from
    /// the server, or acknowledged by it, before.
    package var stale: [String] = []
    /// Entries refused on their own (stamped too far ahead of this machine's clock), newly kept in
    /// the conflict journal; the others were applied as if they were not there.
    package var refused: [RefusedRecord] = []
}

extension SharedDefaults {
    // MARK: Configuration

    /// Marks the suite as synced with `server`, so that every process's changes are recorded as
    /// pending from this commit on, and records where the token is read from (`tokenFile`, never the
    /// token) and a private certificate authority (`caFile`). Values already stored are not marked
    /// (the joining rule, ``JoiningRule``, decides what to upload; its moment is recorded here); a
    /// suite already synced keeps its cursor, its marks and the moment sync was turned on.
    ///
    /// `localOnly` (nil: unchanged) replaces the local-only key patterns: a key that becomes
    /// local-only loses its pending mark; one that stops being local-only, in a suite that has
    /// joined the server's, is marked pending (it was never pushed).
    ///
    /// - Throws: `SharedDefaultsError` with code `unsupportedValue` for a malformed pattern
    ///   (`GlobPattern`); nothing changes then.
    package func enableSync(
        server: String,
        tokenFile: String? = nil,
        caFile: String? = nil,
        keyFile: String? = nil,
        share: String? = nil,
        localOnly: [String]? = nil
    ) throws {
        let patterns = try localOnly.map { texts in
            try texts.map { text in
                do { return try GlobPattern(text) } catch {
                    throw store.error(.unsupportedValue, key: nil, "\(error); nothing was changed")
                }
            }
        }
        try write { tx in
            try JoiningRule.recordMoment(in: tx)
            for (key, text) in [
                (MetaKey.syncServer, server as String?), (MetaKey.syncTokenFile, tokenFile), (MetaKey.syncCAFile, caFile),
                (MetaKey.syncKeyFile, keyFile), (MetaKey.syncShare, share), (MetaKey.syncLeftShare, nil),
                (MetaKey.syncLeftAccountIncarnation, nil),
            ] {
                try tx.setSyncText(text, for: key)
            }
            if let patterns { try Self.replaceLocalOnly(with: patterns, in: tx) }
        }
    }

    /// Records `name` among the keys declared `sync: .local` (`SharedDefaults.SyncScope`), kept in
    /// the suite apart from `configure --exclude`'s patterns, which replace only their own list: a
    /// declared key stays local whatever a later `configure` says.
    func declareLocalOnly(_ name: String) throws {
        guard !name.contains("*") else {
            throw store.error(.invalidKey, key: name, "a key declared `sync: .local` cannot hold '*' (it would be a pattern)")
        }
        do { _ = try GlobPattern(name) } catch { throw store.error(.invalidKey, key: name, "\(error)") }
        try write { tx in
            try tx.perform(key: nil) {
                let declared = try tx.declaredLocalKeys()
                guard !declared.contains(where: { $0.isSameName(as: name) }) else { return }
                let old = try tx.localOnlyPatterns()
                try tx.setSyncText((declared + [name]).joined(separator: "\n"), for: MetaKey.syncDeclaredLocal)
                try tx.markLocalOnlyChanges(from: old, to: try tx.localOnlyPatterns())
            }
        }
    }

    /// Replaces `configure --exclude`'s patterns (the keys declared `.local` stay local).
    private static func replaceLocalOnly(with patterns: [GlobPattern], in tx: Transaction) throws {
        let old = try tx.localOnlyPatterns()
        guard try tx.configuredLocalOnlyPatterns() != patterns else { return }
        try tx.setSyncText(patterns.isEmpty ? nil : patterns.map(\.text).joined(separator: "\n"), for: MetaKey.syncExclude)
        try tx.markLocalOnlyChanges(from: old, to: try tx.localOnlyPatterns())
    }

    /// Replaces the text of the share a synced member's suite is a copy of (`SyncState.share`),
    /// when the member's role changed; nothing for a suite that does not sync a share.
    package func replaceSyncShare(_ text: String) throws {
        try write { tx in
            guard try tx.syncText(MetaKey.syncShare) != nil else { return }
            try tx.setSyncText(text, for: MetaKey.syncShare)
        }
    }

    /// Stops syncing: forgets the server, the cursor, the in-flight batch and every pending mark.
    /// With `rememberingShare` (a member leaving, removed, or no longer syncing its copy) the share
    /// the suite was a copy of is kept (`leftShare()`), with the owner's account incarnation it last
    /// synced with (`leftAccountIncarnation()`).
    package func disableSync(rememberingShare: Bool = false) throws {
        try write { tx in
            // A member's copy that leaves remembers whose it was (`leftShare()`).
            if rememberingShare, let share = try tx.syncText(MetaKey.syncShare) {
                try tx.setSyncText(share, for: MetaKey.syncLeftShare)
                try tx.setSyncText(try tx.syncText(MetaKey.syncAccountIncarnation), for: MetaKey.syncLeftAccountIncarnation)
            }
            for key in [
                MetaKey.syncServer, MetaKey.syncTokenFile, MetaKey.syncCAFile, MetaKey.syncKeyFile, MetaKey.syncShare, MetaKey.syncCursor,
                MetaKey.syncInFlight,
                MetaKey.syncNote, MetaKey.syncConfiguredAt, MetaKey.syncExclude, MetaKey.syncIgnored, MetaKey.syncIncarnation, MetaKey.syncPinned,
                MetaKey.syncAccountIncarnation, MetaKey.syncJoiningKeys,
            ] {
                try tx.setSyncText(nil, for: key)
            }
            // The marks as a scan finds them, also those a process of an older version made
            // without indexing them (`PendingIndex`).
            for key in try tx.markedPendingKeys() {
                _ = try key.withUnsafeBytes { try tx.setPending(false, key: $0) }
            }
            try tx.emptyPendingIndex()
        }
    }

    /// The share (as the sync client stored it) this suite was a member's copy of before it left
    /// (`disableSync(rememberingShare: true)`); nil for a suite that never left one, or that syncs
    /// again.
    package func leftShare() throws -> String? {
        try read { tx in try tx.perform(key: nil) { try tx.syncText(MetaKey.syncLeftShare) } }
    }

    /// With `leftShare()`: the incarnation of the owner's account the copy last synced with; nil
    /// when it never learnt one.
    package func leftAccountIncarnation() throws -> String? {
        try read { tx in try tx.perform(key: nil) { try tx.syncText(MetaKey.syncLeftAccountIncarnation) } }
    }

    /// The sync bookkeeping, from one snapshot: lookups in `meta`, whatever the suite's size (the
    /// pending count is `pendingCount()`).
    package func syncState() throws -> SyncState {
        try read { tx in
            try tx.perform(key: nil) {
                var state = SyncState(server: nil, cursor: nil, inFlight: nil)
                state.server = try tx.syncText(MetaKey.syncServer)
                state.tokenFile = try tx.syncText(MetaKey.syncTokenFile)
                state.caFile = try tx.syncText(MetaKey.syncCAFile)
                state.keyFile = try tx.syncText(MetaKey.syncKeyFile)
                state.share = try tx.syncText(MetaKey.syncShare)
                state.note = try tx.syncText(MetaKey.syncNote)
                state.configuredAt = try tx.syncNumber(MetaKey.syncConfiguredAt, "the sync start record").map(HLC.init(rawValue:))
                state.ignoredCount = try tx.syncNumber(MetaKey.syncIgnored, "the ignored-entries counter") ?? 0
                state.localOnlyKeys = try tx.localOnlyPatterns().map(\.text)
                state.cursor = try tx.syncNumber(MetaKey.syncCursor, "the sync cursor record")
                state.inFlight = try tx.inFlightBatch()
                state.serverIncarnation = try tx.syncText(MetaKey.syncIncarnation)
                state.accountIncarnation = try tx.syncText(MetaKey.syncAccountIncarnation)
                return state
            }
        }
    }

    /// How many local changes wait to be acknowledged by the server: a lookup per pending change
    /// (`PendingIndex`), whatever the suite's size.
    package func pendingCount() throws -> Int {
        try store.checkSyncTrees()
        return try read { tx in try tx.perform(key: nil) { try tx.pendingCount() } }
    }

    // MARK: Pushing

    /// The pending local changes in stamp order (oldest first), at most `limit`, each with what its
    /// key holds now: read from the pending index (`PendingIndex`), at the cost of the pending
    /// changes, whatever the suite's size.
    package func pendingChanges(limit: Int = .max) throws -> [PendingChange] {
        try store.checkSyncTrees()
        return try read { tx in
            var changes = try tx.perform(key: nil) { try tx.pendingChanges() }
            changes.sort { $0.stamp < $1.stamp }
            return Array(changes.prefix(limit))
        }
    }

    /// A page of the pending local changes, in the order of their keys' bytes: at most `limit`,
    /// from the first key after `after` (nil: from the first), each with what its key holds now.
    /// What the sync engine batches from: its cost is the page's, however many changes are pending
    /// and however large the suite (`PendingIndex`).
    package func pendingChanges(after: String?, limit: Int) throws -> [PendingChange] {
        try store.checkSyncTrees()
        return try read { tx in try tx.perform(key: nil) { try tx.pendingChanges(after: after, limit: limit) } }
    }

    /// Indexes the pending changes the index lacks (marked by a process of a version before the
    /// index that had the file open when another process upgraded it, `PendingIndex`): a scan of
    /// the suite, and a write only when it finds some. The sync engine calls it once when it
    /// starts. Returns how many it indexed.
    @discardableResult
    package func indexUnindexedPending() throws -> Int {
        try store.checkSyncTrees()
        let missing = try read { tx in try tx.perform(key: nil) { try tx.unindexedPendingKeys() } }
        guard !missing.isEmpty else { return 0 }
        return try write { tx in try tx.perform(key: nil) { try tx.indexPendingKeys(missing) } }
    }

    /// The stamps of the pending changes of `keys` (a key with no pending change is left out): a
    /// lookup per key.
    package func pendingStamps(forKeys keys: some Sequence<ExactName>) throws -> [ExactName: Stamp] {
        try store.checkSyncTrees()
        return try read { tx in
            try tx.perform(key: nil) {
                var stamps: [ExactName: Stamp] = [:]
                for key in keys {
                    if let change = try tx.pendingChange(forKey: key.text) { stamps[key] = change.stamp }
                }
                return stamps
            }
        }
    }

    /// Clears the marks of pushed changes that the server acknowledged, each only if the key's mark
    /// still carries the stamp that was pushed (a change made meanwhile stays pending); also drops
    /// the in-flight batch. Returns how many marks were cleared.
    @discardableResult
    package func clearPending(_ pushed: [(key: String, stamp: Stamp)]) throws -> Int {
        try write { tx in
            var cleared = 0
            for (key, stamp) in pushed {
                try withKeyBytes(key) { k in
                    if try tx.setPending(false, key: k, ifStamp: stamp) { cleared += 1 }
                }
            }
            try tx.setInFlightBatch(nil)
            return cleared
        }
    }

    /// Marks keys pending with the stamps of what they hold now (for the joining rule: keys the
    /// server lacks are uploaded). Keys holding nothing are skipped. Returns how many were marked.
    @discardableResult
    package func markPending(_ keys: [String]) throws -> Int {
        try write { tx in
            let localOnly = try tx.perform(key: nil) { try tx.localOnlyPatterns() }
            var marked = 0
            for key in keys where !localOnly.contains(where: { $0.matches(key) }) {
                if try tx.markPending(key: key) { marked += 1 }
            }
            return marked
        }
    }

    /// Marks every stored value and deletion pending (local-only keys excepted), each with its own
    /// stamp: after the server lost the suite (its operator reset it, or restored a backup), what
    /// this store holds is uploaded again, and competes by last writer wins. With
    /// `serverIncarnation`, also records it, in the same transaction: a crash before it leaves the
    /// old one, and the next sync marks everything again. Returns how many were marked.
    @discardableResult
    package func markEverythingPending(serverIncarnation: String? = nil) throws -> Int {
        try write { tx in
            try tx.perform(key: nil) {
                if let serverIncarnation { try tx.setSyncText(serverIncarnation, for: MetaKey.syncIncarnation) }
                let localOnly = try tx.localOnlyPatterns()
                var marked = 0
                for key in try tx.storedKeys() where !localOnly.contains(where: { $0.matches(String(decoding: key, as: UTF8.self)) }) {
                    if try key.withUnsafeBytes({ try tx.setPending(true, key: $0) }) { marked += 1 }
                }
                return marked
            }
        }
    }

    /// Keeps in the conflict journal a local change that sync could not push (the server or the
    /// engine refused it: a value too deep or too large, a stamp from a wrong clock), once per key
    /// and stamp, so that `conflicts` lists it with its reason. The change itself stays in the
    /// suite, pending: it goes out when it is written again.
    ///
    /// - Returns: Whether it was new to the journal.
    @discardableResult
    package func journalUnpushed(_ record: RefusedRecord) throws -> Bool {
        try write { tx in
            let kept = try tx.keepRefusedOnce(record)
            try tx.trimJournal()
            return kept
        }
    }

    /// The server cursor (nil before the first pull): one lookup, where `syncState()` reads every
    /// record of the bookkeeping.
    package func syncCursor() throws -> UInt64? {
        try read { tx in try tx.perform(key: nil) { try tx.syncNumber(MetaKey.syncCursor, "the sync cursor record") } }
    }

    /// The stored in-flight batch, if there is one: one lookup (`syncState()` reads every record
    /// of the bookkeeping).
    package func inFlightBatch() throws -> InFlightBatch? {
        try read { tx in try tx.perform(key: nil) { try tx.inFlightBatch() } }
    }

    /// Stores (or, with nil, drops) the batch about to be sent, before it is sent.
    package func setInFlightBatch(_ batch: InFlightBatch?) throws {
        try write { tx in try tx.setInFlightBatch(batch) }
    }

    /// Stores (or, with nil, clears) what the sync engine reports that needs attention, so that
    /// other processes (`groupdefaults-sync status`) can show it.
    package func setSyncNote(_ note: String?) throws {
        try write { tx in try tx.setSyncText(note, for: MetaKey.syncNote) }
    }

    /// Records the incarnation of the server's storage the suite synced with.
    package func setServerIncarnation(_ incarnation: String) throws {
        try write { tx in try tx.setSyncText(incarnation, for: MetaKey.syncIncarnation) }
    }

    /// Records the incarnation of the account that owns the suite on the server, if the suite has
    /// none yet (trust on first use; another process may have recorded it first). Returns the one
    /// the suite holds afterwards.
    @discardableResult
    package func setAccountIncarnationIfNew(_ incarnation: String) throws -> String {
        try write { tx in
            if let held = try tx.syncText(MetaKey.syncAccountIncarnation) { return held }
            try tx.setSyncText(incarnation, for: MetaKey.syncAccountIncarnation)
            return incarnation
        }
    }

    /// Forgets (nil) or sets the server cursor: the next sync starts from the snapshot, or after
    /// `cursor`.
    package func setSyncCursor(_ cursor: UInt64?) throws {
        try write { tx in try tx.setSyncNumber(cursor, for: MetaKey.syncCursor) }
    }

    // MARK: Pulling

    /// Applies entries pulled from the server and saves `cursor` (if given), in one transaction.
    ///
    /// Per key the larger (HLC, origin) wins against the stored value *and* tombstone (or, with
    /// `joining`, by the joining rule, ``JoiningRule``); a winner is stored with its own stamp, logged as a
    /// remote change (observers in every process see it, `Change.isRemote`), and never marked
    /// pending; a pending local change it beats is dropped. A remote deletion of a key this store
    /// never had still leaves a tombstone. This store's clock moves past the latest remote HLC, so
    /// later local writes win over what was pulled.
    ///
    /// With `pruning`, the entries are the server's whole suite (a snapshot read after an expired
    /// cursor): stored keys that are absent from it (and from `refused`: a key the server holds but
    /// does not serve, or whose value this device refused, is not absent) and have no pending change are removed, leaving
    /// no tombstone (the server holds none: a later entry for the key, even one pushed by another
    /// process of this device while the snapshot was read, is taken as it comes).
    ///
    /// An entry whose HLC is more than 5 minutes (`HLC.maximumDrift`) ahead of this machine's clock
    /// is refused on its own: kept in the conflict journal (once) and in `RemoteApplyResult.refused`,
    /// while the others are applied and the cursor moves past it.
    ///
    /// - Throws: `SharedDefaultsError` with code `invalidKey`, or what a write can throw. On any
    ///   error nothing is applied and the cursor is unchanged.
    /// `refused` are entries sync refused from this pull (an encrypted suite's tampered ones, values
    /// the device cannot take): kept in the conflict journal in the same transaction, once. With `keepingStale`, an entry older than a
    /// write accepted before (`RemoteApplyResult.stale`, a rollback) is kept there too. `accounts`
    /// names the account of each device of another account among the entries' origins (a suite
    /// shared between accounts): recorded, so that the change feed names it
    /// (`Change.Source.anotherAccount`).
    @discardableResult
    package func applyRemote(
        _ entries: [SyncEntry],
        cursor: UInt64?,
        policy: RemotePolicy = .lastWriterWins,
        pruning: Bool = false,
        refused: [RefusedRecord] = [],
        keepingStale: Bool = false,
        accounts: [UInt64: String] = [:]
    ) throws -> RemoteApplyResult {
        try write { tx in
            var result = RemoteApplyResult()
            try tx.recordOriginAccounts(accounts)
            // Once per key and stamp: an entry refused by a pull may come again in a push's answer.
            for record in refused { _ = try tx.keepRefusedOnce(record) }
            // An entry stamped too far ahead of this machine's clock is refused on its own: taking
            // it would drag this store's clock, and every later write, into the future.
            let wallClock = store.wallClockMilliseconds()
            var accepted: [SyncEntry] = []
            accepted.reserveCapacity(entries.count)
            for entry in entries {
                guard entry.hlc.isAhead(of: wallClock) else {
                    accepted.append(entry)
                    continue
                }
                let ahead = (entry.hlc.milliseconds - wallClock) / 1000
                let record = RefusedRecord(
                    key: entry.key,
                    stamp: entry.stamp,
                    reason: """
                        stamped \(ahead) s ahead of this machine's clock (at most \(HLC.maximumDrift / 1000) s are accepted): \
                        the clock of the device that wrote it, or of the server, was wrong
                        """
                )
                if try tx.keepRefusedOnce(record) { result.refused.append(record) }
            }
            if let latest = accepted.map(\.hlc).max() { try tx.receive(latest) }
            let pinned = try tx.pinnedKeys()
            let carried = try tx.carriedJoiningRule()
            for entry in accepted {
                let joining = policy.joiningRule ?? carried.flatMap { $0.keys.contains(entry.key.exact) ? $0.rule : nil }
                switch try tx.applyRemote(
                    key: entry.key,
                    value: entry.value,
                    stamp: entry.stamp,
                    joining: joining,
                    serverWins: pinned.contains(entry.key.exact)
                ) {
                case .applied(let replaced, let byOlder, let byPin):
                    result.applied.append(entry.key)
                    if replaced {
                        result.replaced.append(entry.key)
                        if byPin {
                            result.replacedByPin.append(entry.key)
                        } else if byOlder {
                            result.replacedOnJoining.append(entry.key)
                        } else {
                            result.replacedBy.insert(entry.origin)
                        }
                    }
                case .superseded: result.superseded.append(entry.key)
                case .stale:
                    result.superseded.append(entry.key)
                    result.stale.append(entry.key)
                    if keepingStale { try tx.keepRefused(key: entry.key, stamp: entry.stamp, reason: RefusedRecord.rolledBack) }
                case .ignored: result.ignored.append(entry.key)
                }
            }
            if let carried {
                // Decided: the key's next entry came, and the joining rule judged it.
                let decided = carried.keys.subtracting(accepted.map(\.key.exact))
                if decided != carried.keys { try tx.setJoiningKeys(decided) }
            }
            try tx.trimJournal()
            if !result.ignored.isEmpty {
                try tx.perform(key: nil) {
                    let count = try tx.syncNumber(MetaKey.syncIgnored, "the ignored-entries counter") ?? 0
                    try tx.setSyncNumber(count + UInt64(result.ignored.count), for: MetaKey.syncIgnored)
                }
            }
            if pruning {
                // A refused entry's key is on the server all the same (a value it does not serve,
                // or this device cannot take): kept, as the journal says.
                let stale = try tx.cleanKeys(absentFrom: Set(entries.map(\.key.exact) + refused.map(\.key.exact)))
                for key in stale { try tx.removeAsRemote(key: key) }
                result.pruned = stale
            }
            if let cursor { try tx.setSyncNumber(cursor, for: MetaKey.syncCursor) }
            return result
        }
    }

    /// What the store holds for `key`, value or tombstone, with its stamp; nil if neither.
    package func syncEntry(forKey key: String) throws -> SyncEntry? {
        try read { tx in try tx.syncEntry(forKey: key) }
    }

    /// The HLC of the last change committed to the store (any process's): every later change is
    /// stamped after it.
    package func clockReading() throws -> HLC {
        do {
            return try store.readLog { try ChangeLog.tail($0).hlc }
        } catch {
            throw store.translate(error, key: nil)
        }
    }

    /// Brings the store's clock back if it is more than `HLC.maximumDrift` ahead of this machine's
    /// (see `Transaction`'s clock recovery: far-future stamps are stamped again, pending changes
    /// with fresh ticks). Every write does this on its own; the sync engine calls it before a push,
    /// so that a device whose clock was wrong pushes honest stamps even before its next write.
    /// One read when the clock is fine. Returns how many records it stamped again (0 also when a
    /// recovery was made before).
    @discardableResult
    package func recoverClockIfAhead() throws -> Int {
        guard try clockReading().isAhead(of: store.wallClockMilliseconds()) else { return 0 }
        return try write { tx in try tx.settleClock() }
    }

    /// This machine's clock as the store reads it, in milliseconds since 1970 (moved by
    /// `Configuration.clockOffsetMilliseconds` in tests).
    package func wallClockMilliseconds() -> UInt64 { store.wallClockMilliseconds() }

    /// This store's origin id: the `device_id` of its pushes.
    package var origin: UInt64 { store.origin }
}
