import Crypto
import Foundation
public import GroupDefaultsWire
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
    /// The public half of the signing key derived from the recovery key, which may sign any key
    /// bag (`SignedKeyBag`); nil in a key file made before key bags were signed.
    let recoveryVerifyKey: Curve25519.Signing.PublicKey?
    /// The keys by which the suite is shared with other accounts (`SharingKeys`); nil in a key file
    /// made before encrypted suites could be shared.
    let sharing: SharingKeys?
    /// The key bag of a rotation this device began and did not finish, with its epoch's key. Until
    /// the server is known to hold it (`PendingKeyBag.stored`: its put failed, or its answer was
    /// lost) the next rotation sends it again unchanged, so that no epoch ever has two bags signed
    /// here for a server to choose between; once it is, only the re-seal is left.
    var pendingBag: PendingKeyBag?
    /// Whether a rotation this device began is unfinished: its key file holds the new epoch's key
    /// and still the bag it signed for it, which is forgotten once every entry is sealed again
    /// (`KeyRotation`).
    var hasUnfinishedRotation: Bool { pendingBag.map { $0.epoch == currentEpoch } ?? false }
    /// The newest epoch whose key this device has.
    public var currentEpoch: UInt32 { epochs.keys.max() ?? 1 }
    /// The epoch new entries are sealed under: the newest, except while the newest is the key of a
    /// rotation this device began whose bag the server is not known to hold. Then the one before:
    /// another owner device may store its own bag for that epoch first, and what was sealed under
    /// this device's key for it would open nowhere else (`settlingRotation(with:)`).
    var sealingEpoch: UInt32 {
        guard let pending = pendingBag, pending.epoch == currentEpoch, !pending.stored else { return currentEpoch }
        return epochs.keys.filter { $0 < pending.epoch }.max() ?? currentEpoch
    }
    /// The oldest epoch whose entries this device applies; one sealed under an older epoch is
    /// history (a retired key may be a revoked device's). The current epoch, or while a rotation
    /// this device began is unfinished the one before it too: what other devices pushed under it
    /// until the bag was stored is taken in and sealed again (`KeyRotation`), not refused.
    var oldestAppliedEpoch: UInt32 { hasUnfinishedRotation ? max(currentEpoch - 1, 1) : currentEpoch }

    /// A key file's `format`.
    static let fileFormat = 1
    /// The salt of every key derivation: the envelope format's name and version.
    private static let salt = Data("GroupDefaults sealed entries v1".utf8)

    /// The keys of `suite` derived from its recovery key (epoch 1): the same recovery key gives the
    /// same keys on every device.
    public init(recoveryKey: RecoveryKey, suite: String) {
        self.init(
            suite: suite,
            names: Self.derive("key ids", recoveryKey, suite),
            epochs: [1: Self.derive("sealing, epoch 1", recoveryKey, suite)],
            recoveryPublicKey: Self.recoveryPrivateKey(recoveryKey, suite).publicKey,
            recoveryVerifyKey: Self.recoverySigningKey(recoveryKey, suite).publicKey,
            sharing: SharingKeys(
                owner: Self.ownerKey(recoveryKey, suite),
                ownerSeal: Self.derive("owner seal", recoveryKey, suite)
            )
        )
    }

    init(
        suite: String,
        names: SymmetricKey,
        epochs: [UInt32: SymmetricKey],
        recoveryPublicKey: Curve25519.KeyAgreement.PublicKey,
        recoveryVerifyKey: Curve25519.Signing.PublicKey?,
        sharing: SharingKeys?
    ) {
        self.suite = suite
        self.names = names
        self.namesMAC = HMAC<SHA256>(key: names)
        self.knownIDs = KeyIDCache()
        self.epochs = epochs
        self.recoveryPublicKey = recoveryPublicKey
        self.recoveryVerifyKey = recoveryVerifyKey
        self.sharing = sharing
    }

    /// These keys with `epochs` in place of theirs.
    func with(epochs: [UInt32: SymmetricKey]) -> SuiteKeys { rebuilt(epochs: epochs, sharing: sharing) }

    /// These keys with `sharing` in place of theirs.
    func with(sharing: SharingKeys?) -> SuiteKeys { rebuilt(epochs: epochs, sharing: sharing) }

    private func rebuilt(epochs: [UInt32: SymmetricKey], sharing: SharingKeys?) -> SuiteKeys {
        var keys = SuiteKeys(
            suite: suite,
            names: names,
            epochs: epochs,
            recoveryPublicKey: recoveryPublicKey,
            recoveryVerifyKey: recoveryVerifyKey,
            sharing: sharing
        )
        keys.pendingBag = pendingBag
        return keys
    }

    /// These keys with `pendingBag` in place of theirs.
    func with(pendingBag: PendingKeyBag?) -> SuiteKeys {
        var keys = self
        keys.pendingBag = pendingBag
        return keys
    }

    /// Whether `epoch` is that of a rotation this device began whose bag the server is not known to
    /// hold: its key here may not be the suite's.
    func isUnsettled(_ epoch: UInt32?) -> Bool {
        guard let pending = pendingBag, let epoch else { return false }
        return pending.epoch == epoch && !pending.stored
    }

    /// These keys once the server's `bags` tell how the rotation this device began ended, or nil
    /// when they tell nothing new:
    /// - the server's bag for its epoch is the one this device sent (the same bytes), or hands the
    ///   owner's devices this device's key (a bag put again after a restore or a reset is sealed
    ///   anew): marked stored, the key is the suite's;
    /// - the bags hand the owner's devices another key for the epoch, signed by the owner key
    ///   (another owner device rotated first): the key made here was never the suite's, and is
    ///   replaced by the bags' (with any later epoch they hand);
    /// - the server holds a bag for the epoch that this device cannot tie to its key (a suite
    ///   never shared: its bags hand nothing to devices): a key known stored is kept, whatever the
    ///   bags look like now; one never known stored is dropped with the bag (nothing was sealed
    ///   under it: `sealingEpoch`), and the epoch's key comes by pairing again.
    func settlingRotation(with bags: KeyBags) -> SuiteKeys? {
        guard let pending = pendingBag, bags.newestEpoch >= pending.epoch else { return nil }
        let before = with(epochs: epochs.filter { $0.key < pending.epoch }).with(pendingBag: nil)
        let handed = before.adopting(bags)
        let handedKey = handed?.epochs[pending.epoch]
        let sameBytes = pending.bag.bundle.map { mine in bags.epochs[String(pending.epoch)]?.utf8.elementsEqual(mine.utf8) == true } ?? false
        if sameBytes || handedKey == pending.key {
            guard !pending.stored || epochs[pending.epoch] != pending.key else { return nil }
            var stored = pending
            stored.stored = true
            var known = epochs
            known[pending.epoch] = pending.key  // a run whose put was refused had taken it out
            return with(epochs: known).with(pendingBag: stored)
        }
        if let handed, handedKey != nil { return handed }
        guard !pending.stored else { return nil }
        var kept = epochs
        if kept[pending.epoch] == pending.key { kept[pending.epoch] = nil }
        return with(epochs: kept).with(pendingBag: nil)
    }

    /// The owner key derived from the recovery key (any 32 bytes are an Ed25519 seed).
    private static func ownerKey(_ recoveryKey: RecoveryKey, _ suite: String) -> Curve25519.Signing.PrivateKey {
        try! Curve25519.Signing.PrivateKey(rawRepresentation: derive("owner key", recoveryKey, suite).withUnsafeBytes { Data($0) })
    }

    private static func derive(_ purpose: String, _ recoveryKey: RecoveryKey, _ suite: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: recoveryKey.secret),
            salt: salt,
            info: Data("\(purpose)\0\(suite)".utf8),
            outputByteCount: 32
        )
    }

    private static func recoveryPrivateKey(_ recoveryKey: RecoveryKey, _ suite: String) -> Curve25519.KeyAgreement.PrivateKey {
        // Any 32 bytes are an X25519 private key (clamped when used).
        try! Curve25519.KeyAgreement.PrivateKey(rawRepresentation: derive("recovery key agreement", recoveryKey, suite).withUnsafeBytes { Data($0) })
    }

    /// The signing key derived from the recovery key (any 32 bytes are an Ed25519 seed).
    static func recoverySigningKey(_ recoveryKey: RecoveryKey, _ suite: String) -> Curve25519.Signing.PrivateKey {
        try! Curve25519.Signing.PrivateKey(rawRepresentation: derive("recovery key bag signing", recoveryKey, suite).withUnsafeBytes { Data($0) })
    }

    /// The signing key of `epoch`, derived from its key: whoever holds an epoch's key may sign the
    /// next epoch's bag.
    private func signingKey(_ epoch: UInt32) -> Curve25519.Signing.PrivateKey? {
        guard let key = epochs[epoch] else { return nil }
        let seed = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: key,
            salt: Self.salt,
            info: Data("key bag signing\0\(suite)\0\(epoch)".utf8),
            outputByteCount: 32
        )
        return try! Curve25519.Signing.PrivateKey(rawRepresentation: seed.withUnsafeBytes { Data($0) })
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
        return with(epochs: epochs)
    }

    private static var bagSuite: HPKE.Ciphersuite { .Curve25519_SHA256_ChachaPoly }
    private func bagInfo(_ epoch: UInt32) -> Data { Data("GroupDefaults key bag v1\0\(suite)\0\(epoch)".utf8) }

    /// The key of `epoch` sealed to the recovery key (HPKE, base mode), in base64: the encapsulated
    /// key, then the sealed key.
    private func sealedKey(epoch: UInt32) throws(SyncError) -> String {
        guard let key = epochs[epoch] else { throw SyncError(.local, "these keys have no epoch \(epoch)") }
        do {
            var sender = try HPKE.Sender(recipientKey: recoveryPublicKey, ciphersuite: Self.bagSuite, info: bagInfo(epoch))
            let sealed = try key.withUnsafeBytes { try sender.seal(Data($0)) }
            return (sender.encapsulatedKey + sealed).base64EncodedString()
        } catch {
            throw SyncError(.local, "cannot seal the key of epoch \(epoch) to the recovery key: \(error)")
        }
    }

    /// The key bag of `epoch` (2 or later): its key sealed to the recovery key (or `bundle`, a bag
    /// the server holds already), signed by the previous epoch's key or, if these keys lack it, by
    /// `recoveryKey`.
    ///
    /// - Throws: `SyncError` (`local`) when these keys have no key of `epoch`, or neither the
    ///   previous epoch's key nor a recovery key to sign with.
    public func signedKeyBag(epoch: UInt32, bundle: String? = nil, recoveryKey: RecoveryKey? = nil) throws(SyncError) -> SignedKeyBag {
        guard epoch >= 2, let verifyKey = signingKey(epoch)?.publicKey.rawRepresentation else {
            throw SyncError(.local, "these keys have no epoch \(epoch)")
        }
        let bundle = if let bundle { bundle } else { try sealedKey(epoch: epoch) }
        guard let bytes = Data(base64Encoded: bundle) else { throw SyncError(.local, "the key bag of epoch \(epoch) is not base64") }
        let message = KeyBagSignature.message(suite: suite, epoch: epoch, verifyKey: verifyKey, bundle: bytes)
        let signer = signingKey(epoch - 1) ?? recoveryKey.map { Self.recoverySigningKey($0, suite) }
        guard let signer else {
            throw SyncError(
                .local,
                """
                this device has no key of epoch \(epoch - 1) of \(suite) to sign epoch \(epoch)'s key bag with: \
                only the recovery key can (--recovery-key-file)
                """
            )
        }
        do {
            return SignedKeyBag(
                bundle: bundle,
                verifyKey: verifyKey.base64EncodedString(),
                signature: try signer.signature(for: message).base64EncodedString(),
                ownerSignature: try sharing?.owner?.signature(for: message).base64EncodedString()
            )
        } catch {
            throw SyncError(.local, "cannot sign the key bag of epoch \(epoch): \(error)")
        }
    }

    /// The suite's anchor as these keys make it (`KeyAnchor`): epoch 1's verify key and the
    /// recovery key's, and a signed bag for each later epoch up to the server's newest (the
    /// server's own bag where it holds one, which an older version stored unsigned), or up to these
    /// keys' current epoch when the server holds none (a new suite, or one its operator reset).
    public func anchor(serverBags: KeyBags, recoveryKey: RecoveryKey? = nil) throws(SyncError) -> KeyAnchor {
        guard let first = signingKey(1) else { throw SyncError(.local, "these keys have no epoch 1") }
        var bags = ["1": SignedKeyBag(bundle: nil, verifyKey: first.publicKey.rawRepresentation.base64EncodedString(), signature: nil)]
        let last = serverBags.newestEpoch > 0 ? serverBags.newestEpoch : currentEpoch
        for epoch in UInt32(2)..<max(last + 1, 2) {
            // A rotation's bag not known stored keeps the bytes it was signed with (`settlingRotation`).
            let unsent = pendingBag.flatMap { $0.epoch == epoch ? $0.bag.bundle : nil }
            bags[String(epoch)] = try signedKeyBag(epoch: epoch, bundle: serverBags.epochs[String(epoch)] ?? unsent, recoveryKey: recoveryKey)
        }
        return KeyAnchor(recoveryVerifyKey: recoveryVerifyKey?.rawRepresentation.base64EncodedString(), bags: bags)
    }

    /// These keys with the epochs of `other` that they lack (keys the recovery key opened), or nil
    /// when `other` is not this suite's (another recovery key: its epoch 1 differs).
    func adding(_ other: SuiteKeys) -> SuiteKeys? {
        guard other.suite.isSameName(as: suite), let mine = signingKey(1)?.publicKey.rawRepresentation,
            other.signingKey(1)?.publicKey.rawRepresentation == mine
        else { return nil }
        return SuiteKeys(
            suite: suite,
            names: names,
            epochs: epochs.merging(other.epochs) { own, _ in own },
            recoveryPublicKey: recoveryPublicKey,
            recoveryVerifyKey: recoveryVerifyKey ?? other.recoveryVerifyKey,
            sharing: sharing?.owner != nil ? sharing : other.sharing ?? sharing
        )
    }

    /// Whether the server's anchor (`KeyBags.anchor`) is these keys': the same epoch 1, and no
    /// other recovery key. True when the suite has no anchor yet.
    public func matches(anchor: KeyAnchor?) -> Bool {
        guard let anchor else { return true }
        guard let first = signingKey(1), anchor.bags["1"]?.verifyKey == first.publicKey.rawRepresentation.base64EncodedString() else {
            return false
        }
        guard let theirs = anchor.recoveryVerifyKey, let ours = recoveryVerifyKey else { return true }
        return theirs == ours.rawRepresentation.base64EncodedString()
    }

    /// The keys of `suite` from its recovery key and the key bags the server keeps: epoch 1 from the
    /// recovery key itself, each later one from its bag, taken only if it opens with this recovery
    /// key and is signed by the owner key or the recovery key, as checked here from keys derived
    /// here: a bag a token, the server or a member of the suite stored with a key of its own
    /// choosing is passed over. A bag signed only by the key of the epoch before (made by a device
    /// whose key file predates shared suites, without the owner key) is passed over too: a member
    /// of the suite, or one removed, holds such keys, and a server could show its bag instead. If it was the newest, such a device seals under an epoch the server no longer
    /// takes, and is told to pair instead (or `rotate-key --recovery-key-file` moves the suite past it).
    public init(recoveryKey: RecoveryKey, suite: String, keyBags: KeyBags) {
        let keys = SuiteKeys(recoveryKey: recoveryKey, suite: suite)
        let privateKey = Self.recoveryPrivateKey(recoveryKey, suite)
        let recoveryVerifyKey = Self.recoverySigningKey(recoveryKey, suite).publicKey
        let ownerVerifyKey = Self.ownerKey(recoveryKey, suite).publicKey
        var known = keys
        for (epoch, bag) in keyBags.epochs.compactMap({ bag in UInt32(bag.key).map { ($0, bag.value) } }).sorted(by: { $0.0 < $1.0 }) {
            guard epoch >= 2, let key = keys.openBag(bag, epoch: epoch, privateKey: privateKey),
                let signature = keyBags.signatures[String(epoch)].flatMap({ Data(base64Encoded: $0) }),
                let bytes = Data(base64Encoded: bag)
            else { continue }
            var epochs = known.epochs
            epochs[epoch] = key
            let candidate = known.with(epochs: epochs)
            guard let verifyKey = candidate.signingKey(epoch)?.publicKey.rawRepresentation else { continue }
            let message = KeyBagSignature.message(suite: suite, epoch: epoch, verifyKey: verifyKey, bundle: bytes)
            let ownerSignature = keyBags.ownerSignatures[String(epoch)].flatMap { Data(base64Encoded: $0) }
            let byOwner = ownerSignature.map { ownerVerifyKey.isValidSignature($0, for: message) } ?? false
            guard byOwner || recoveryVerifyKey.isValidSignature(signature, for: message) else { continue }
            known = candidate
        }
        self = known
    }

    private func openBag(_ bag: String, epoch: UInt32, privateKey: Curve25519.KeyAgreement.PrivateKey) -> SymmetricKey? {
        guard let bytes = Data(base64Encoded: bag), bytes.count > 32,
            var recipient = try? HPKE.Recipient(
                privateKey: privateKey,
                ciphersuite: Self.bagSuite,
                info: bagInfo(epoch),
                encapsulatedKey: bytes.prefix(32)
            ),
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
    /// "recovery_public_key": base64, "recovery_verify_key": base64, "owner_verify_key": base64,
    /// "owner_key": base64, "owner_seal_key": base64, "member_key": base64}` (the recovery verify
    /// key absent in a file made before key bags were signed; the sharing keys, `SharingKeys`,
    /// absent in one made before encrypted suites could be shared; the owner's private ones on the
    /// owner's devices only, the member key on a member's only).
    fileprivate struct File: Codable {
        var format: Int
        var suite: String
        var keyIDs: String
        var epochs: [String: String]
        var recoveryPublicKey: String
        var recoveryVerifyKey: String?
        var ownerVerifyKey: String?
        var ownerKey: String?
        var ownerSealKey: String?
        var memberKey: String?
        var pendingBag: StoredPendingBag?

        enum CodingKeys: String, CodingKey {
            case format, suite
            case keyIDs = "key_ids"
            case epochs
            case recoveryPublicKey = "recovery_public_key"
            case recoveryVerifyKey = "recovery_verify_key"
            case ownerVerifyKey = "owner_verify_key"
            case ownerKey = "owner_key"
            case ownerSealKey = "owner_seal_key"
            case memberKey = "member_key"
            case pendingBag = "pending_bag"
        }
    }

    /// `PendingKeyBag` in the key file: `{"epoch": N, "key": base64, "bag": {…}}`, and
    /// `"stored": true` once the server is known to hold the bag.
    fileprivate struct StoredPendingBag: Codable {
        var epoch: UInt32
        var key: String
        var bag: SignedKeyBag
        var stored: Bool?
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
        guard file.suite.isSameName(as: suite) else {
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
        var recoveryVerifyKey: Curve25519.Signing.PublicKey?
        if let text = file.recoveryVerifyKey {
            guard let key = Data(base64Encoded: text).flatMap({ try? Curve25519.Signing.PublicKey(rawRepresentation: $0) }) else {
                throw SyncError(.local, "\(source) is damaged: the recovery verify key is not one")
            }
            recoveryVerifyKey = key
        }
        self.init(
            suite: suite,
            names: SymmetricKey(data: names),
            epochs: epochs,
            recoveryPublicKey: recoveryPublicKey,
            recoveryVerifyKey: recoveryVerifyKey,
            sharing: try SharingKeys(file: file, source: source)
        )
        if let stored = file.pendingBag {
            guard stored.epoch > 1, let key = Data(base64Encoded: stored.key), key.count == 32 else {
                throw SyncError(.local, "\(source) is damaged: its pending key bag has no valid key")
            }
            pendingBag = PendingKeyBag(epoch: stored.epoch, key: SymmetricKey(data: key), bag: stored.bag, stored: stored.stored == true)
        }
    }

    /// The key file's bytes: JSON, keys in base64.
    func fileBytes() throws(SyncError) -> Data {
        func base64(_ key: SymmetricKey) -> String { key.withUnsafeBytes { Data($0).base64EncodedString() } }
        let file = File(
            format: Self.fileFormat,
            suite: suite,
            keyIDs: base64(names),
            epochs: Dictionary(uniqueKeysWithValues: epochs.map { (String($0.key), base64($0.value)) }),
            recoveryPublicKey: recoveryPublicKey.rawRepresentation.base64EncodedString(),
            recoveryVerifyKey: recoveryVerifyKey?.rawRepresentation.base64EncodedString(),
            ownerVerifyKey: sharing?.ownerVerify.rawRepresentation.base64EncodedString(),
            ownerKey: sharing?.owner?.rawRepresentation.base64EncodedString(),
            ownerSealKey: sharing?.ownerSeal.map(base64),
            memberKey: sharing?.member?.rawRepresentation.base64EncodedString(),
            pendingBag: pendingBag.map { StoredPendingBag(epoch: $0.epoch, key: base64($0.key), bag: $0.bag, stored: $0.stored ? true : nil) }
        )
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
/// suite's steady state pays a lookup, not an HMAC, per entry sealed or opened. Names are their
/// bytes (`ExactName`): `"caf\u{E9}"` and `"cafe\u{301}"` are two keys, with two ids.
final class KeyIDCache: Sendable {
    private let ids = Mutex<[ExactName: String]>([:])
    private static let capacity = 16_384

    subscript(key: String) -> String? {
        get { ids.withLock { $0[key.exact] } }
        set {
            ids.withLock { ids in
                if ids.count >= Self.capacity { ids.removeAll(keepingCapacity: true) }
                ids[key.exact] = newValue
            }
        }
    }
}

extension SharingKeys {
    /// The sharing keys a key file holds, nil when it holds none; `source` names the file in errors.
    fileprivate init?(file: SuiteKeys.File, source: String) throws(SyncError) {
        guard let verifyText = file.ownerVerifyKey else { return nil }
        func bytes(_ text: String?, _ what: String) throws(SyncError) -> Data? {
            guard let text else { return nil }
            guard let data = Data(base64Encoded: text), data.count == 32 else {
                throw SyncError(.local, "\(source) is damaged: the \(what) is not one")
            }
            return data
        }
        guard let verify = try bytes(verifyText, "owner verify key").flatMap({ try? Curve25519.Signing.PublicKey(rawRepresentation: $0) })
        else { throw SyncError(.local, "\(source) is damaged: the owner verify key is not one") }
        var owner: Curve25519.Signing.PrivateKey?
        if let raw = try bytes(file.ownerKey, "owner key") {
            guard let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw), key.publicKey.rawRepresentation == verify.rawRepresentation
            else { throw SyncError(.local, "\(source) is damaged: its owner key is not the one of its owner verify key") }
            owner = key
        }
        self.init(owner: owner, ownerSeal: try bytes(file.ownerSealKey, "owner seal key").map { SymmetricKey(data: $0) }, ownerVerify: verify)
        if let raw = try bytes(file.memberKey, "member key") {
            guard let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: raw) else {
                throw SyncError(.local, "\(source) is damaged: the member key is not one")
            }
            member = key
        }
    }
}

/// The key bag of a rotation this device began and did not finish (`SuiteKeys.pendingBag`).
struct PendingKeyBag: @unchecked Sendable {
    /// Its epoch.
    var epoch: UInt32
    /// The epoch's key it seals.
    var key: SymmetricKey
    /// The bag as signed and last sent (its members' part is made again when it is sent again).
    var bag: SignedKeyBag
    /// Whether the server is known to hold it: the key is the suite's, and entries are sealed
    /// under it (`SuiteKeys.sealingEpoch`).
    var stored = false
}
