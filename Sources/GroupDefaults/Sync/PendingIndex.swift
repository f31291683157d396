internal import GroupDefaultsLMDB

/// The keys of a synced suite whose value or tombstone carries the pending mark, in a database of
/// their own (`pending`: key → nothing), written in the transaction that sets or clears the mark.
/// Finding, counting, batching and clearing pending changes then cost what the pending changes
/// cost (a lookup each), whatever the suite's size (a scan of `values` and `tombstones` cost the
/// whole suite, at every push).
///
/// The rule, owned here: **a key is in `pending` exactly when the record it holds is marked
/// pending** (an entry left without a mark, by damage or by a process of an older version clearing
/// one, is skipped by every read). The mark stays in the record too (applying a pulled entry reads the record anyway,
/// and pays no second lookup). Every writer of a mark calls `set`; a key that holds no pending
/// record is never in the index, so a writer that stores an unmarked record over a marked one
/// calls `set(false)`, and one that stores an unmarked record where none was marked does nothing
/// (an unsynced suite's writes pay nothing).
///
/// A file of layout 1, from before the index, is indexed once, by the first write of a process
/// that knows it (`SuiteStore`'s preparation for writing), which then stamps layout 2; until then
/// reads of it scan the marks (`isBuilt`). A process of an older version that had the file open
/// before goes on marking without indexing: the sync engine indexes what it finds so when it starts
/// (`SharedDefaults.indexUnindexedPending`), and turning sync off clears the marks it finds by a scan.
enum PendingIndex {
    /// The layout from which a file holds the index.
    static let firstIndexedLayout: UInt32 = 2

    /// Adds `key` to the index (`pending`), or removes it (`!pending`).
    static func set(_ pending: Bool, key: UnsafeRawBufferPointer, in txn: LMDBTransaction) throws {
        if pending {
            try txn.insert(.pending, key, UnsafeRawBufferPointer(start: nil, count: 0))
        } else {
            try txn.delete(.pending, key)
        }
    }

    /// Whether `txn`'s file holds the index (its layout is 2 or later).
    static func isBuilt(_ txn: LMDBTransaction) throws -> Bool {
        guard let format = try txn.get(.meta, MetaKey.format), format.count == 4 else { return false }
        return UInt32(littleEndian: format.loadUnaligned(as: UInt32.self)) >= firstIndexedLayout
    }

    /// Calls `body` with each key marked pending and its record (`isValue`: in `values`, else a
    /// tombstone), in the keys' byte order from the first key after `after` (nil: from the first),
    /// until `body` returns false: one lookup per key of the index, or, in a file not yet indexed, a
    /// scan of the marks. An index entry whose key holds no marked record (damage) is skipped: it
    /// has nothing to push, and must not stop the others.
    static func forEach(
        _ txn: LMDBTransaction,
        after: UnsafeRawBufferPointer? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ record: UnsafeRawBufferPointer, _ isValue: Bool) throws -> Bool
    ) throws {
        guard try isBuilt(txn) else {
            var marked: [(key: UnsafeRawBufferPointer, record: UnsafeRawBufferPointer, isValue: Bool)] = []
            try forEachMarked(txn) { key, record, isValue in
                if after.map({ $0.lexicographicallyPrecedes(key) }) ?? true { marked.append((key, record, isValue)) }
            }
            marked.sort { $0.key.lexicographicallyPrecedes($1.key) }
            for entry in marked { guard try body(entry.key, entry.record, entry.isValue) else { return } }
            return
        }
        try txn.forEach(.pending, from: after) { key, _ in
            if let after, key.elementsEqual(after) { return true }
            guard let marked = try markedRecord(key, txn) else { return true }
            return try body(key, marked.record, marked.isValue)
        }
    }

    /// The record `key` holds if it is marked pending (`isValue`: in `values`, else a tombstone);
    /// nil if it holds none, or one without the mark.
    static func markedRecord(_ key: UnsafeRawBufferPointer, _ txn: LMDBTransaction) throws -> (record: UnsafeRawBufferPointer, isValue: Bool)? {
        if let raw = try txn.get(.values, key), StoredRecord.isPending(raw) { return (raw, true) }
        if let raw = try txn.get(.tombstones, key), StoredRecord.isPending(raw) { return (raw, false) }
        return nil
    }

    /// The keys whose record is marked pending but that the index lacks: what a process of a
    /// version before the index (layout 1), which opened the file before another process brought it
    /// to layout 2, marks without indexing. A scan of the marks.
    static func unindexed(_ txn: LMDBTransaction) throws -> [[UInt8]] {
        guard try isBuilt(txn) else { return [] }
        var missing: [[UInt8]] = []
        try forEachMarked(txn) { key, _, _ in
            if try txn.get(.pending, key) == nil { missing.append(Array(key)) }
        }
        return missing
    }

    /// Every key whose record is marked pending, from a scan of the marks (not of the index).
    static func markedKeys(_ txn: LMDBTransaction) throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        try forEachMarked(txn) { key, _, _ in keys.append(Array(key)) }
        return keys
    }

    /// Builds the index from the marks of `values` and `tombstones`: for a file of layout 1, in
    /// the transaction that stamps layout 2.
    static func rebuild(_ txn: LMDBTransaction) throws {
        try txn.empty(.pending)
        var marked: [[UInt8]] = []
        try forEachMarked(txn) { key, _, _ in marked.append(Array(key)) }
        for key in marked { try key.withUnsafeBytes { try set(true, key: $0, in: txn) } }
    }

    /// Calls `body` with each key whose value or tombstone carries the pending mark: a scan.
    private static func forEachMarked(
        _ txn: LMDBTransaction,
        _ body: (_ key: UnsafeRawBufferPointer, _ record: UnsafeRawBufferPointer, _ isValue: Bool) throws -> Void
    ) throws {
        for database in [Database.values, .tombstones] {
            try txn.forEach(database) { key, raw in
                if StoredRecord.isPending(raw) { try body(key, raw, database == .values) }
                return true
            }
        }
    }
}
