/// The bytes stored under a key in the `values` database, and under a removed key in `tombstones`.
///
/// Value record, little-endian:
/// ```
/// 0      format (1)
/// 1..8   HLC timestamp of the write
/// 9..16  origin: the store that made the write
/// 17     flags: bit 0 = pending (a synced suite's local change not yet acknowledged by the
///        server; the record's stamp is the change's), other bits must be 0
/// 18..21 checksum of bytes 0..17 and 22..
/// 22...  the value, in `BinaryCodec`'s form
/// ```
/// Tombstone record: format, HLC, origin (17 bytes), then, if the removal is pending, a flags byte
/// (18 bytes).
///
/// Keeping the pending mark in the record itself, rather than in a database of its own, costs a
/// synced suite's write nothing: a second tree would add a page copy to every commit.
/// A reader refuses a format it does not know rather than guess, and a checksum that does not
/// match: damaged bytes become an error on that key, never a wrong value.
enum StoredRecord {
    static let format: UInt8 = 1
    static let headerSize = 22
    static let tombstoneSize = 17
    static let pendingFlag: UInt8 = 1

    static func encode(_ value: PropertyListValue, stamp: Stamp, pending: Bool = false) -> [UInt8] {
        var bytes: [UInt8] = []
        encode(value, stamp: stamp, pending: pending, into: &bytes)
        return bytes
    }

    /// Encodes into `bytes`, replacing what it held (a reused buffer allocates once).
    static func encode(_ value: PropertyListValue, stamp: Stamp, pending: Bool = false, into bytes: inout [UInt8]) {
        bytes.removeAll(keepingCapacity: true)
        bytes.reserveCapacity(headerSize + 64)
        appendStamp(stamp, flags: pending ? pendingFlag : 0, zeros: 4, into: &bytes)  // zeros: the checksum, filled in below
        BinaryCodec.encode(value, into: &bytes)
        sealChecksum(&bytes)
    }

    private static func sealChecksum(_ bytes: inout [UInt8]) {
        let sum = bytes.withUnsafeBytes(checksum)
        withUnsafeBytes(of: sum.littleEndian) { sumBytes in
            for i in 0..<4 { bytes[18 + i] = sumBytes[i] }
        }
    }

    /// Whether a value record or tombstone carries the pending flag (its bytes unchecked: the
    /// caller decodes it too).
    static func isPending(_ buffer: UnsafeRawBufferPointer) -> Bool {
        buffer.count > 17 && buffer[17] & pendingFlag != 0
    }

    /// A copy of a value record or tombstone with its pending flag set or cleared.
    static func settingPending(_ pending: Bool, in buffer: UnsafeRawBufferPointer) -> [UInt8] {
        if buffer.count <= tombstoneSize + 1 {  // a tombstone
            var bytes = Array(buffer.prefix(tombstoneSize))
            if pending { bytes.append(pendingFlag) }
            return bytes
        }
        var bytes = Array(buffer)
        bytes[17] = pending ? bytes[17] | pendingFlag : bytes[17] & ~pendingFlag
        sealChecksum(&bytes)
        return bytes
    }

    static func decode(_ buffer: UnsafeRawBufferPointer) throws(CorruptBytes) -> (value: PropertyListValue, stamp: Stamp) {
        let stamp = try decodeStamp(buffer, minimumSize: headerSize)
        guard buffer[17] & ~pendingFlag == 0 else { throw CorruptBytes("unknown record flags \(buffer[17])") }
        let stored = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: 18, as: UInt32.self))
        guard stored == checksum(buffer) else { throw CorruptBytes("the record's checksum does not match its bytes") }
        let value = try BinaryCodec.decode(UnsafeRawBufferPointer(rebasing: buffer[headerSize...]))
        return (value, stamp)
    }

    static func encodeTombstone(_ stamp: Stamp, pending: Bool = false) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(tombstoneSize + 1)
        appendStamp(stamp, flags: pending ? pendingFlag : nil, into: &bytes)
        return bytes
    }

    static func decodeTombstone(_ buffer: UnsafeRawBufferPointer) throws(CorruptBytes) -> Stamp {
        guard buffer.count == tombstoneSize || (buffer.count == tombstoneSize + 1 && buffer[17] == pendingFlag) else {
            throw CorruptBytes("a tombstone of \(buffer.count) bytes")
        }
        return try decodeStamp(buffer, minimumSize: tombstoneSize)
    }

    /// Appends format, HLC and origin (17 bytes), then the flags byte if any, then `zeros` zero
    /// bytes (at most 4), in one append.
    private static func appendStamp(_ stamp: Stamp, flags: UInt8? = nil, zeros: Int = 0, into bytes: inout [UInt8]) {
        var header: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for the 22 of a value record's header
        withUnsafeMutableBytes(of: &header) { header in
            header[0] = format
            header.storeBytes(of: stamp.hlc.rawValue.littleEndian, toByteOffset: 1, as: UInt64.self)
            header.storeBytes(of: stamp.origin.littleEndian, toByteOffset: 9, as: UInt64.self)
            var count = tombstoneSize
            if let flags {
                header[count] = flags
                count += 1
            }
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: header[..<(count + zeros)]))
        }
    }

    private static func decodeStamp(_ buffer: UnsafeRawBufferPointer, minimumSize: Int) throws(CorruptBytes) -> Stamp {
        guard buffer.count >= minimumSize else { throw CorruptBytes("a record of \(buffer.count) bytes is too short") }
        guard buffer[0] == format else { throw CorruptBytes("record format \(buffer[0]) is not one this version reads (\(format))") }
        return Stamp(
            hlc: HLC(rawValue: UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: 1, as: UInt64.self))),
            origin: UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: 9, as: UInt64.self))
        )
    }

    /// A 32-bit checksum of a value record, skipping its checksum field (bytes 18..21).
    /// Word-at-a-time multiply-rotate mixing: not cryptographic, but any damage to a record is
    /// caught with probability 1 - 2⁻³², at a few nanoseconds for a typical record.
    static func checksum(_ record: UnsafeRawBufferPointer) -> UInt32 {
        var h: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(record.count)
        @inline(__always) func mix(_ word: UInt64) {
            h = ((h ^ word) &* 0xFF51_AFD7_ED55_8CCD)
            h = (h << 31) | (h >> 33)
        }
        mix(record.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        mix(record.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        mix(UInt64(record.loadUnaligned(fromByteOffset: 16, as: UInt16.self)))
        var offset = headerSize
        while offset + 8 <= record.count {
            mix(record.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
            offset += 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while offset < record.count {
            tail |= UInt64(record[offset]) << shift
            shift += 8
            offset += 1
        }
        mix(tail ^ 0x100)
        h ^= h >> 29
        h = h &* 0xC4CE_B9FE_1A85_EC53
        return UInt32(truncatingIfNeeded: h ^ (h >> 32))
    }
}
