import Foundation

// Key bags (`/v1/suites/{suite}/key-bags`): each key epoch's key of an end-to-end encrypted suite,
// sealed to the suite's recovery key, so that the recovery key opens every epoch a rotation made.
// The server cannot open them, and it takes one only if it is signed (Ed25519) by the key of the
// epoch before or by the recovery key: a token alone cannot move a suite to a key of its choosing.
// What the server checks the signatures against is the suite's anchor: each epoch's verify key and
// the recovery key's, stored by the suite's first device after its first push (`PUT …/key-bags`). Devices check every
// signature again when they open the bags, from keys they derive themselves, so that a server
// cannot plant a bag either.

/// One epoch's key bag with what authenticates it.
public struct SignedKeyBag: Codable, Sendable, Hashable {
    /// The epoch's key sealed to the recovery key (HPKE, base64: the encapsulated key, then the
    /// sealed key); nil for epoch 1, whose key the recovery key derives.
    public var bundle: String?
    /// The public half of the epoch's signing key, which its key derives (Ed25519, base64).
    public var verifyKey: String
    /// The signature of `KeyBagSignature.message` by the previous epoch's signing key or the
    /// recovery key's (Ed25519, base64); nil for epoch 1.
    public var signature: String?
    /// In a suite shared between accounts, the epoch's key for the suite's accounts (`SharedKeyBag`).
    public var shared: SharedKeyBag?
    /// The signature of `KeyBagSignature.message` by the suite's owner key (Ed25519, base64), which
    /// only the owner's devices and the recovery key hold: a device set up from the recovery key
    /// takes a bag only with it or the recovery key's, since a member holds the epochs' keys too.
    /// Absent in a bag made by a device whose key file has no owner key.
    public var ownerSignature: String?

    /// A key bag: `bundle` with `verifyKey`, signed as `signature` (and `ownerSignature`), with
    /// `shared` for a shared suite.
    public init(bundle: String?, verifyKey: String, signature: String?, shared: SharedKeyBag? = nil, ownerSignature: String? = nil) {
        self.bundle = bundle
        self.verifyKey = verifyKey
        self.signature = signature
        self.shared = shared
        self.ownerSignature = ownerSignature
    }

    enum CodingKeys: String, CodingKey {
        case bundle
        case verifyKey = "verify_key"
        case signature, shared
        case ownerSignature = "owner_signature"
    }
}

/// The part of a key bag that hands an epoch's key to the devices of a suite shared between
/// accounts, so that they take the new epoch without pairing: the key sealed once for the owner's
/// devices (under the owner seal key) and once to each member account's member key (HPKE), the
/// whole signed by the suite's owner key. The accounts it is sealed to are the suite's accounts at
/// that epoch: a removed member's is not among them. The server cannot open or forge it.
public struct SharedKeyBag: Codable, Sendable, Hashable {
    /// The key sealed for the owner's devices (ChaCha20-Poly1305, base64: nonce, ciphertext, tag).
    public var owner: String
    /// The key sealed to each member account's key, one copy per account (HPKE base mode, base64:
    /// the encapsulated key, then the sealed key). Accounts are compared by their bytes: two whose
    /// names are canonically equivalent (`Kim` and KELVIN SIGN `\u{212A}im`) are two accounts. On
    /// the wire, a JSON object keyed by account (what every version reads), unless two accounts are
    /// one Swift string, which a JSON decoder would merge: then a list of `{account, sealed}`.
    public var members: [SealedCopy]
    /// The owner key's signature (Ed25519, base64) of the suite, the epoch and every sealed copy
    /// with whom it is for.
    public var signature: String

    /// The epoch's key sealed to one member account's key.
    public struct SealedCopy: Codable, Sendable, Hashable {
        /// The member account, exactly as the server names it.
        public var account: String
        /// The encapsulated key, then the sealed key, base64.
        public var sealed: String

        /// The copy sealed for `account`.
        public init(account: String, sealed: String) {
            self.account = account
            self.sealed = sealed
        }
    }

    /// A shared bag as described.
    public init(owner: String, members: [SealedCopy], signature: String) {
        self.owner = owner
        self.members = members
        self.signature = signature
    }

    /// The accounts the key is sealed to.
    public var accounts: [String] { members.map(\.account) }

    enum CodingKeys: String, CodingKey {
        case owner, members, signature
    }

