import Foundation
import GroupDefaultsWire

/// A suite's row in `suites`: its id, head revision, oldest valid revision, live keys and bytes.
struct SuiteRecord: Equatable {
    var id: UInt64
    var head: UInt64 = 0
    var oldestValid: UInt64 = 0
    var liveKeys: UInt64 = 0
    var liveBytes: UInt64 = 0

    var bytes: [UInt8] {
        [id, head, oldestValid, liveKeys, liveBytes].flatMap(LMDBKeys.bigEndian)
    }

    init(id: UInt64) { self.id = id }

    init?(_ raw: UnsafeRawBufferPointer) {
        guard raw.count == 40 else { return nil }
        id = LMDBKeys.readBigEndian(raw, at: 0)
        head = LMDBKeys.readBigEndian(raw, at: 8)
        oldestValid = LMDBKeys.readBigEndian(raw, at: 16)
        liveKeys = LMDBKeys.readBigEndian(raw, at: 24)
        liveBytes = LMDBKeys.readBigEndian(raw, at: 32)
    }
}

/// An entry's row in `entries`: revision, HLC, origin, whether deleted, the full key, the value's
/// typed JSON (empty for a deletion).
extension StoredEntry {
    var bytes: [UInt8] {
        let keyBytes = Array(key.utf8)
        var out = LMDBKeys.bigEndian(rev) + LMDBKeys.bigEndian(stamp.hlc.rawValue) + LMDBKeys.bigEndian(stamp.origin)
        out.append(valueJSON == nil ? 0 : 1)
        out += withUnsafeBytes(of: UInt16(keyBytes.count).bigEndian) { Array($0) }
        out += keyBytes
        out += valueJSON ?? []
        return out
    }

    init(_ raw: UnsafeRawBufferPointer) throws {
        guard raw.count >= 27 else { throw SyncStorageError(.unavailable, "a damaged entry record") }
        let rev = LMDBKeys.readBigEndian(raw, at: 0)
        let stamp = Stamp(hlc: HLC(rawValue: LMDBKeys.readBigEndian(raw, at: 8)), origin: LMDBKeys.readBigEndian(raw, at: 16))
        let live = raw[24] == 1
        let keyCount = Int(UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: 25, as: UInt16.self)))
        guard raw.count >= 27 + keyCount else { throw SyncStorageError(.unavailable, "a damaged entry record") }
        self.init(key: String(decoding: raw[27 ..< 27 + keyCount], as: UTF8.self),
                  valueJSON: live ? Array(raw[(27 + keyCount)...]) : nil, stamp: stamp, rev: rev)
    }
}

/// The entries whose keys share an LMDB key (see `LMDBKeys.keyPrefixBytes`), in UTF-8 key order;
/// almost always exactly one. Encoded as, per entry, its length (u32, big-endian) and its bytes.
struct EntryBucket {
    var entries: [StoredEntry] = []

    init() {}

    init(_ raw: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < raw.count {
            guard raw.count - offset >= 4 else { throw SyncStorageError(.unavailable, "a damaged entry bucket") }
            let length = Int(UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
            offset += 4
            guard raw.count - offset >= length else { throw SyncStorageError(.unavailable, "a damaged entry bucket") }
            entries.append(try StoredEntry(UnsafeRawBufferPointer(rebasing: raw[offset ..< offset + length])))
            offset += length
        }
    }

    var bytes: [UInt8] {
        var out: [UInt8] = []
        for entry in entries {
            let bytes = entry.bytes
            out += withUnsafeBytes(of: UInt32(bytes.count).bigEndian) { Array($0) }
            out += bytes
        }
        return out
    }

    func entry(for key: String) -> StoredEntry? { entries.first { $0.key == key } }

    /// Replaces the entry of `entry.key`, or inserts it in key order.
    mutating func store(_ entry: StoredEntry) {
        if let index = entries.firstIndex(where: { $0.key == entry.key }) {
            entries[index] = entry
        } else {
            let index = entries.firstIndex { LMDBKeys.utf8Less(entry.key, $0.key) } ?? entries.endIndex
            entries.insert(entry, at: index)
        }
    }
}
