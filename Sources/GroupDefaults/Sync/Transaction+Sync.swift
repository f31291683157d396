import Foundation
internal import GroupDefaultsLMDB
import GroupDefaultsWire

// The sync side of a transaction, in one place: applying pulled entries, pending marks, the
// conflict journal, and the sync bookkeeping in `meta`. `SharedDefaults+Sync.swift` and
// `JoiningRule` call these named operations, never the LMDB transaction itself.

extension SharedDefaults.Transaction {
    // MARK: Pulled entries

    /// What `applyRemote` did with one entry.
    enum RemoteOutcome: Equatable {
        /// Stored; with `replaced`, the local value it replaced was kept in the conflict journal;
        /// with `byOlder`, that local value was the newer write, and the joining rule
        /// (``JoiningRule``) made the server's win.
        case applied(replaced: Bool, byOlder: Bool, byPin: Bool = false)
        /// Not stored: what the store holds is newer (or the same write).
        case superseded
        /// Not stored: the store holds a strictly newer write that is not pending, so it was
        /// accepted from the server or acknowledged by it: the entry is older than what the
        /// server already gave (a rollback, unless a push settled meanwhile).
        case stale
        /// Not stored: the key is local-only in this suite.
        case ignored
    }

    /// Applies one entry pulled from the server, if it wins: its value (or removal) is stored with
    /// its own stamp, logged as a remote change, never marked pending. It wins by last writer wins,
    /// or for a joining device by `joining` (``JoiningRule``).
    ///
    /// A local value or deletion the entry replaces is kept in the conflict journal when it was
    /// pending (a change that had not reached the server, whose winner came from elsewhere) or
    /// when only the joining rule made it lose; unless it said the same as the winner. The
    /// whole batch's latest HLC must have been received first (`receive`).
    ///
    /// With `serverWins` (a key the suite's owner pinned, on a member's device) the entry replaces
    /// what the store holds whatever the stamps, as the joining rule's does.
    func applyRemote(
        key: String,
        value: PropertyListValue?,
        stamp remote: Stamp,
        joining rule: JoiningRule?,
        serverWins: Bool = false
    ) throws -> RemoteOutcome {
        try checkUsable()
        try store.validate(key: key)
        precondition(clock != nil, "applyRemote before receive")
        if isLocalOnly(key) { return .ignored }
        return try perform(key: key) {
            try withKeyBytes(key) { k in
                let held = try heldRecord(k)
                var joinOverrides = false
                var pinOverrides = false
                if let held, serverWins, held.stamp != remote {
                    joinOverrides = true
                    pinOverrides = true
                } else if let held, let rule, rule.serverWins(over: held.stamp, remote: remote) {
                    joinOverrides = true
                } else if let held, held.stamp >= remote {
                    return held.stamp > remote && !held.pending ? .stale : .superseded
                }
                var replaced = false
                if let held, held.pending || joinOverrides, held.value != value {
                    try keep(key: key, encodedValue: held.encodedValue, stamp: held.stamp, winner: remote)
                    replaced = true
                }
                let byOlder = replaced && joinOverrides && !pinOverrides && (held.map { $0.stamp > remote } ?? false)
                let byPin = replaced && pinOverrides
                // The winner is stored unmarked: a pending local change it replaces leaves the index.
                if held?.pending == true { try PendingIndex.set(false, key: k, in: txn) }
                if let value {
                    addsData = true
                    StoredRecord.encode(value, stamp: remote, into: &scratch)
                    try scratch.withUnsafeBytes { record in
                        try txn.put(.values, k, record)
                        try txn.delete(.tombstones, k)
                        try appendLog(.set, key: key, storedRecord: record, remoteOrigin: remote.origin, isConflict: replaced)
                    }
                    return .applied(replaced: replaced, byOlder: byOlder, byPin: byPin)
                } else {
                    let hadValue = try txn.delete(.values, k)
                    try StoredRecord.encodeTombstone(remote).withUnsafeBytes { try txn.put(.tombstones, k, $0) }
                    tombstonesMayExist = true
                    // Only a tombstone changed (a key removed here too, or never stored here):
                    // observers have nothing to see.
                    if !hadValue { return .applied(replaced: replaced, byOlder: byOlder, byPin: byPin) }
                }
                try appendLog(.removed, key: key, remoteOrigin: remote.origin, isConflict: replaced)
                return .applied(replaced: replaced, byOlder: byOlder, byPin: byPin)
            }
        }
    }

