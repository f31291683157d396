import Crypto
import Foundation
import GroupDefaultsWire

/// Byte layouts of the embedded store's LMDB keys and records.
///
/// Every suite gets a numeric id (the `suites` database maps account + NUL + suite to it; neither
/// name may contain NUL, so the separator is unambiguous). Keys of the other databases start with
/// that id, big-endian, so one suite's rows are one contiguous range.
enum LMDBKeys {
    /// LMDB's key limit (511 bytes) minus the suite id: how much of an entry's key its LMDB key holds.
    /// Keys sharing these first bytes (only keys longer than this can) share one LMDB record, a
    /// bucket kept in key order, so that the LMDB order of buckets and the order inside each give
    /// the exact UTF-8 byte order of keys.
    static let keyPrefixBytes = 511 - 8

    static func bigEndian(_ value: UInt64) -> [UInt8] {
        withUnsafeBytes(of: value.bigEndian) { Array($0) }
    }

    static func readBigEndian(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> UInt64 {
        UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    static func suiteName(account: String, suite: String) -> [UInt8] {
        Array(account.utf8) + [0] + Array(suite.utf8)
    }

    static func accountPrefix(_ account: String) -> [UInt8] {
        Array(account.utf8) + [0]
    }

    /// `entries`: suite id + the key's first `keyPrefixBytes` bytes → an `EntryBucket`.
    static func entry(suiteID: UInt64, key: String) -> [UInt8] {
        bigEndian(suiteID) + Array(key.utf8.prefix(keyPrefixBytes))
    }

    /// Whether `a` sorts before `b` in UTF-8 byte order (the snapshot's order; Swift's `<` on
    /// strings is not it).
    static func utf8Less(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    /// `revisions`: suite id + revision → the entry's key in `entries`.
    static func revision(suiteID: UInt64, rev: UInt64) -> [UInt8] {
        bigEndian(suiteID) + bigEndian(rev)
    }

    /// `batches`: suite id + device id + SHA-256 of the batch id.
    static func batch(suiteID: UInt64, device: UInt64, batchID: String) -> [UInt8] {
        bigEndian(suiteID) + bigEndian(device) + Array(SHA256.hash(data: Array(batchID.utf8)))
    }

    /// `history`: suite id + SHA-256 of the key: the prefix of one key's versions.
    static func historyPrefix(suiteID: UInt64, key: String) -> [UInt8] {
        bigEndian(suiteID) + Array(SHA256.hash(data: Array(key.utf8)))
    }

    /// `history`: one version, `historyPrefix` + revision.
    static func history(prefix: [UInt8], rev: UInt64) -> [UInt8] {
        prefix + bigEndian(rev)
    }

    /// `devices`: account + NUL + token id + NUL + device id (big-endian): a device's identity
    /// exactly (neither name may contain NUL).
    static func device(_ identity: StoredDevice.Identity) -> [UInt8] {
        Array(identity.account.utf8) + [0] + Array(identity.tokenID.utf8) + [0] + bigEndian(identity.deviceID)
    }
}
