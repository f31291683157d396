import Foundation
internal import GroupDefaultsLMDB
import GroupDefaultsWire

/// The `journal` database: the local values and deletions that sync replaced, kept so that nothing
/// overwritten vanishes (`SharedDefaults.conflicts()`, `restore(_:conflict:)`). Written in the
/// transaction that replaces the value, never synced, bounded by count and age
/// (`SharedDefaults.ConflictJournalBounds`).
///
/// Key: the entry's id, 8 bytes big-endian (ids only grow, so key order is the order they were
/// kept in). Value, little-endian:
/// ```
/// 0       format (1)
/// 1..8    when it was replaced, milliseconds since 1970 on this machine's clock
/// 9..16   the replaced write's HLC     17..24  its origin
/// 25..32  the winner's HLC             33..40  its origin
/// 41      flags: bit 0 = the replaced write was a deletion (no value follows); bit 1 = an entry
///         sync refused (from the server: tampered, rolled back, from a wrong clock; or a local change
///         it could not push): the winner is zero, and the
///         reason (UTF-8) follows the key instead of a value
/// 42..45  the key's length in bytes, then the key (UTF-8), then the value in `BinaryCodec`'s form
/// ```
enum ConflictJournal {
    static let format: UInt8 = 1
    private static let headerSize = 46
    private static let deletedFlag: UInt8 = 1
    private static let refusedFlag: UInt8 = 2

    /// Keeps entry `id`: what `key` held (its value in `BinaryCodec`'s form, nil for a deletion;
    /// copied before anything is written)
    /// and its stamp, replaced by `winner` at `now`. Ids must grow; `trim` afterwards.
    static func put(
        _ txn: LMDBTransaction,
        id: UInt64,
        key: String,
        encodedValue: UnsafeRawBufferPointer?,
        stamp: Stamp,
        winner: Stamp,
        now: UInt64,
        refusal: String? = nil,
        scratch bytes: inout [UInt8]
    ) throws {
        bytes.removeAll(keepingCapacity: true)
        bytes.append(format)
        BinaryCodec.appendFixed(now, into: &bytes)
        BinaryCodec.appendFixed(stamp.hlc.rawValue, into: &bytes)
        BinaryCodec.appendFixed(stamp.origin, into: &bytes)
        BinaryCodec.appendFixed(winner.hlc.rawValue, into: &bytes)
        BinaryCodec.appendFixed(winner.origin, into: &bytes)
        bytes.append((encodedValue == nil ? deletedFlag : 0) | (refusal == nil ? 0 : refusedFlag))
        withUnsafeBytes(of: UInt32(key.utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: key.utf8)
        if let refusal { bytes.append(contentsOf: refusal.utf8) } else if let encodedValue { bytes.append(contentsOf: encodedValue) }
        try withUnsafeBytes(of: id.bigEndian) { k in try bytes.withUnsafeBytes { try txn.put(.journal, k, $0, append: true) } }
    }

    /// The id the next entry takes.
    static func nextID(_ txn: LMDBTransaction) throws -> UInt64 {
        (try lastID(txn) ?? 0) + 1
    }

    /// Drops the oldest entries beyond `bounds.maximumCount` and those older than `maximumAge`
    /// (entries come oldest first, so both are at the front), with one cursor from the front.
    static func trim(_ txn: LMDBTransaction, bounds: SharedDefaults.ConflictJournalBounds, now: UInt64) throws {
        var excess = max(0, try txn.count(.journal) - bounds.maximumCount)
        if excess > 0 {
            try txn.deleteLeading(.journal) { _ in
                excess -= 1
                return excess >= 0
            }
        }
        let age = UInt64(max(0, bounds.maximumAge.components.seconds)) * 1000
        let horizon = now > age ? now - age : 0
        var stale: [[UInt8]] = []
        try txn.forEach(.journal) { key, value in
            let keptAt = value.count >= headerSize ? UInt64(littleEndian: value.loadUnaligned(fromByteOffset: 1, as: UInt64.self)) : 0
            guard keptAt < horizon else { return false }
            stale.append(Array(key))
            return true
        }
        for key in stale { _ = try key.withUnsafeBytes { try txn.delete(.journal, $0) } }
    }

    /// Every kept entry, newest first; with `key`, only that key's.
    static func entries(_ txn: LMDBTransaction, key: String? = nil) throws -> [SharedDefaults.Conflict] {
        var entries: [SharedDefaults.Conflict] = []
        try txn.forEach(.journal) { rawKey, value in
            let entry = try decode(key: rawKey, value: value)
            if key.map({ entry.key.isSameName(as: $0) }) ?? true { entries.append(entry) }
            return true
        }
        return entries.reversed()
    }

    /// The entry kept under `id`, if any.
    static func entry(_ txn: LMDBTransaction, id: UInt64) throws -> SharedDefaults.Conflict? {
        try withUnsafeBytes(of: id.bigEndian) { k in
            try txn.get(.journal, k).map { try decode(key: k, value: $0) }
        }
    }

    private static func lastID(_ txn: LMDBTransaction) throws -> UInt64? {
        guard let (key, _) = try txn.last(.journal) else { return nil }
        guard key.count == 8 else { throw CorruptBytes("a conflict journal key of \(key.count) bytes") }
        return UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
    }

    private static func decode(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws -> SharedDefaults.Conflict {
        guard key.count == 8, value.count >= headerSize, value[0] == format, value[41] & ~(deletedFlag | refusedFlag) == 0 else {
            throw CorruptBytes("a conflict journal entry is damaged")
        }
        func field(_ offset: Int) -> UInt64 { UInt64(littleEndian: value.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
        let keyLength = Int(UInt32(littleEndian: value.loadUnaligned(fromByteOffset: 42, as: UInt32.self)))
        guard value.count >= headerSize + keyLength else { throw CorruptBytes("a conflict journal entry is damaged") }
        let name = String(decoding: UnsafeRawBufferPointer(rebasing: value[headerSize..<headerSize + keyLength]), as: UTF8.self)
        let deleted = value[41] & deletedFlag != 0
        let refused = value[41] & refusedFlag != 0
        let rest = UnsafeRawBufferPointer(rebasing: value[(headerSize + keyLength)...])
        let replaced = deleted || refused ? nil : try BinaryCodec.decode(rest)
        return SharedDefaults.Conflict(
            id: UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)),
            key: name,
            value: replaced,
            stamp: Stamp(hlc: HLC(rawValue: field(9)), origin: field(17)),
            replacedBy: Stamp(hlc: HLC(rawValue: field(25)), origin: field(33)),
            replacedAt: Date(timeIntervalSince1970: Double(field(1)) / 1000),
            refusal: refused ? String(decoding: rest, as: UTF8.self) : nil
        )
    }
}
