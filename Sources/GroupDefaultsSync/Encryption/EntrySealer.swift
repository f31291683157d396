package import Crypto
import Foundation
package import GroupDefaults
import GroupDefaultsWire

/// Seals a suite's changes for the server and opens what the server sends back, checking that each
/// entry is what its envelope says: the envelope format, version 1, in one place.
///
/// **What the server sees** per entry: the key id (`SuiteKeys.keyID(for:)`), the HLC, the origin,
/// whether it is a deletion, the key epoch and the sealed box. **What is sealed**, with
/// ChaCha20-Poly1305 under the epoch's key and a random 96-bit nonce:
/// ```
/// 0        format version (1)
/// 1..4     length n of what follows up to the padding (u32, big-endian)
/// 5..6     key length k (u16), then the key name (UTF-8)
/// 7+k..    HLC (u64), flags (bit 0: a deletion), then the value in the store's binary form
/// n+5..    zeros up to the padded length (PADMÉ: at most 12 % more, leaking only the size's
///          order of magnitude and top bits)
/// ```
/// **Associated data** (`associatedData`), authenticated and not stored twice: version, suite, key
/// id, HLC, origin, deletion flag and epoch; so that a server that moves a sealed box to another key,
/// suite, time, device or epoch, or turns a value into a deletion, makes it fail to open.
///
/// ChaCha20-Poly1305 rather than AES-GCM: constant time and fast on every CPU without relying on
/// AES instructions (ARM phones and small servers included), and the same 256-bit key and 96-bit
/// nonce. Random nonces are safe for far more entries than a suite writes under one epoch (2^32).
package struct EntrySealer: Sendable {
    /// The suite's keys.
    package let keys: SuiteKeys

    /// The envelope format's version, first in the plaintext and in the associated data.
    static let version: UInt8 = 1
    private static let deletedFlag: UInt8 = 1

    package init(keys: SuiteKeys) { self.keys = keys }

    /// Why a sealed entry was refused: it does not open (tampered, or sealed under a key this device
    /// lacks), or it opens to something other than its envelope says.
    package enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The epoch's key is not on this device (the suite's key was rotated: pair it again).
        case unknownEpoch(UInt32)
        /// The box does not open under the epoch's key with this envelope: modified, swapped between
        /// keys, or its HLC, origin, deletion flag or epoch changed.
        case doesNotOpen
        /// It opened, but to a different key, HLC or deletion than the envelope says, or to bytes
        /// this format does not allow.
        case mismatch(String)
        /// The entry is not sealed, in a suite that is.
        case notSealed

        package var description: String {
            switch self {
            case .unknownEpoch(let epoch): "sealed under key epoch \(epoch), whose key this device does not have"
            case .doesNotOpen: "does not open: changed on the server, or moved from another key"
            case .mismatch(let what): "opens to \(what) than its envelope says"
            case .notSealed: "is not sealed, in an end-to-end encrypted suite"
            }
        }
    }

    // MARK: Sealing

    /// The op that carries a local change to the server: sealed under the keys' sealing epoch
    /// (`SuiteKeys.sealingEpoch`), with a random nonce (tests give one, for fixed vectors).
    package func seal(key: String, value: PropertyListValue?, hlc: HLC, origin: UInt64, nonce: ChaChaPoly.Nonce? = nil) throws -> PushOp {
        let nonce = try nonce ?? RandomBytes.take(12).map(ChaChaPoly.Nonce.init(data:)) ?? ChaChaPoly.Nonce()
        let epoch = keys.sealingEpoch
        let keyID = keys.keyID(for: key)
        let deleted = value == nil
        let ad = associatedData(keyID: keyID, hlc: hlc, origin: origin, deleted: deleted, epoch: epoch)
        let box = try ChaChaPoly.seal(
            Self.plaintext(key: key, value: value, hlc: hlc),
            using: keys.epochs[epoch]!,
            nonce: nonce,
            authenticating: ad
        )
        return PushOp(keyID: keyID, sealed: SealedPayload(epoch: epoch, box: Array(box.combined)), deleted: deleted, hlc: hlc)
    }

    /// The padded plaintext of an entry.
    static func plaintext(key: String, value: PropertyListValue?, hlc: HLC) -> [UInt8] {
        let encoded = value.map(BinaryCodec.encode)
        let keyCount = key.utf8.count
        let length = 2 + keyCount + 8 + 1 + (encoded?.count ?? 0)
        var out: [UInt8] = []
        out.reserveCapacity(padme(5 + length))
        out.append(version)
        append(UInt32(length), to: &out)
        append(UInt16(keyCount), to: &out)
        out += key.utf8
        append(hlc.rawValue, to: &out)
        out.append(value == nil ? deletedFlag : 0)
        if let encoded { out += encoded }
        out += repeatElement(0, count: padme(out.count) - out.count)
        return out
    }

    /// PADMÉ (Nikitin et al., 2019): `length` rounded up so that only its top bits vary; at most 12 %
    /// more, and an observer learns about as little as with exponential padding at a fraction of
    /// its cost.
    static func padme(_ length: Int) -> Int {
        guard length > 1 else { return length }
        let e = Int.bitWidth - 1 - length.leadingZeroBitCount  // floor(log2(length))
        let s = Int.bitWidth - e.leadingZeroBitCount  // floor(log2(e)) + 1
        let mask = (1 << (e - s)) - 1
        return (length + mask) & ~mask
    }

    // MARK: Opening

    /// The plain entry inside a sealed one, after checking it against its envelope.
    package func open(_ entry: SyncEntry) throws(Refusal) -> SyncEntry {
        guard let sealed = entry.sealed else { throw .notSealed }
        guard let key = keys.epochs[sealed.epoch] else { throw .unknownEpoch(sealed.epoch) }
        let ad = associatedData(keyID: entry.key, hlc: entry.hlc, origin: entry.origin, deleted: entry.isDeleted, epoch: sealed.epoch)
        let plaintext: Data
        do {
            plaintext = try ChaChaPoly.open(try ChaChaPoly.SealedBox(combined: sealed.box), using: key, authenticating: ad)
        } catch {
            throw .doesNotOpen
        }
        let opened = try Self.parse(Array(plaintext))
        // The AEAD binds the envelope; these bind the payload to it (a key id is a one-way function of
        // the name, so a box opened under another key id than its name's is a swap).
        guard keys.keyID(for: opened.key) == entry.key else { throw .mismatch("another key") }
        guard opened.hlc == entry.hlc else { throw .mismatch("another HLC") }
        guard (opened.value == nil) == entry.isDeleted else { throw .mismatch("another deletion flag") }
        var plain = SyncEntry(key: opened.key, value: opened.value, hlc: entry.hlc, origin: entry.origin, rev: entry.rev)
        plain.account = entry.account
        return plain
    }

    private static func parse(_ bytes: [UInt8]) throws(Refusal) -> (key: String, value: PropertyListValue?, hlc: HLC) {
        guard bytes.count >= 5, bytes[0] == version else { throw .mismatch("a format version other") }
        let length = Int(read(UInt32.self, bytes, at: 1))
        guard length >= 11, 5 + length <= bytes.count else { throw .mismatch("a length other") }
        let keyLength = Int(read(UInt16.self, bytes, at: 5))
        guard 7 + keyLength + 9 <= 5 + length else { throw .mismatch("a key length other") }
        let keyBytes = bytes[7..<7 + keyLength]
        guard let key = String(validating: keyBytes, as: UTF8.self) else { throw .mismatch("a key name other") }
        let hlc = HLC(rawValue: read(UInt64.self, bytes, at: 7 + keyLength))
        let flags = bytes[15 + keyLength]
        let valueBytes = Array(bytes[(16 + keyLength)..<(5 + length)])
        if flags & deletedFlag != 0 {
            guard valueBytes.isEmpty else { throw .mismatch("a value with a deletion flag rather") }
            return (key, nil, hlc)
        }
        do {
            return (key, try valueBytes.withUnsafeBytes { buffer throws(CorruptBytes) in try BinaryCodec.decode(buffer) }, hlc)
        } catch {
            throw .mismatch("an undecodable value rather")
        }
    }

    // MARK: Associated data

    /// What each sealed box is bound to: version, suite, key id, HLC, origin, deletion flag, epoch.
    func associatedData(keyID: String, hlc: HLC, origin: UInt64, deleted: Bool, epoch: UInt32) -> [UInt8] {
        var out: [UInt8] = [Self.version]
        let suite = Array(keys.suite.utf8)
        let id = Array(keyID.utf8)
        Self.append(UInt16(truncatingIfNeeded: suite.count), to: &out)
        out += suite
        Self.append(UInt16(truncatingIfNeeded: id.count), to: &out)
        out += id
        Self.append(hlc.rawValue, to: &out)
        Self.append(origin, to: &out)
        out.append(deleted ? 1 : 0)
        Self.append(epoch, to: &out)
        return out
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes += $0 }
    }

    private static func read<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], at offset: Int) -> T {
        bytes.withUnsafeBytes { T(bigEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }
}
