internal import GroupDefaultsLMDB

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

/// The sync bookkeeping stored in a suite.
package struct SyncState: Sendable, Equatable {
    /// The server the suite mirrors to; nil when the suite is not synced.
    package var server: String?
    /// The file the sync token is read from (the token itself is never stored in the suite).
    package var tokenFile: String?
    /// A PEM file of a private certificate authority to trust, besides the system's.
    package var caFile: String?
    /// The last server revision applied; nil before the first pull (a new device reads the snapshot).
    package var cursor: UInt64?
    /// The batch being pushed, kept so that a retry sends the same body under the same id.
    package var inFlight: InFlightBatch?
    /// Local changes not yet acknowledged by the server.
    package var pendingCount: Int
    /// What the sync engine last reported that needs attention (paused for authentication, failing);
    /// nil when all is well. Written by the engine, read by `groupdefaults-sync status`.
    package var note: String?

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
    /// The remote entry wins over whatever this store held before `joinStarted` (an HLC read with
    /// `clockReading()` when the join began), whatever the stamps: a device joining a suite that
    /// already exists on the server must not overwrite its settings with the copy it held. A local
    /// change made after that, while the join ran, is judged by last writer wins.
    case remoteWins(over: HLC)
}

extension RemotePolicy {
    var remoteWinsBefore: HLC? {
        if case .remoteWins(let joinStarted) = self { return joinStarted }
        return nil
    }
}

/// What `applyRemote` did.
package struct RemoteApplyResult: Sendable, Equatable {
    /// Keys whose remote entry was stored.
    package var applied: [String] = []
    /// Keys whose stored state was newer (or the same write).
    package var superseded: [String] = []
    /// Keys removed because the server no longer has them (`pruning`).
    package var pruned: [String] = []
}

extension SharedDefaults {
    // MARK: Configuration

    /// Marks the suite as synced with `server`, so that every process's changes are recorded as
    /// pending from this commit on, and records where the token is read from (`tokenFile`, never the
    /// token) and a private certificate authority (`caFile`). Values already stored are not marked
    /// (the engine's joining rule decides what to upload); a suite already synced keeps its cursor
    /// and marks.
    package func enableSync(server: String, tokenFile: String? = nil, caFile: String? = nil) throws {
        try write { tx in
            for (key, text) in [(MetaKey.syncServer, server as String?), (MetaKey.syncTokenFile, tokenFile), (MetaKey.syncCAFile, caFile)] {
                guard let text else {
                    try tx.txn.delete(.meta, key)
                    continue
                }
                try withKeyBytes(text) { try tx.txn.put(.meta, key, $0) }
            }
        }
    }

    /// Stops syncing: forgets the server, the cursor, the in-flight batch and every pending mark.
    package func disableSync() throws {
        try write { tx in
            for key in [MetaKey.syncServer, MetaKey.syncTokenFile, MetaKey.syncCAFile, MetaKey.syncCursor, MetaKey.syncInFlight, MetaKey.syncNote] {
                try tx.txn.delete(.meta, key)
            }
            for key in try Self.pendingKeys(tx) {
                _ = try key.withUnsafeBytes { try tx.setPending(false, key: $0) }
            }
        }
    }

