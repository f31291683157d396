import Foundation

// The pairing relay (`/v1/pairings`): how a device that holds an encrypted suite's keys hands them
// to a new device through the server, which relays what it cannot read. The device with the keys
// chooses a one-time code and registers the pairing under an id derived from it; the new device,
// knowing the code, claims the pairing with its public key (and a proof that it knows the code) and
// receives its own token; the first device seals the keys to that public key; the new device
// fetches them. The code never reaches the server, nor does any key.

/// `POST /v1/pairings`: a pairing for `suite`, under the id its code derives (`pairing_id`, 32 hex
/// digits). The token must cover the suite; the new device's token gets the suite only, read-only
/// if this token is.
public struct PairingRequest: Codable, Sendable, Hashable {
    /// The suite whose keys are handed over.
    public var suite: String
    /// The id derived from the pairing code (lowercase hex).
    public var pairingID: String

    /// A pairing of `suite` under `pairingID`.
    public init(suite: String, pairingID: String) {
        self.suite = suite
        self.pairingID = pairingID
    }

    enum CodingKeys: String, CodingKey {
        case suite
        case pairingID = "pairing_id"
    }
}

/// `POST /v1/pairings/{pairing_id}/claim`, sent without a token by the new device: its public key
/// (HPKE, X25519, base64) and a proof that it knows the code (HMAC-SHA256 of the key, base64).
public struct PairingClaim: Codable, Sendable, Hashable {
    /// The new device's public key, raw, in base64.
    public var publicKey: String
    /// HMAC-SHA256 of the raw public key under a key derived from the code, in base64.
    public var proof: String
    /// The name the new device's token is bound to, as `token create --device NAME` binds one
    /// (`device_name`); nil for an unbound token.
    public var deviceName: String?

    /// A claim with `publicKey` and its `proof`, for a device called `deviceName`.
    public init(publicKey: String, proof: String, deviceName: String? = nil) {
        self.publicKey = publicKey
        self.proof = proof
        self.deviceName = deviceName
    }

    enum CodingKeys: String, CodingKey {
        case publicKey = "public_key"
        case proof
        case deviceName = "device_name"
    }
}

/// The answer to a claim: the new device's own token, shown this once, and the suite.
public struct PairingClaimed: Codable, Sendable, Hashable {
    /// A bearer token for the new device (the server keeps only its hash).
    public var token: String
    /// The suite it covers.
    public var suite: String
    /// When the pairing expires, as typed JSON writes dates.
    public var expires: String

    /// The answer to a claim.
    public init(token: String, suite: String, expires: String) {
        self.token = token
        self.suite = suite
        self.expires = expires
    }
}

/// `PUT /v1/pairings/{pairing_id}/keys`: the suite's keys sealed to the claimed public key (HPKE,
/// base64: the encapsulated key, then the ciphertext).
public struct PairingKeys: Codable, Sendable, Hashable {
    /// The sealed keys.
    public var bundle: String

    /// Keys sealed as `bundle`.
    public init(bundle: String) { self.bundle = bundle }
}

/// `GET /v1/pairings/{pairing_id}`: where a pairing stands, for its two devices.
public struct PairingState: Codable, Sendable, Hashable {
    /// `waiting` (for a claim), `claimed` (waiting for the keys), `completed` (the keys are there).
    public enum State: String, Codable, Sendable {
        /// Not claimed yet.
        case waiting
        /// Claimed; the keys are not there yet.
        case claimed
        /// The sealed keys are there.
        case completed
    }

    /// Where the pairing stands.
    public var state: State
    /// The suite.
    public var suite: String
    /// When it expires, as typed JSON writes dates.
    public var expires: String
    /// The claim, once claimed.
    public var claim: PairingClaim?
    /// The sealed keys, once completed.
    public var bundle: String?

    /// A pairing's state.
    public init(state: State, suite: String, expires: String, claim: PairingClaim?, bundle: String?) {
        self.state = state
        self.suite = suite
        self.expires = expires
        self.claim = claim
        self.bundle = bundle
    }
}
