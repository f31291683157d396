import Crypto
import Foundation
import GroupDefaultsWire
import Synchronization

// @unchecked Sendable below: SymmetricKey is an immutable value (copy-on-write bytes) that
// swift-crypto does not mark Sendable; these keys are never mutated after init.

/// The keys of one end-to-end encrypted suite, as a device holds them: the key that turns key names
/// into opaque key ids (the same for the suite's whole life, so that each key keeps one id on the
/// server), and one sealing key per key epoch (the newest seals; older ones open history).
///
/// Keys never appear in `description`, logs or errors. They are kept in a key file of their own
/// (`SuiteKeys.read(from:)`, `write(to:)`), mode 0600, refused when its group or others can read it.
///
/// ```swift
/// let recovery = RecoveryKey()                      // shown to the person once
/// let keys = SuiteKeys(recoveryKey: recovery, suite: "group.com.example.chat")
/// try keys.write(to: "/home/ana/.config/groupdefaults/group.com.example.chat.keys")
/// ```
public struct SuiteKeys: @unchecked Sendable, CustomStringConvertible {
    /// The suite the keys belong to (bound into every key id and every sealed entry).
    public let suite: String
    /// The key of key ids (HMAC-SHA256).
    let names: SymmetricKey
    /// HMAC-SHA256 keyed with `names` once: a key id copies it (keying it costs two SHA-256
    /// blocks, as much as the rest of the id; measured with `Tools/bench sync --encrypt`).
    private let namesMAC: HMAC<SHA256>
    /// Key ids already made: a suite's keys are written and read again and again.
    private let knownIDs: KeyIDCache
    /// The sealing key of each epoch.
    let epochs: [UInt32: SymmetricKey]
    /// The public half of the key pair derived from the recovery key: each epoch's key is sealed to
    /// it (a key bag on the server), so the recovery key opens every epoch. A device never holds
    /// the private half.
    let recoveryPublicKey: Curve25519.KeyAgreement.PublicKey
    /// The epoch new entries are sealed under: the newest.
    public var currentEpoch: UInt32 { epochs.keys.max() ?? 1 }

    /// A key file's `format`.
    static let fileFormat = 1
    /// The salt of every key derivation: the envelope format's name and version.
    private static let salt = Data("GroupDefaults sealed entries v1".utf8)

    /// The keys of `suite` derived from its recovery key (epoch 1): the same recovery key gives the
    /// same keys on every device.
    public init(recoveryKey: RecoveryKey, suite: String) {
        self.init(suite: suite, names: Self.derive("key ids", recoveryKey, suite), epochs: [1: Self.derive("sealing, epoch 1", recoveryKey, suite)],
                  recoveryPublicKey: Self.recoveryPrivateKey(recoveryKey, suite).publicKey)
    }

    init(suite: String, names: SymmetricKey, epochs: [UInt32: SymmetricKey], recoveryPublicKey: Curve25519.KeyAgreement.PublicKey) {
        self.suite = suite
        self.names = names
        self.namesMAC = HMAC<SHA256>(key: names)
        self.knownIDs = KeyIDCache()
        self.epochs = epochs
        self.recoveryPublicKey = recoveryPublicKey
    }

