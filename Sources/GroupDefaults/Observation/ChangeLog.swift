internal import GroupDefaultsLMDB

/// The `log` database: one record per committed change, written in the change's own transaction.
///
/// Key: the sequence number, 8 bytes big-endian, so that key order is commit order. Value:
/// ```
/// 0      kind (1 set, 2 removed, 3 cleared, 4 restored: the suite was put back to its last
///        durability point after a reboot, see `DurabilityPoints`), plus 0x80 for a change applied from the server
///        (its origin is then the remote writer's), plus 0x40 when that change replaced a local
///        value now kept in the conflict journal, plus 0x20 when the record keeps the value
/// 1..8   HLC of the change (little-endian)
/// 9..16  origin of the change
/// 17...  the key, UTF-8 (empty for `cleared`); with 0x20:
/// 17..18 the key's length in bytes (little-endian), then the key, then a copy of the record the
///        `set` stored in `values` (`StoredRecord`, whose checksum guards it here too)
/// ```
/// A `set` keeps its value in its record when the value takes at most `keptValueLimit` bytes
/// encoded: observers see what each change wrote, not only what the key holds when they read it.
/// In the record itself rather than in a database of its own: a second tree would cost each `set`
/// another page copied (measured: a third slower), where a longer record costs a few bytes copied.
/// (A process of a version that predates kept values reads such a record as damaged.)
///
/// The log's tail is also the store's clock: the next change takes the next sequence number and an
/// HLC after the tail's. (A change applied from elsewhere, by sync, is logged with the local clock
/// advanced past the remote stamp, so the log's HLCs only grow.) Writers trim records that fall out of
/// retention in batches, by cursor from the front, so that a commit rarely pays for it.
enum ChangeLog {
    enum Kind: UInt8, Sendable {
        case set = 1
        case removed
        case cleared
        case restored
    }

    static let headerSize = 17
    /// Set in the kind byte of a change applied from the server.
    static let remoteFlag: UInt8 = 0x80
    /// Set in the kind byte of a remote change that replaced a local value kept in the journal.
    static let conflictFlag: UInt8 = 0x40
    /// Set in the kind byte of a `set` whose record keeps the value it stored.
    static let valueFlag: UInt8 = 0x20
    static let flags = remoteFlag | conflictFlag | valueFlag
    /// Trimming waits until this many records are beyond retention, then drops them together.
    static let trimBatch: UInt64 = 64
    /// The largest encoded value the log keeps with its change (`SharedDefaults.Change.keptValueLimit`).
    static var keptValueLimit: Int { SharedDefaults.Change.keptValueLimit }

    /// The last sequence number and HLC, or (0, zero) for a store that never changed.
    static func tail(_ txn: LMDBTransaction) throws -> (sequence: UInt64, hlc: HLC) {
        guard let (key, value) = try txn.last(.log) else { return (0, .zero) }
        guard key.count == 8, value.count >= headerSize else { throw CorruptBytes("the change log's last record is damaged") }
        return (
            UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)),
            HLC(rawValue: UInt64(littleEndian: value.loadUnaligned(fromByteOffset: 1, as: UInt64.self)))
        )
    }

    /// Appends the record for sequence number `sequence` (which must follow the tail); with the
    /// record a `set` stored in `values` (`storedRecord`) if its value takes at most
    /// `keptValueLimit` bytes. The record is written straight into the page LMDB reserves for it.
    static func append(
        _ txn: LMDBTransaction,
        sequence: UInt64,
        kind: Kind,
        isRemote: Bool = false,
        isConflict: Bool = false,
        stamp: Stamp,
        key: String,
        storedRecord: UnsafeRawBufferPointer? = nil
    ) throws {
        let kept = storedRecord.flatMap { $0.count - StoredRecord.headerSize <= keptValueLimit ? $0 : nil }
        let flags = kind.rawValue | (isRemote ? remoteFlag : 0) | (isConflict ? conflictFlag : 0) | (kept != nil ? valueFlag : 0)
        try withKeyBytes(key) { key in
            let size = headerSize + (kept.map { 2 + key.count + $0.count } ?? key.count)
            let record = try withUnsafeBytes(of: sequence.bigEndian) { try txn.reserve(.log, $0, size: size, append: true) }
            record.storeBytes(of: flags, toByteOffset: 0, as: UInt8.self)
            record.storeBytes(of: stamp.hlc.rawValue.littleEndian, toByteOffset: 1, as: UInt64.self)
            record.storeBytes(of: stamp.origin.littleEndian, toByteOffset: 9, as: UInt64.self)
            var offset = headerSize
            if kept != nil {
                // Keys are at most LMDB's 511 bytes.
                record.storeBytes(of: UInt16(truncatingIfNeeded: key.count).littleEndian, toByteOffset: offset, as: UInt16.self)
                offset += 2
            }
            UnsafeMutableRawBufferPointer(rebasing: record[offset...]).copyMemory(from: key)
            offset += key.count
            if let kept { UnsafeMutableRawBufferPointer(rebasing: record[offset...]).copyMemory(from: kept) }
        }
    }

    /// Drops the records older than the last `retention`, once a batch of them has gathered.
    static func trim(_ txn: LMDBTransaction, last sequence: UInt64, retention: UInt64) throws {
        guard sequence > retention + trimBatch, sequence % trimBatch == 0 else { return }
        let keepFrom = sequence - retention + 1
        try txn.deleteLeading(.log) { key in
            key.count == 8 && UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)) < keepFrom
        }
    }
}