    /// What `key` holds, value or tombstone (a nil value), with its stamp, pending mark, and a
    /// lazy copy of the value's encoded bytes (for the journal).
    private func heldRecord(_ k: UnsafeRawBufferPointer) throws -> HeldRecord? {
        if let raw = try txn.get(.values, k) {
            let record = try StoredRecord.decode(raw)
            return HeldRecord(value: record.value, stamp: record.stamp, pending: StoredRecord.isPending(raw), raw: raw)
        }
        if let raw = try txn.get(.tombstones, k) {
            return HeldRecord(value: nil, stamp: try StoredRecord.decodeTombstone(raw), pending: StoredRecord.isPending(raw), raw: nil)
        }
        return nil
    }

    private struct HeldRecord {
        var value: PropertyListValue?
        var stamp: Stamp
        var pending: Bool
        /// The record's bytes in LMDB's memory: valid until this transaction's next write.
        var raw: UnsafeRawBufferPointer?

        /// The value in `BinaryCodec`'s form, in the record (nil for a tombstone): valid until
        /// this transaction's next write.
        var encodedValue: UnsafeRawBufferPointer? { raw.map { UnsafeRawBufferPointer(rebasing: $0[StoredRecord.headerSize...]) } }
    }

    /// Keeps a replaced value in the conflict journal (`trimJournal` bounds it afterwards).
    private func keep(key: String, encodedValue: UnsafeRawBufferPointer?, stamp: Stamp, winner: Stamp, refusal: String? = nil) throws {
        if journal == nil {
            journal = (try ConflictJournal.nextID(txn), try journalBounds(), store.wallClockMilliseconds())
        }
        try ConflictJournal.put(
            txn,
            id: journal!.nextID,
            key: key,
            encodedValue: encodedValue,
            stamp: stamp,
            winner: winner,
            now: journal!.now,
            refusal: refusal,
            scratch: &scratch
        )
        journal!.nextID += 1
    }

    /// Keeps, in the conflict journal, an entry sync refused from the server: `key` (a name, or a
    /// key id when it did not open), the stamp it claimed, and why.
    func keepRefused(key: String, stamp: Stamp, reason: String) throws {
        try checkUsable()
        try perform(key: nil) {
            try keep(key: key, encodedValue: nil, stamp: stamp, winner: Stamp(hlc: HLC(rawValue: 0), origin: 0), refusal: reason)
        }
    }

    /// Keeps `record` in the conflict journal unless the journal already holds a refusal of the
    /// same key and stamp (the same entry, pulled again); returns whether it kept it.
    func keepRefusedOnce(_ record: RefusedRecord) throws -> Bool {
        try checkUsable()
        let kept = try perform(key: nil) { try ConflictJournal.entries(txn, key: record.key) }
        guard !kept.contains(where: { $0.isRefused && $0.stamp == record.stamp }) else { return false }
        try keepRefused(key: record.key, stamp: record.stamp, reason: record.reason)
        return true
    }

    /// Drops what this transaction's journal entries pushed beyond the journal's bounds.
    func trimJournal() throws {
        guard let journal else { return }
        try perform(key: nil) { try ConflictJournal.trim(txn, bounds: journal.bounds, now: journal.now) }
    }

    /// Takes this transaction's stamp without changing anything, so that a clock that ran
    /// ahead is recovered (`recoverClock`); returns how many records it stamped again.
    func settleClock() throws -> Int {
        try checkUsable()
        _ = try beginChange()
        return clockRecoveredRecords
    }

    /// Moves this transaction's clock past `latest`, the latest HLC of a batch of remote entries,
    /// before any of them is applied; throws `clockSkew` if it is too far ahead of the wall clock.
    func receive(_ latest: HLC) throws {
        try checkUsable()
        _ = try beginChange(receiving: latest)
    }

    /// Removes a key that the server no longer has and this store did not change since it last
    /// synced (after an expired cursor): no tombstone is left (the server has none, so a later
    /// entry for the key is whatever the server took since), logged as a remote removal, never
    /// pending.
    func removeAsRemote(key: String) throws {
        try checkUsable()
        _ = try beginChange()
        try perform(key: key) {
            try withKeyBytes(key) { k in
                guard let raw = try txn.get(.values, k) else { return }
                let stamp = try StoredRecord.decode(raw).stamp
                if StoredRecord.isPending(raw) { try PendingIndex.set(false, key: k, in: txn) }
                try txn.delete(.values, k)
                try appendLog(.removed, key: key, remoteOrigin: stamp.origin)
            }
        }
    }

