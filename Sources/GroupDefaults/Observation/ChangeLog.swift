/// The `log` database: one record per committed change, written in the change's own transaction.
///
/// Key: the sequence number, 8 bytes big-endian, so that key order is commit order. Value:
/// ```
/// 0      kind (1 set, 2 removed, 3 cleared)
/// 1..8   HLC of the change (little-endian)
/// 9..16  origin of the change
/// 17...  the key, UTF-8 (empty for `cleared`)
/// ```
/// The log's tail is also the store's clock: the next change takes the next sequence number and an
/// HLC after the tail's. (A change applied from elsewhere, by sync, is logged with the local clock
/// advanced past the remote stamp, so the log's HLCs only grow.) Writers trim records that fall out of
/// retention in batches, by cursor from the front, so that a commit rarely pays for it.
enum ChangeLog {
    enum Kind: UInt8, Sendable {
        case set = 1, removed, cleared
    }

    static let headerSize = 17
    /// Trimming waits until this many records are beyond retention, then drops them together.
    static let trimBatch: UInt64 = 64

    /// The last sequence number and HLC, or (0, zero) for a store that never changed.
    static func tail(_ txn: LMDBTransaction) throws -> (sequence: UInt64, hlc: HLC) {
        guard let (key, value) = try txn.last(.log) else { return (0, .zero) }
        guard key.count == 8, value.count >= headerSize else { throw CorruptBytes("the change log's last record is damaged") }
        return (UInt64(bigEndian: key.loadUnaligned(as: UInt64.self)),
                HLC(rawValue: UInt64(littleEndian: value.loadUnaligned(fromByteOffset: 1, as: UInt64.self))))
    }

    /// Appends the record for sequence number `sequence` (which must follow the tail), using
    /// `scratch` as its buffer.
    static func append(
        _ txn: LMDBTransaction, sequence: UInt64, kind: Kind, stamp: Stamp, key: String, scratch: inout [UInt8]
    ) throws {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(kind.rawValue)
        BinaryCodec.appendFixed(stamp.hlc.rawValue, into: &scratch)
        BinaryCodec.appendFixed(stamp.origin, into: &scratch)
        scratch.append(contentsOf: key.utf8)
        try withUnsafeBytes(of: sequence.bigEndian) { seq in
            try scratch.withUnsafeBytes { try txn.put(.log, seq, $0, append: true) }
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