    /// The sync bookkeeping, from one snapshot.
    package func syncState() throws -> SyncState {
        try read { tx in
            let txn = tx.txn
            var state = SyncState(server: nil, cursor: nil, inFlight: nil, pendingCount: try Self.pendingKeys(tx).count)
            if let raw = try txn.get(.meta, MetaKey.syncServer) { state.server = String(decoding: raw, as: UTF8.self) }
            if let raw = try txn.get(.meta, MetaKey.syncTokenFile) { state.tokenFile = String(decoding: raw, as: UTF8.self) }
            if let raw = try txn.get(.meta, MetaKey.syncCAFile) { state.caFile = String(decoding: raw, as: UTF8.self) }
            if let raw = try txn.get(.meta, MetaKey.syncNote) { state.note = String(decoding: raw, as: UTF8.self) }
            if let raw = try txn.get(.meta, MetaKey.syncCursor) {
                guard raw.count == 8 else { throw store.error(.corruptFile, key: nil, "the sync cursor record is damaged") }
                state.cursor = UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
            }
            if let raw = try txn.get(.meta, MetaKey.syncInFlight) {
                guard raw.count >= 4 else { throw store.error(.corruptFile, key: nil, "the in-flight batch record is damaged") }
                let idLength = Int(UInt32(littleEndian: raw.loadUnaligned(as: UInt32.self)))
                guard raw.count >= 4 + idLength else { throw store.error(.corruptFile, key: nil, "the in-flight batch record is damaged") }
                state.inFlight = InFlightBatch(
                    id: String(decoding: UnsafeRawBufferPointer(rebasing: raw[4..<(4 + idLength)]), as: UTF8.self),
                    body: Array(raw[(4 + idLength)...]))
            }
            return state
        }
    }

    /// The token file the suite names (`syncState().tokenFile`), read alone: the sync client asks
    /// before each request, and counting pending changes there would scan the suite each time.
    package func syncTokenFile() throws -> String? {
        try read { tx in
            try tx.txn.get(.meta, MetaKey.syncTokenFile).map { String(decoding: $0, as: UTF8.self) }
        }
    }

    // MARK: Pushing

    /// The pending local changes in stamp order (oldest first), at most `limit`, each with what its
    /// key holds now.
    package func pendingChanges(limit: Int = .max) throws -> [PendingChange] {
        try read { tx in
            var changes: [PendingChange] = []
            try tx.txn.forEach(.values) { key, raw in
                if StoredRecord.isPending(raw) {
                    let record = try StoredRecord.decode(raw)
                    changes.append(PendingChange(key: String(decoding: key, as: UTF8.self), stamp: record.stamp, value: record.value))
                }
                return true
            }
            try tx.txn.forEach(.tombstones) { key, raw in
                if StoredRecord.isPending(raw) {
                    let stamp = try StoredRecord.decodeTombstone(raw)
                    changes.append(PendingChange(key: String(decoding: key, as: UTF8.self), stamp: stamp, value: nil))
                }
                return true
            }
            changes.sort { $0.stamp < $1.stamp }
            return Array(changes.prefix(limit))
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
            try tx.txn.delete(.meta, MetaKey.syncInFlight)
            return cleared
        }
    }

    /// Marks keys pending with the stamps of what they hold now (for the joining rule: keys the
    /// server lacks are uploaded). Keys holding nothing are skipped. Returns how many were marked.
    @discardableResult
    package func markPending(_ keys: [String]) throws -> Int {
        try write { tx in
            var marked = 0
            for key in keys where try tx.markPending(key: key) { marked += 1 }
            return marked
        }
    }