    /// Sets or clears the pending flag of what `key` holds (value or tombstone), keeping its stamp;
    /// false if it holds nothing.
    func setPending(_ pending: Bool, key k: UnsafeRawBufferPointer, ifStamp expected: Stamp? = nil) throws -> Bool {
        for database in [Database.values, .tombstones] {
            guard let raw = try txn.get(database, k) else { continue }
            if let expected {
                let stamp = database == .values ? try StoredRecord.decode(raw).stamp : try StoredRecord.decodeTombstone(raw)
                guard stamp == expected else { return false }
            }
            guard StoredRecord.isPending(raw) != pending else { return true }
            try StoredRecord.settingPending(pending, in: raw).withUnsafeBytes { try txn.put(database, k, $0) }
            try PendingIndex.set(pending, key: k, in: txn)
            return true
        }
        return false
    }

    /// Marks `key` pending with the stamp of what it holds now (value or tombstone); false if it
    /// holds nothing.
    func markPending(key: String) throws -> Bool {
        try checkUsable()
        try guardWritable()
        return try perform(key: key) {
            try withKeyBytes(key) { k in
                try setPending(true, key: k)
            }
        }
    }

    /// What `key` holds, value or tombstone, with its stamp, as a sync entry; nil if neither.
    func syncEntry(forKey key: String) throws -> SyncEntry? {
        try withKeyBytes(key) { k in
            if let raw = try txn.get(.values, k) {
                let record = try StoredRecord.decode(raw)
                return SyncEntry(key: key, value: record.value, hlc: record.stamp.hlc, origin: record.stamp.origin)
            }
            if let raw = try txn.get(.tombstones, k) {
                let stamp = try StoredRecord.decodeTombstone(raw)
                return SyncEntry(key: key, value: nil, hlc: stamp.hlc, origin: stamp.origin)
            }
            return nil
        }
    }

    /// The stored keys absent from `present` whose value is not pending and which are not
    /// local-only: what a snapshot read after an expired cursor prunes.
    func cleanKeys(absentFrom present: Set<ExactName>) throws -> [String] {
        let localOnly = try perform(key: nil) { try localOnlyPatterns() }
        var clean: [String] = []
        try txn.forEach(.values) { key, raw in
            let name = String(decoding: key, as: UTF8.self)
            if !present.contains(name.exact), !StoredRecord.isPending(raw), !localOnly.contains(where: { $0.matches(name) }) {
                clean.append(name)
            }
            return true
        }
        return clean
    }

    // MARK: The conflict journal

    /// The journal's entries, newest first; only `key`'s, unless it is nil.
    func conflicts(forKey key: String?) throws -> [SharedDefaults.Conflict] {
        try ConflictJournal.entries(txn, key: key)
    }

    /// The journal's entry `id`, if it holds one.
    func conflict(id: UInt64) throws -> SharedDefaults.Conflict? {
        try ConflictJournal.entry(txn, id: id)
    }

    /// The journal's bounds (`ConflictJournalBounds.standard` unless set).
    func journalBounds() throws -> SharedDefaults.ConflictJournalBounds {
        guard let raw = try txn.get(.meta, MetaKey.journalBounds) else { return .standard }
        guard raw.count == 16 else { throw CorruptBytes("the conflict journal's bounds record is damaged") }
        let count = UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
        let seconds = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        return SharedDefaults.ConflictJournalBounds(maximumCount: Int(clamping: count), maximumAge: .seconds(Int64(clamping: seconds)))
    }

    /// Stores the journal's bounds, and drops the entries beyond them at once.
    func setJournalBounds(_ bounds: SharedDefaults.ConflictJournalBounds) throws {
        var bytes: [UInt8] = []
        BinaryCodec.appendFixed(UInt64(bounds.maximumCount), into: &bytes)
        BinaryCodec.appendFixed(UInt64(bounds.maximumAge.components.seconds), into: &bytes)
        try bytes.withUnsafeBytes { try txn.put(.meta, MetaKey.journalBounds, $0) }
        try ConflictJournal.trim(txn, bounds: bounds, now: store.wallClockMilliseconds())
    }

    // MARK: Pending marks

    /// How many keys carry the pending flag: a lookup per pending change.
    func pendingCount() throws -> Int {
        var count = 0
        try PendingIndex.forEach(txn) { _, _, _ in
            count += 1
            return true
        }
        return count
    }

