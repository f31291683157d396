import Crypto
import Foundation
package import GroupDefaultsWire

/// One epoch's key bag as the server keeps it. Epoch 1's row is the suite's anchor: a verify key
/// and the recovery key's, no bag (the recovery key derives epoch 1's key).
package struct StoredKeyBag: Codable, Sendable, Hashable {
    /// The sealed key (base64); nil for epoch 1.
    package var bundle: String?
    /// The epoch's verify key (base64); nil for a bag an older version stored unsigned.
    package var verifyKey: String?
    /// The signature by the previous epoch's key or the recovery key (base64).
    package var signature: String?
    /// The recovery key's verify key (base64), on epoch 1's row only.
    package var recoveryVerifyKey: String?
    /// In a suite shared between accounts, the epoch's key for its accounts (opaque here: devices
    /// check the owner key's signature).
    package var shared: SharedKeyBag?
    /// The owner key's signature (opaque here: a device set up from the recovery key checks it).
    package var ownerSignature: String?

    package init(
        bundle: String?,
        verifyKey: String?,
        signature: String?,
        recoveryVerifyKey: String? = nil,
        shared: SharedKeyBag? = nil,
        ownerSignature: String? = nil
    ) {
        self.bundle = bundle
        self.verifyKey = verifyKey
        self.signature = signature
        self.recoveryVerifyKey = recoveryVerifyKey
        self.shared = shared
        self.ownerSignature = ownerSignature
    }

    /// How a backend stores it: JSON; a bag an older version stored is its bundle alone.
    package var storedText: String {
        guard verifyKey != nil || recoveryVerifyKey != nil else { return bundle ?? "" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: (try? encoder.encode(self)) ?? Data(), as: UTF8.self)
    }

    /// A stored row's text (`storedText`), or a bundle an older version stored.
    package init(storedText text: String) {
        if text.hasPrefix("{"), let bag = try? JSONDecoder().decode(StoredKeyBag.self, from: Data(text.utf8)) {
            self = bag
        } else {
            self.init(bundle: text, verifyKey: nil, signature: nil)
        }
    }

    enum CodingKeys: String, CodingKey {
        case bundle
        case verifyKey = "verify_key"
        case signature
        case recoveryVerifyKey = "recovery_verify_key"
        case shared
        case ownerSignature = "owner_signature"
    }
}