    /// Encodes the bag, its members as an object by account, or as a list when two accounts are
    /// one Swift string (see `members`).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(owner, forKey: .owner)
        try container.encode(signature, forKey: .signature)
        let byAccount = Dictionary(members.map { ($0.account, $0.sealed) }, uniquingKeysWith: { first, _ in first })
        if byAccount.count == members.count {
            try container.encode(byAccount, forKey: .members)
        } else {
            try container.encode(members, forKey: .members)
        }
    }

    /// Decodes a bag, its members as an object keyed by account or as a list of copies.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        owner = try container.decode(String.self, forKey: .owner)
        signature = try container.decode(String.self, forKey: .signature)
        if let copies = try? container.decode([SealedCopy].self, forKey: .members) {
            members = copies
        } else {
            members = try container.decode([String: String].self, forKey: .members).map { SealedCopy(account: $0.key, sealed: $0.value) }
        }
    }
}

/// `PUT /v1/suites/{suite}/key-bags`: the suite's anchor, stored once by its first device after its
/// first sealed push (or, for a suite whose bags an older version stored unsigned, by the first
/// device that signs them): every epoch from 1 to the suite's current one, each later epoch signed
/// by the one before (or by the recovery key). Storing the same anchor again changes nothing;
/// another one is refused.
public struct KeyAnchor: Codable, Sendable, Hashable {
    /// The public half of the recovery key's signing key (Ed25519, base64); absent when the device
    /// that anchored the suite did not know it (a key file made before signed key bags).
    public var recoveryVerifyKey: String?
    /// The key bags by epoch (a decimal string), from `"1"` (a verify key alone) up.
    public var bags: [String: SignedKeyBag]

    /// An anchor of `bags`, with the recovery key's verify key if known.
    public init(recoveryVerifyKey: String?, bags: [String: SignedKeyBag]) {
        self.recoveryVerifyKey = recoveryVerifyKey
        self.bags = bags
    }

    enum CodingKeys: String, CodingKey {
        case recoveryVerifyKey = "recovery_verify_key"
        case bags
    }
}

/// `GET /v1/suites/{suite}/key-bags`: the suite's key bags and its anchor.
public struct KeyBags: Codable, Sendable, Hashable {
    /// Sealed epoch keys by epoch (a decimal string), from epoch 2 up.
    public var epochs: [String: String]
    /// Each bag's signature by epoch, where it has one (a bag an older version stored has none until
    /// a device anchors the suite).
    public var signatures: [String: String]
    /// The anchor: each epoch's verify key and the recovery key's; nil until a device stored it.
    public var anchor: KeyAnchor?
    /// The shared part of each bag that has one (`SharedKeyBag`), by epoch.
    public var shared: [String: SharedKeyBag]
    /// Each bag's owner-key signature (`SignedKeyBag.ownerSignature`), by epoch, where it has one.
    public var ownerSignatures: [String: String]
    /// For the owner's devices of a shared suite: a rotation due since a member that held the keys
    /// was removed (`rotation_due`); nil when none is.
    public var rotationDue: KeyRotationDue?

    /// Key bags of `epochs`, signed as `signatures`, under `anchor`, with the `shared` parts.
    public init(
        epochs: [String: String],
        signatures: [String: String] = [:],
        anchor: KeyAnchor? = nil,
        shared: [String: SharedKeyBag] = [:],
        ownerSignatures: [String: String] = [:]
    ) {
        self.epochs = epochs
        self.signatures = signatures
        self.anchor = anchor
        self.shared = shared
        self.ownerSignatures = ownerSignatures
    }

    enum CodingKeys: String, CodingKey {
        case epochs, signatures, anchor, shared
        case ownerSignatures = "owner_signatures"
        case rotationDue = "rotation_due"
    }

    /// The newest epoch the server holds a key bag for (0 if none).
    public var newestEpoch: UInt32 { epochs.keys.compactMap { UInt32($0) }.max() ?? 0 }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        epochs = try container.decode([String: String].self, forKey: .epochs)
        signatures = try container.decodeIfPresent([String: String].self, forKey: .signatures) ?? [:]
        anchor = try container.decodeIfPresent(KeyAnchor.self, forKey: .anchor)
        shared = try container.decodeIfPresent([String: SharedKeyBag].self, forKey: .shared) ?? [:]
        ownerSignatures = try container.decodeIfPresent([String: String].self, forKey: .ownerSignatures) ?? [:]
        rotationDue = try container.decodeIfPresent(KeyRotationDue.self, forKey: .rotationDue)
    }
}

/// What a key bag's signature covers: a fixed label, the suite, the epoch, the epoch's verify key
/// and the bag's bytes, so that a signature is good for this bag of this epoch of this suite only,
/// and a bag that opens to another key than the signer's fails (its verify key differs).
public enum KeyBagSignature {
    /// The bytes signed for `epoch`'s bag of `suite`.
    public static func message(suite: String, epoch: UInt32, verifyKey: some Collection<UInt8>, bundle: some Collection<UInt8>) -> [UInt8] {
        Array("GroupDefaults key bag v1\0\(suite)\0\(epoch)\0".utf8) + Array(verifyKey) + Array(bundle)
    }
}