    /// The pending local changes in their keys' byte order, from the first key after `after`, at
    /// most `limit`, each with what its key holds now: a lookup per change (`PendingIndex`).
    func pendingChanges(after: String? = nil, limit: Int = .max) throws -> [PendingChange] {
        var changes: [PendingChange] = []
        guard limit > 0 else { return changes }
        func visit(_ after: UnsafeRawBufferPointer?) throws {
            try PendingIndex.forEach(txn, after: after) { key, raw, isValue in
                changes.append(try Self.pendingChange(key: String(decoding: key, as: UTF8.self), record: raw, isValue: isValue))
                return changes.count < limit
            }
        }
        if let after { try withKeyBytes(after) { try visit($0) } } else { try visit(nil) }
        return changes
    }

    /// `key`'s pending change, if its record is marked pending.
    func pendingChange(forKey key: String) throws -> PendingChange? {
        try withKeyBytes(key) { k in
            try PendingIndex.markedRecord(k, txn).map { try Self.pendingChange(key: key, record: $0.record, isValue: $0.isValue) }
        }
    }

    /// The pending change a marked record holds: a value (`isValue`) or a removal.
    private static func pendingChange(key: String, record raw: UnsafeRawBufferPointer, isValue: Bool) throws -> PendingChange {
        guard isValue else { return PendingChange(key: key, stamp: try StoredRecord.decodeTombstone(raw), value: nil) }
        let record = try StoredRecord.decode(raw)
        return PendingChange(key: key, stamp: record.stamp, value: record.value)
    }

    /// The keys marked pending, found by a scan of the marks (the index may lack some:
    /// `PendingIndex.unindexed`).
    func markedPendingKeys() throws -> [[UInt8]] {
        try PendingIndex.markedKeys(txn)
    }

    /// The keys marked pending that the index lacks (a scan).
    func unindexedPendingKeys() throws -> [[UInt8]] {
        try PendingIndex.unindexed(txn)
    }

    /// Adds to the index those of `keys` whose record is still marked pending; returns how many.
    func indexPendingKeys(_ keys: [[UInt8]]) throws -> Int {
        var indexed = 0
        for key in keys {
            try key.withUnsafeBytes { k in
                guard try PendingIndex.markedRecord(k, txn) != nil else { return }
                try PendingIndex.set(true, key: k, in: txn)
                indexed += 1
            }
        }
        return indexed
    }

    /// Empties the pending index (sync was turned off: no key is pending), entries left by damage
    /// included.
    func emptyPendingIndex() throws {
        try txn.empty(.pending)
    }