    private static func derive(_ purpose: String, _ recoveryKey: RecoveryKey, _ suite: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: recoveryKey.secret), salt: salt,
                               info: Data("\(purpose)\0\(suite)".utf8), outputByteCount: 32)
    }

    private static func recoveryPrivateKey(_ recoveryKey: RecoveryKey, _ suite: String) -> Curve25519.KeyAgreement.PrivateKey {
        // Any 32 bytes are an X25519 private key (clamped when used).
        try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: derive("recovery key agreement", recoveryKey, suite).withUnsafeBytes { Data($0) })
    }

    // MARK: Rotation and recovery

    /// These keys and a new, random key for the next epoch, which seals from now on: the one after
    /// both these keys' and `serverEpoch` (the newest epoch the server has a key bag for, when
    /// another device rotated since this one got its keys).
    ///
    /// - Throws: `SyncError` (`local`) when no epoch is left (after 4,294,967,295 rotations).
    public func rotated(after serverEpoch: UInt32 = 0) throws(SyncError) -> SuiteKeys {
        let last = max(currentEpoch, serverEpoch)
        guard last < UInt32.max else { throw SyncError(.local, "\(suite) has used every key epoch") }
        var epochs = self.epochs
        epochs[last + 1] = SymmetricKey(size: .bits256)
        return SuiteKeys(suite: suite, names: names, epochs: epochs, recoveryPublicKey: recoveryPublicKey)
    }

    private static var bagSuite: HPKE.Ciphersuite { .Curve25519_SHA256_ChachaPoly }
    private func bagInfo(_ epoch: UInt32) -> Data { Data("GroupDefaults key bag v1\0\(suite)\0\(epoch)".utf8) }

    /// The key of `epoch` sealed to the recovery key (HPKE, base mode), in base64: the encapsulated
    /// key, then the sealed key.
    public func keyBag(epoch: UInt32) throws(SyncError) -> String {
        guard let key = epochs[epoch] else { throw SyncError(.local, "these keys have no epoch \(epoch)") }
        do {
            var sender = try HPKE.Sender(recipientKey: recoveryPublicKey, ciphersuite: Self.bagSuite, info: bagInfo(epoch))
            let sealed = try key.withUnsafeBytes { try sender.seal(Data($0)) }
            return (sender.encapsulatedKey + sealed).base64EncodedString()
        } catch {
            throw SyncError(.local, "cannot seal the key of epoch \(epoch) to the recovery key: \(error)")
        }
    }

    /// The keys of `suite` from its recovery key and the key bags the server keeps: epoch 1 from the
    /// recovery key itself, each later one from its bag. A bag that does not open with this
    /// recovery key (a token stored bytes of its own choosing) is passed over; if it was the
    /// newest, such a device seals under an epoch the server no longer takes, and is told to pair
    /// instead (or `rotate-key` moves the suite past it).
    public init(recoveryKey: RecoveryKey, suite: String, keyBags: [String: String]) {
        let keys = SuiteKeys(recoveryKey: recoveryKey, suite: suite)
        let privateKey = Self.recoveryPrivateKey(recoveryKey, suite)
        var epochs = keys.epochs
        // Every bag that opens, whatever came before it: one a token stored with bytes of its own
        // choosing opens to nothing and is passed over, so that it cannot hide the later epochs.
        for (text, bag) in keyBags {
            guard let epoch = UInt32(text), epoch >= 2, let key = keys.openBag(bag, epoch: epoch, privateKey: privateKey) else { continue }
            epochs[epoch] = key
        }
        self.init(suite: suite, names: keys.names, epochs: epochs, recoveryPublicKey: keys.recoveryPublicKey)
    }

    private func openBag(_ bag: String, epoch: UInt32, privateKey: Curve25519.KeyAgreement.PrivateKey) -> SymmetricKey? {
        guard let bytes = Data(base64Encoded: bag), bytes.count > 32,
              var recipient = try? HPKE.Recipient(privateKey: privateKey, ciphersuite: Self.bagSuite, info: bagInfo(epoch),
                                                  encapsulatedKey: bytes.prefix(32)),
              let key = try? recipient.open(bytes.dropFirst(32)), key.count == 32
        else { return nil }
        return SymmetricKey(data: key)
    }

    /// Says which suite and epoch, never a key.
    public var description: String { "keys of \(suite) (epoch \(currentEpoch))" }

    /// The opaque id of `key` on the server: the first 16 bytes of HMAC-SHA256(key-id key, key
    /// name), in lowercase hex. The server cannot read or guess key names from it.
    public func keyID(for key: String) -> String {
        if let id = knownIDs[key] { return id }
        var mac = namesMAC
        var name = key
        name.withUTF8 { mac.update(data: $0) }
        let id = mac.finalize().withUnsafeBytes { Hex.string(UnsafeRawBufferPointer(rebasing: $0.prefix(16))) }
        knownIDs[key] = id
        return id
    }

    // MARK: The key file

    /// The key file as JSON: `{"format": 1, "suite": …, "key_ids": base64, "epochs": {"1": base64},
    /// "recovery_public_key": base64}`.
    private struct File: Codable {
        var format: Int
        var suite: String
        var keyIDs: String
        var epochs: [String: String]
        var recoveryPublicKey: String

        enum CodingKeys: String, CodingKey { case format, suite, keyIDs = "key_ids", epochs, recoveryPublicKey = "recovery_public_key" }
    }

    /// The keys in the key file at `path`, which must belong to `suite`.
    ///
    /// - Throws: `SyncError` (`local`): a missing or unreadable file, one that its group or others can
    ///   read (with the `chmod` that fixes it), one that is damaged or belongs to another suite.
    public static func read(from path: String, suite: String) throws(SyncError) -> SuiteKeys {
        try PrivateFile.check(path, what: "key file", missing: .local)
        let bytes: Data
        do { bytes = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
            throw SyncError(.local, "cannot read the key file \(path): \(error.localizedDescription)")
        }
        return try SuiteKeys(fileBytes: bytes, suite: suite, source: "the key file \(path)")
    }

    /// The keys in a key file's bytes (`fileBytes`), which must be `suite`'s; `source` names where
    /// they come from in errors.
    init(fileBytes: Data, suite: String, source: String) throws(SyncError) {
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: fileBytes) } catch {
            throw SyncError(.local, "\(source) is damaged: \(error.localizedDescription)")
        }
        guard file.format == Self.fileFormat else {
            throw SyncError(.local, "\(source) has format \(file.format), which this version does not read")
        }
        guard file.suite == suite else {
            throw SyncError(.local, "\(source) holds the keys of \(file.suite), not of \(suite)")
        }
        var epochs: [UInt32: SymmetricKey] = [:]
        for (epoch, text) in file.epochs {
            guard let number = UInt32(epoch), number > 0, let bytes = Data(base64Encoded: text), bytes.count == 32 else {
                throw SyncError(.local, "\(source) is damaged: epoch \(epoch) has no valid key")
            }
            epochs[number] = SymmetricKey(data: bytes)
        }
        guard let names = Data(base64Encoded: file.keyIDs), names.count == 32, !epochs.isEmpty,
              let recovery = Data(base64Encoded: file.recoveryPublicKey),
              let recoveryPublicKey = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: recovery)
        else {
            throw SyncError(.local, "\(source) is damaged: a key is missing")
        }
        self.init(suite: suite, names: SymmetricKey(data: names), epochs: epochs, recoveryPublicKey: recoveryPublicKey)
    }

    /// The key file's bytes: JSON, keys in base64.
    func fileBytes() throws(SyncError) -> Data {
        func base64(_ key: SymmetricKey) -> String { key.withUnsafeBytes { Data($0).base64EncodedString() } }
        let file = File(format: Self.fileFormat, suite: suite, keyIDs: base64(names),
                        epochs: Dictionary(uniqueKeysWithValues: epochs.map { (String($0.key), base64($0.value)) }),
                        recoveryPublicKey: recoveryPublicKey.rawRepresentation.base64EncodedString())
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        do { return try encoder.encode(file) } catch { throw SyncError(.local, "cannot encode the keys: \(error)") }
    }

    /// Writes the keys to `path` atomically (a new file renamed over the old one) with mode 0600.
    ///
    /// - Throws: `SyncError` (`local`) if the file cannot be written.
    public func write(to path: String) throws(SyncError) {
        try PrivateFile.write(try fileBytes(), to: path, what: "key file")
    }
}

/// Key ids by key name, for one suite's keys: at most 16,384 (then it starts again), so a
/// suite's steady state pays a lookup, not an HMAC, per entry sealed or opened.
final class KeyIDCache: Sendable {
    private let ids = Mutex<[String: String]>([:])
    private static let capacity = 16_384

    subscript(key: String) -> String? {
        get { ids.withLock { $0[key] } }
        set {
            ids.withLock { ids in
                if ids.count >= Self.capacity { ids.removeAll(keepingCapacity: true) }
                ids[key] = newValue
            }
        }
    }
}