/// The rules of key bags, the same for every backend: which bag moves a suite to a new key epoch,
/// which anchor a suite takes, and what `GET …/key-bags` answers. Backends read the suite's epoch
/// and its stored bags, ask the rule, and write what it returns, in one transaction.
///
/// The server cannot open a bag; it checks who made it. A bag for epoch N + 1 must be signed by
/// epoch N's key or by the recovery key, as the anchor's verify keys say; the anchor is stored
/// once, by the suite's first device. A token alone therefore cannot move a suite to a key of its
/// choosing, nor spend its epochs.
package enum KeyBagRule {
    /// Takes `bag` for `epoch` of `suite`, at `suiteEpoch` (nil: no suite record): only for an
    /// encrypted suite, only for the next epoch, only once the suite is anchored, only signed.
    /// Returns the suite's new epoch and the row to store.
    package static func put(
        _ bag: SignedKeyBag,
        epoch: UInt32,
        suite: String,
        suiteEpoch: UInt32?,
        stored: [UInt32: StoredKeyBag]
    ) throws(SyncStorageError) -> (epoch: UInt32, row: StoredKeyBag) {
        guard let suiteEpoch, suiteEpoch > 0 else {
            throw SyncStorageError(.suiteNotEncrypted, "suite \(suite) holds no sealed entries: there is no key to rotate")
        }
        guard epoch > suiteEpoch else {
            throw SyncStorageError(
                .staleKeyEpoch,
                "suite \(suite) is at key epoch \(suiteEpoch) already: a key bag is stored once, for a newer epoch"
            )
        }
        guard epoch == suiteEpoch + 1 else {
            throw SyncStorageError(
                .staleKeyEpoch,
                "suite \(suite) is at key epoch \(suiteEpoch): a key bag is stored for the next epoch, \(suiteEpoch + 1), not \(epoch)"
            )
        }
        guard let anchor = stored[1] else {
            throw SyncStorageError(
                .keyAnchorMissing,
                "suite \(suite)'s keys are not anchored on the server: a device that holds them anchors them first (PUT …/key-bags)"
            )
        }
        let signers = [stored[suiteEpoch]?.verifyKey, anchor.recoveryVerifyKey].compactMap { $0 }
        try check(bag, epoch: epoch, suite: suite, signers: signers)
        return (
            epoch,
            StoredKeyBag(
                bundle: bag.bundle,
                verifyKey: bag.verifyKey,
                signature: bag.signature,
                shared: bag.shared,
                ownerSignature: bag.ownerSignature
            )
        )
    }

    /// Takes `anchor` for `suite`, at `suiteEpoch` (0: not encrypted, or no suite record), `written`
    /// or not since it was made or `reset` with its keys. Returns the rows to store (none when this
    /// anchor is stored already: a device anchors at every join), and the suite's new epoch when
    /// the anchor sets it.
    ///
    /// Only an encrypted suite is anchored: one whose first push was sealed (its first device
    /// anchors it right after), or one its operator reset with its keys (`suites reset --keys`),
    /// which takes the epoch of the first device back, whose keys may be of a later epoch than 1.
    /// A suite nothing was written to takes none, so that no token can claim a name in advance.
    package static func anchor(
        _ anchor: KeyAnchor,
        suite: String,
        suiteEpoch: UInt32,
        written: Bool,
        reset: Bool,
        stored: [UInt32: StoredKeyBag]
    ) throws(SyncStorageError) -> (rows: [UInt32: StoredKeyBag], epoch: UInt32?) {
        guard let first = anchor.bags["1"] else { throw SyncStorageError(.malformed, "an anchor starts at epoch 1") }
        if let existing = stored[1], existing.verifyKey != nil {
            let sameRecovery = anchor.recoveryVerifyKey == nil || anchor.recoveryVerifyKey == existing.recoveryVerifyKey
            guard existing.verifyKey == first.verifyKey, sameRecovery else {
                throw SyncStorageError(
                    .keyAnchorMismatch,
                    "suite \(suite)'s keys were anchored by a device with other keys (another recovery key): this device's keys are not the suite's"
                )
            }
            return ([:], nil)
        }
        guard !written || suiteEpoch > 0 else {
            throw SyncStorageError(.suiteNotEncrypted, "suite \(suite) holds plain entries: a suite is encrypted for every device or for none")
        }
        guard written || reset else {
            throw SyncStorageError(.suiteNotEncrypted, "suite \(suite) holds no sealed entries yet: its first device anchors it after its first push")
        }
        let epochs = anchor.bags.keys.compactMap { UInt32($0) }.sorted()
        guard epochs.count == anchor.bags.count, epochs == Array(1...UInt32(epochs.count)) else {
            throw SyncStorageError(.malformed, "an anchor holds the bags of epochs 1, 2, … in a row, by decimal epoch")
        }
        let takesEpoch = !written && suiteEpoch == 0 && reset
        let current = takesEpoch ? UInt32(epochs.count) : max(suiteEpoch, 1)
        guard epochs.last == current else {
            throw SyncStorageError(
                .staleKeyEpoch,
                "suite \(suite) is at key epoch \(current): an anchor holds epochs 1 to \(current), not 1 to \(epochs.last ?? 0)"
            )
        }
        guard first.bundle == nil, first.signature == nil, publicKey(first.verifyKey) != nil else {
            throw SyncStorageError(.malformed, "epoch 1 of an anchor is a verify key alone (32 bytes, base64)")
        }
        if let recovery = anchor.recoveryVerifyKey, publicKey(recovery) == nil {
            throw SyncStorageError(.malformed, "recovery_verify_key is not a verify key (32 bytes, base64)")
        }
        var rows: [UInt32: StoredKeyBag] = [
            1: StoredKeyBag(
                bundle: nil,
                verifyKey: first.verifyKey,
                signature: nil,
                recoveryVerifyKey: anchor.recoveryVerifyKey
            )
        ]
        for epoch in epochs.dropFirst() {
            let bag = anchor.bags[String(epoch)]!
            if let held = stored[epoch], held.bundle != bag.bundle {
                throw SyncStorageError(
                    .keyAnchorMismatch,
                    "the anchor's bag of epoch \(epoch) is not the one the server holds: an anchor signs the stored bags"
                )
            }
            let signers = [anchor.bags[String(epoch - 1)]?.verifyKey, anchor.recoveryVerifyKey].compactMap { $0 }
            try check(bag, epoch: epoch, suite: suite, signers: signers)
            rows[epoch] = StoredKeyBag(
                bundle: bag.bundle,
                verifyKey: bag.verifyKey,
                signature: bag.signature,
                shared: stored[epoch]?.shared ?? bag.shared,
                ownerSignature: bag.ownerSignature ?? stored[epoch]?.ownerSignature
            )
        }
        return (rows, takesEpoch ? current : nil)
    }

    /// What `GET …/key-bags` answers for the stored rows: every bag from epoch 2 with its signature,
    /// and the anchor's epoch 1 and recovery verify key.
    package static func answer(_ stored: [UInt32: StoredKeyBag]) -> KeyBags {
        var epochs: [String: String] = [:]
        var signatures: [String: String] = [:]
        var shared: [String: SharedKeyBag] = [:]
        var ownerSignatures: [String: String] = [:]
        for (epoch, row) in stored where epoch >= 2 {
            epochs[String(epoch)] = row.bundle
            signatures[String(epoch)] = row.signature
            shared[String(epoch)] = row.shared
            ownerSignatures[String(epoch)] = row.ownerSignature
        }
        let anchor = stored[1].flatMap { row in
            row.verifyKey.map {
                KeyAnchor(recoveryVerifyKey: row.recoveryVerifyKey, bags: ["1": SignedKeyBag(bundle: nil, verifyKey: $0, signature: nil)])
            }
        }
        return KeyBags(epochs: epochs, signatures: signatures, anchor: anchor, shared: shared, ownerSignatures: ownerSignatures)
    }

    /// Checks that `bag` is a bag of `epoch` signed by one of `signers` (verify keys, base64).
    private static func check(_ bag: SignedKeyBag, epoch: UInt32, suite: String, signers: [String]) throws(SyncStorageError) {
        guard let text = bag.bundle, let bundle = Data(base64Encoded: text), bundle.count > 32 else {
            throw SyncStorageError(.malformed, "the bag of epoch \(epoch) must be base64 of the encapsulated key and the sealed key")
        }
        guard let verifyKey = Data(base64Encoded: bag.verifyKey), publicKey(bag.verifyKey) != nil else {
            throw SyncStorageError(.malformed, "the verify key of epoch \(epoch) is not a verify key (32 bytes, base64)")
        }
        guard let signature = bag.signature.flatMap({ Data(base64Encoded: $0) }) else {
            throw SyncStorageError(.keyBagUnsigned, "the key bag of epoch \(epoch) is not signed")
        }
        let message = KeyBagSignature.message(suite: suite, epoch: epoch, verifyKey: verifyKey, bundle: bundle)
        guard signers.contains(where: { publicKey($0)?.isValidSignature(signature, for: message) == true }) else {
            throw SyncStorageError(
                .keyBagUnsigned,
                "the key bag of epoch \(epoch) is not signed by the key of epoch \(epoch - 1) or by the recovery key of suite \(suite)"
            )
        }
    }

    private static func publicKey(_ text: String) -> Curve25519.Signing.PublicKey? {
        Data(base64Encoded: text).flatMap { try? Curve25519.Signing.PublicKey(rawRepresentation: $0) }
    }
}