// MARK: Reading

extension ChangeLog {
    /// One decoded record of the log.
    struct Record {
        var sequence: UInt64
        var kind: Kind
        var isRemote: Bool
        var isConflict: Bool
        var stamp: Stamp
        var key: String
        /// The value a `set` stored, if the record keeps it (see `keptValueLimit`).
        var keptValue: PropertyListValue?
    }

    /// The first retained sequence number, or nil when the log is empty.
    static func head(_ txn: LMDBTransaction) throws -> UInt64? {
        var first: UInt64?
        try txn.forEach(.log) { key, _ in
            guard key.count == 8 else { throw CorruptBytes("a change log key of \(key.count) bytes") }
            first = UInt64(bigEndian: key.loadUnaligned(as: UInt64.self))
            return false
        }
        return first
    }

    /// Up to `limit` records after sequence number `cursor`, in order.
    static func records(_ txn: LMDBTransaction, after cursor: UInt64, limit: Int) throws -> [Record] {
        var records: [Record] = []
        guard cursor < UInt64.max else { return records }
        try withUnsafeBytes(of: (cursor + 1).bigEndian) { start in
            try txn.forEach(.log, from: start) { key, value in
                records.append(try decode(key: key, value: value))
                return records.count < limit
            }
        }
        return records
    }

    static func decode(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws -> Record {
        guard key.count == 8, value.count >= headerSize, let kind = Kind(rawValue: value[0] & ~flags) else {
            throw CorruptBytes("a change log record is damaged")
        }
        var keyBytes = UnsafeRawBufferPointer(rebasing: value[headerSize...])
        var keptValue: PropertyListValue?
        if value[0] & valueFlag != 0 {
            guard kind == .set, value.count >= headerSize + 2 else { throw CorruptBytes("a change log record is damaged") }
            let length = Int(value[headerSize]) | Int(value[headerSize + 1]) << 8
            guard value.count >= headerSize + 2 + length else { throw CorruptBytes("a change log record is damaged") }
            keyBytes = UnsafeRawBufferPointer(rebasing: value[headerSize + 2..<headerSize + 2 + length])
            keptValue = try StoredRecord.decode(UnsafeRawBufferPointer(rebasing: value[(headerSize + 2 + length)...])).value
        }
        return Record(
            sequence: UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)),
            kind: kind,
            isRemote: value[0] & remoteFlag != 0,
            isConflict: value[0] & conflictFlag != 0,
            stamp: Stamp(
                hlc: HLC(rawValue: UInt64(littleEndian: value.loadUnaligned(fromByteOffset: 1, as: UInt64.self))),
                origin: UInt64(littleEndian: value.loadUnaligned(fromByteOffset: 9, as: UInt64.self))
            ),
            key: String(decoding: keyBytes, as: UTF8.self),
            keptValue: keptValue
        )
    }
}