    /// Stores (or, with nil, drops) the batch about to be sent, before it is sent.
    package func setInFlightBatch(_ batch: InFlightBatch?) throws {
        try write { tx in
            guard let batch else { return _ = try tx.txn.delete(.meta, MetaKey.syncInFlight) }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(4 + batch.id.utf8.count + batch.body.count)
            withUnsafeBytes(of: UInt32(batch.id.utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: batch.id.utf8)
            bytes.append(contentsOf: batch.body)
            try bytes.withUnsafeBytes { try tx.txn.put(.meta, MetaKey.syncInFlight, $0) }
        }
    }

    /// Stores (or, with nil, clears) what the sync engine reports that needs attention, so that
    /// other processes (`groupdefaults-sync status`) can show it.
    package func setSyncNote(_ note: String?) throws {
        try write { tx in
            guard let note else { return _ = try tx.txn.delete(.meta, MetaKey.syncNote) }
            try withKeyBytes(note) { try tx.txn.put(.meta, MetaKey.syncNote, $0) }
        }
    }

    /// Forgets (nil) or sets the server cursor: the next sync starts from the snapshot, or after
    /// `cursor`.
    package func setSyncCursor(_ cursor: UInt64?) throws {
        try write { tx in try Self.saveCursor(cursor, in: tx) }
    }

    private static func saveCursor(_ cursor: UInt64?, in tx: Transaction) throws {
        guard let cursor else { return _ = try tx.txn.delete(.meta, MetaKey.syncCursor) }
        try withUnsafeBytes(of: cursor.littleEndian) { try tx.txn.put(.meta, MetaKey.syncCursor, $0) }
    }

    // MARK: Pulling

    /// Applies entries pulled from the server and saves `cursor` (if given), in one transaction.
    ///
    /// Per key the larger (HLC, origin) wins against the stored value *and* tombstone (or, with
    /// `remoteWins(over:)`, the remote entry wins over what predates the join); a winner is stored with its own stamp, logged as a
    /// remote change (observers in every process see it, `Change.isRemote`), and never marked
    /// pending; a pending local change it beats is dropped. A remote deletion of a key this store
    /// never had still leaves a tombstone. This store's clock moves past the latest remote HLC, so
    /// later local writes win over what was pulled.
    ///
    /// With `pruning`, the entries are the server's whole suite (a snapshot read after an expired
    /// cursor): stored keys that are absent from it and have no pending change are removed, leaving
    /// no tombstone (the server holds none: a later entry for the key, even one pushed by another
    /// process of this device while the snapshot was read, is taken as it comes).
    ///
    /// - Throws: `SharedDefaultsError` with code `clockSkew` if an entry's HLC is more than 5
    ///   minutes ahead of this machine's clock (nothing is applied), `invalidKey`, or what a write
    ///   can throw. On any error nothing is applied and the cursor is unchanged.
    @discardableResult
    package func applyRemote(
        _ entries: [SyncEntry], cursor: UInt64?, policy: RemotePolicy = .lastWriterWins, pruning: Bool = false
    ) throws -> RemoteApplyResult {
        try write { tx in
            var result = RemoteApplyResult()
            if let latest = entries.map(\.hlc).max() { try tx.receive(latest) }
            for entry in entries {
                let applied = try tx.applyRemote(key: entry.key, value: entry.value, stamp: entry.stamp, remoteWinsBefore: policy.remoteWinsBefore)
                if applied { result.applied.append(entry.key) } else { result.superseded.append(entry.key) }
            }
            if pruning {
                let present = Set(entries.map(\.key))
                var stale: [String] = []
                try tx.txn.forEach(.values) { key, raw in
                    let name = String(decoding: key, as: UTF8.self)
                    if !present.contains(name), !StoredRecord.isPending(raw) { stale.append(name) }
                    return true
                }
                for key in stale { try tx.removeAsRemote(key: key) }
                result.pruned = stale
            }
            if let cursor { try Self.saveCursor(cursor, in: tx) }
            return result
        }
    }

    /// What the store holds for `key`, value or tombstone, with its stamp; nil if neither.
    package func syncEntry(forKey key: String) throws -> SyncEntry? {
        try read { tx in
            try withKeyBytes(key) { k in
                if let raw = try tx.txn.get(.values, k) {
                    let record = try StoredRecord.decode(raw)
                    return SyncEntry(key: key, value: record.value, hlc: record.stamp.hlc, origin: record.stamp.origin)
                }
                if let raw = try tx.txn.get(.tombstones, k) {
                    let stamp = try StoredRecord.decodeTombstone(raw)
                    return SyncEntry(key: key, value: nil, hlc: stamp.hlc, origin: stamp.origin)
                }
                return nil
            }
        }
    }

    /// The keys whose value or tombstone carries the pending flag.
    private static func pendingKeys(_ tx: Transaction) throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        for database in [Database.values, .tombstones] {
            try tx.txn.forEach(database) { key, raw in
                if StoredRecord.isPending(raw) { keys.append(Array(key)) }
                return true
            }
        }
        return keys
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

    /// This store's origin id: the `device_id` of its pushes.
    package var origin: UInt64 { store.origin }
}