    /// Every key that holds a value or a tombstone.
    func storedKeys() throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        for database in [Database.values, .tombstones] {
            try txn.forEach(database) { key, _ in
                keys.append(Array(key))
                return true
            }
        }
        return keys
    }

    // MARK: Local-only keys

    /// The suite's local-only keys: `configure --exclude`'s patterns, then the keys declared
    /// `sync: .local`.
    func localOnlyPatterns() throws -> [GlobPattern] {
        try configuredLocalOnlyPatterns() + declaredLocalKeys().compactMap { try? GlobPattern($0) }
    }

    /// `configure --exclude`'s patterns.
    func configuredLocalOnlyPatterns() throws -> [GlobPattern] {
        guard let text = try syncText(MetaKey.syncExclude) else { return [] }
        // Stored only after validation; one that no longer parses is left out rather than trusted.
        return text.split(separator: "\n").compactMap { try? GlobPattern(String($0)) }
    }

    /// The keys declared `sync: .local` by the processes that used them.
    func declaredLocalKeys() throws -> [String] {
        guard let text = try syncText(MetaKey.syncDeclaredLocal) else { return [] }
        return text.split(separator: "\n").map(String.init)
    }

    /// After the local-only keys changed from `old` to `new`: a key that became local-only loses
    /// its pending mark; one that stopped being local-only, in a suite that has joined the
    /// server's, is marked pending (it was never pushed).
    func markLocalOnlyChanges(from old: [GlobPattern], to new: [GlobPattern]) throws {
        guard old != new else { return }
        let joined = try hasSyncRecord(MetaKey.syncCursor)
        func matches(_ list: [GlobPattern], _ key: String) -> Bool { list.contains { $0.matches(key) } }
        for database in [Database.values, .tombstones] {
            var changed: [(key: [UInt8], pending: Bool)] = []
            try txn.forEach(database) { rawKey, raw in
                let key = String(decoding: rawKey, as: UTF8.self)
                let wasLocal = matches(old, key)
                let isLocal = matches(new, key)
                if isLocal, !wasLocal, StoredRecord.isPending(raw) { changed.append((Array(rawKey), false)) }
                // A deletion never pushed has nothing to tell the server; a value has.
                if wasLocal, !isLocal, joined, database == .values { changed.append((Array(rawKey), true)) }
                return true
            }
            for change in changed { _ = try change.key.withUnsafeBytes { try setPending(change.pending, key: $0) } }
        }
    }

    // MARK: Sync bookkeeping in meta

    /// Whether `meta` holds the sync record `key`.
    func hasSyncRecord(_ key: UnsafeRawBufferPointer) throws -> Bool {
        try txn.get(.meta, key) != nil
    }

    /// The text of the sync record `key` in `meta`, if it holds one.
    func syncText(_ key: UnsafeRawBufferPointer) throws -> String? {
        try txn.get(.meta, key).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Stores `text` as the sync record `key` in `meta`; nil removes it.
    func setSyncText(_ text: String?, for key: UnsafeRawBufferPointer) throws {
        guard let text else {
            _ = try txn.delete(.meta, key)
            return
        }
        try withKeyBytes(text) { try txn.put(.meta, key, $0) }
    }

    /// The key names the sync record `key` in `meta` holds (a JSON array), by their bytes; none when
    /// it holds none.
    func syncKeyNames(_ key: UnsafeRawBufferPointer) throws -> Set<ExactName> {
        guard let text = try syncText(key) else { return [] }
        let names = (try? JSONDecoder().decode([String].self, from: Data(text.utf8))) ?? []
        return Set(names.map(\.exact))
    }

    /// Stores `names` as the sync record `key` in `meta`, in byte order; none removes it.
    func setSyncKeyNames(_ names: Set<ExactName>, for key: UnsafeRawBufferPointer) throws {
        let text = names.isEmpty ? nil : String(decoding: try JSONEncoder().encode(names.sorted().map(\.text)), as: UTF8.self)
        try setSyncText(text, for: key)
    }

    /// The number the sync record `key` in `meta` holds (8 bytes, little-endian), if it holds one;
    /// `what` names the record when it is damaged.
    func syncNumber(_ key: UnsafeRawBufferPointer, _ what: String) throws -> UInt64? {
        guard let raw = try txn.get(.meta, key) else { return nil }
        guard raw.count == 8 else { throw CorruptBytes("\(what) is damaged") }
        return UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self))
    }

    /// Stores `number` as the sync record `key` in `meta`; nil removes it.
    func setSyncNumber(_ number: UInt64?, for key: UnsafeRawBufferPointer) throws {
        guard let number else {
            _ = try txn.delete(.meta, key)
            return
        }
        try withUnsafeBytes(of: number.littleEndian) { try txn.put(.meta, key, $0) }
    }

    /// The stored in-flight batch, if there is one.
    func inFlightBatch() throws -> InFlightBatch? {
        guard let raw = try txn.get(.meta, MetaKey.syncInFlight) else { return nil }
        guard raw.count >= 4 else { throw store.error(.corruptFile, key: nil, "the in-flight batch record is damaged") }
        let idLength = Int(UInt32(littleEndian: raw.loadUnaligned(as: UInt32.self)))
        guard raw.count >= 4 + idLength else { throw store.error(.corruptFile, key: nil, "the in-flight batch record is damaged") }
        return InFlightBatch(
            id: String(decoding: UnsafeRawBufferPointer(rebasing: raw[4..<(4 + idLength)]), as: UTF8.self),
            body: Array(raw[(4 + idLength)...])
        )
    }

    /// Stores (or, with nil, drops) the in-flight batch: its id's length, its id, its body.
    func setInFlightBatch(_ batch: InFlightBatch?) throws {
        guard let batch else {
            _ = try txn.delete(.meta, MetaKey.syncInFlight)
            return
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(4 + batch.id.utf8.count + batch.body.count)
        withUnsafeBytes(of: UInt32(batch.id.utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: batch.id.utf8)
        bytes.append(contentsOf: batch.body)
        try bytes.withUnsafeBytes { try txn.put(.meta, MetaKey.syncInFlight, $0) }
    }

    /// The HLC of the last change committed to the store (any process's).
    func lastCommittedHLC() throws -> HLC {
        try ChangeLog.tail(txn).hlc
    }
}
