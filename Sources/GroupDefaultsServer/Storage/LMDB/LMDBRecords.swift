import Foundation
import GroupDefaultsWire

/// A suite's row in `suites`: its id, head revision, oldest valid revision, live keys and bytes,
/// and the newest key epoch of an encrypted suite (0: plain; a record written before encryption
/// existed has no epoch and is plain).
struct SuiteRecord: Equatable {
    var id: UInt64
    var head: UInt64 = 0
    var oldestValid: UInt64 = 0
    var liveKeys: UInt64 = 0
    var liveBytes: UInt64 = 0
    var epoch: UInt32 = 0
    /// The revision the operator's last reset took (`resetSuite`); 0: never reset.
    var resetRev: UInt64 = 0
    /// The revision of the last reset that forgot the suite's keys, after which its mode is decided
    /// again (`PushStep.Counters.modeRev`); 0: none.
    var modeRev: UInt64 = 0

    var bytes: [UInt8] {
        [id, head, oldestValid, liveKeys, liveBytes].flatMap(LMDBKeys.bigEndian)
            + withUnsafeBytes(of: epoch.bigEndian) { Array($0) }
            + (resetRev > 0 || modeRev > 0 ? LMDBKeys.bigEndian(resetRev) + LMDBKeys.bigEndian(modeRev) : [])
    }

    init(id: UInt64) { self.id = id }

    init?(_ raw: UnsafeRawBufferPointer) {
        guard raw.count == 40 || raw.count == 44 || raw.count == 60 else { return nil }
        id = LMDBKeys.readBigEndian(raw, at: 0)
        head = LMDBKeys.readBigEndian(raw, at: 8)
        oldestValid = LMDBKeys.readBigEndian(raw, at: 16)
        liveKeys = LMDBKeys.readBigEndian(raw, at: 24)
        liveBytes = LMDBKeys.readBigEndian(raw, at: 32)
        if raw.count >= 44 { epoch = UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: 40, as: UInt32.self)) }
        if raw.count == 60 {
            resetRev = LMDBKeys.readBigEndian(raw, at: 44)
            modeRev = LMDBKeys.readBigEndian(raw, at: 52)
        }
    }
}

/// An entry's row in `entries`: revision, HLC, origin, flags (bit 0: live, bit 1: sealed), the full
/// key, then the value's typed JSON (nothing for a plain deletion) or, for a sealed entry, the key
/// epoch (u32, big-endian) and the sealed bytes.
extension StoredEntry {
    /// Flags: a live entry, a sealed one, one that names the member account that pushed it (its
    /// UTF-8 follows the key, after a 16-bit length; records written before sharing lack the flag).
    private static let liveFlag: UInt8 = 1, sealedFlag: UInt8 = 2, accountFlag: UInt8 = 4

    var bytes: [UInt8] {
        let keyBytes = Array(key.utf8)
        var out = LMDBKeys.bigEndian(rev) + LMDBKeys.bigEndian(stamp.hlc.rawValue) + LMDBKeys.bigEndian(stamp.origin)
        out.append((isLive ? Self.liveFlag : 0) | (sealed == nil ? 0 : Self.sealedFlag) | (account == nil ? 0 : Self.accountFlag))
        out += withUnsafeBytes(of: UInt16(keyBytes.count).bigEndian) { Array($0) }
        out += keyBytes
        if let account {
            let accountBytes = Array(account.utf8)
            out += withUnsafeBytes(of: UInt16(accountBytes.count).bigEndian) { Array($0) }
            out += accountBytes
        }
        if let sealed {
            out += withUnsafeBytes(of: sealed.epoch.bigEndian) { Array($0) }
            out += sealed.box
        } else {
            out += valueJSON ?? []
        }
        return out
    }

    init(_ raw: UnsafeRawBufferPointer) throws {
        guard raw.count >= 27 else { throw SyncStorageError(.unavailable, "a damaged entry record") }
        let rev = LMDBKeys.readBigEndian(raw, at: 0)
        let stamp = Stamp(hlc: HLC(rawValue: LMDBKeys.readBigEndian(raw, at: 8)), origin: LMDBKeys.readBigEndian(raw, at: 16))
        let flags = raw[24]
        let keyCount = Int(UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: 25, as: UInt16.self)))
        guard raw.count >= 27 + keyCount else { throw SyncStorageError(.unavailable, "a damaged entry record") }
        let key = String(decoding: raw[27..<27 + keyCount], as: UTF8.self)
        var offset = 27 + keyCount
        var account: String?
        if flags & Self.accountFlag != 0 {
            guard raw.count >= offset + 2 else { throw SyncStorageError(.unavailable, "a damaged entry record") }
            let accountCount = Int(UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt16.self)))
            guard raw.count >= offset + 2 + accountCount else { throw SyncStorageError(.unavailable, "a damaged entry record") }
            account = String(decoding: raw[offset + 2..<offset + 2 + accountCount], as: UTF8.self)
            offset += 2 + accountCount
        }
        let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
        if flags & Self.sealedFlag != 0 {
            guard rest.count > 4 else { throw SyncStorageError(.unavailable, "a damaged sealed entry record") }
            let epoch = UInt32(bigEndian: rest.loadUnaligned(as: UInt32.self))
            self.init(
                key: key,
                sealed: SealedPayload(epoch: epoch, box: Array(rest[4...])),
                deleted: flags & Self.liveFlag == 0,
                stamp: stamp,
                rev: rev
            )
        } else {
            self.init(key: key, valueJSON: flags & Self.liveFlag != 0 ? Array(rest) : nil, stamp: stamp, rev: rev)
        }
        self.account = account
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
            entries.append(try StoredEntry(UnsafeRawBufferPointer(rebasing: raw[offset..<offset + length])))
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

    func entry(for key: String) -> StoredEntry? { entries.first { $0.key.isSameName(as: key) } }

    /// Replaces the entry of `entry.key`, or inserts it in key order.
    mutating func store(_ entry: StoredEntry) {
        if let index = entries.firstIndex(where: { $0.key.isSameName(as: entry.key) }) {
            entries[index] = entry
        } else {
            let index = entries.firstIndex { LMDBKeys.utf8Less(entry.key, $0.key) } ?? entries.endIndex
            entries.insert(entry, at: index)
        }
    }
}
