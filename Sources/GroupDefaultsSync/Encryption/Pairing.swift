import Crypto
import Foundation
import GroupDefaultsWire

/// A one-time pairing code: 128 random bits, written as a recovery key is (`ReadableSecret`), valid
/// 10 minutes for one device. Everything a pairing needs derives from it (HKDF-SHA256): the pairing
/// id the server files it under, the key of the new device's proof, and the pre-shared key of the
/// HPKE seal; so the server, which never sees the code, can neither claim the pairing nor put its
/// own key in place of the new device's.
public struct PairingCode: Sendable, Equatable, CustomStringConvertible {
    let readable: ReadableSecret

    /// A new random code.
    public init() { readable = ReadableSecret() }

    /// Reads a code as a person typed it: spaces and hyphens ignored, any case.
    ///
    /// - Throws: `SyncError` (`local`): the wrong length, a foreign character, or a typo.
    public init(parsing text: String) throws(SyncError) { readable = try ReadableSecret(parsing: text, what: "pairing code") }

    /// The code as it is shown: seven groups of four characters.
    public var description: String { readable.description }

    private func derive(_ purpose: String, bytes: Int = 32) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: readable.bytes),
            salt: Data("GroupDefaults pairing v1".utf8),
            info: Data(purpose.utf8),
            outputByteCount: bytes
        )
    }

    /// The id the server files the pairing under (32 hex digits).
    public var pairingID: String { derive("pairing id", bytes: 16).withUnsafeBytes { Hex.string($0) } }

    /// The new device's proof that it knows the code: HMAC-SHA256 of its public key.
    func proof(of publicKey: Data) -> Data {
        Data(HMAC<SHA256>.authenticationCode(for: publicKey, using: derive("claim proof")))
    }

    /// Whether `proof` is the proof of `publicKey`, compared in constant time.
    func verifies(_ proof: Data, of publicKey: Data) -> Bool {
        HMAC<SHA256>.isValidAuthenticationCode(proof, authenticating: publicKey, using: derive("claim proof"))
    }

    /// The pre-shared key of the HPKE seal (mode psk): only a holder of the code can seal what the
    /// new device opens.
    var presharedKey: SymmetricKey { derive("hpke psk") }
}

/// Hands an encrypted suite's keys to a new device through the server (`/v1/pairings`), which
/// relays what it cannot read: `offer` on a device that has the keys, `accept` on the new one.
///
/// The keys travel sealed with HPKE (RFC 9180: X25519, HKDF-SHA256, ChaCha20-Poly1305; mode psk,
/// the pre-shared key derived from the code) to a key pair the new device makes for this pairing
/// alone; the device that offers checks, before sealing, that the public key comes with a proof
/// made from the code.
public enum DevicePairing {
    /// How often each side looks whether the other has done its part.
    public static let pollInterval: Duration = .milliseconds(250)
    static var ciphersuite: HPKE.Ciphersuite { .Curve25519_SHA256_ChachaPoly }
    static let presharedKeyID = Data("GroupDefaults pairing".utf8)

    static func info(suite: String, pairingID: String) -> Data { Data("GroupDefaults pairing v1\0\(suite)\0\(pairingID)".utf8) }

    /// Offers `keys` under a new code: registers the pairing, calls `announce` with the code and when
    /// it expires, waits until a device claims it, checks its proof, and hands it the keys sealed.
    ///
    /// - Throws: `SyncError`: the code expired unclaimed (`pairingExpired`), a claim without a valid
    ///   proof (the keys are not handed over), or what a request can throw.
    public static func offer(
        keys: SuiteKeys,
        client: SyncClient,
        code: PairingCode = PairingCode(),
        announce: (PairingCode, String) -> Void
    ) async throws(SyncError) {
        let id = code.pairingID
        let created = try await client.createPairing(pairingID: id)
        announce(code, created.expires)
        InterruptionPoint.reached("pair.created")
        var state = created
        while state.state == .waiting {
            do { try await Task.sleep(for: pollInterval) } catch { throw SyncError(.local, "cancelled") }
            do {
                state = try await client.pairing(pairingID: id)
            } catch  where error.code == .pairingNotFound {
                throw SyncError(.rejected, code: .pairingExpired, "the pairing code expired unclaimed: make a new one")
            }
            if state.state == .waiting, let expires = TypedJSONDate.parse(state.expires), expires <= Date() {
                throw SyncError(.rejected, code: .pairingExpired, "the pairing code expired unclaimed: make a new one")
            }
        }
        guard let claim = state.claim, let publicKey = Data(base64Encoded: claim.publicKey), let proof = Data(base64Encoded: claim.proof)
        else { throw SyncError(.protocolError, "the pairing was claimed without a public key") }
        guard code.verifies(proof, of: publicKey) else {
            // Cancelled at once: the claim's token, which works for nothing until the keys are
            // handed over, is revoked.
            let cancelled = (try? await client.cancelPairing(pairingID: id)) != nil
            throw SyncError(
                .local,
                """
                the pairing was claimed by someone who does not know the code (the server may be tampering): the keys were not handed over\
                \(cancelled ? " and the pairing was cancelled" : "")
                """
            )
        }
        InterruptionPoint.reached("pair.claimed")
        let bundle: Data
        do {
            let recipient = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: publicKey)
            var sender = try HPKE.Sender(
                recipientKey: recipient,
                ciphersuite: ciphersuite,
                info: info(suite: keys.suite, pairingID: id),
                presharedKey: code.presharedKey,
                presharedKeyIdentifier: presharedKeyID
            )
            bundle = sender.encapsulatedKey + (try sender.seal(try keys.fileBytes()))
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.local, "cannot seal the keys for the new device: \(error)")
        }
        _ = try await client.completePairing(pairingID: id, bundle: bundle.base64EncodedString())
        InterruptionPoint.reached("pair.handed-over")
    }

    /// The pairing's state as the claiming device reads it (without a token), or nil after a
    /// transient failure, to be tried again.
    private static func pollState(_ client: SyncClient, pairingID: String) async throws(SyncError) -> PairingState? {
        do {
            return try await client.pairing(pairingID: pairingID, authorized: false)
        } catch {
            if error.isTransient { return nil }
            throw error
        }
    }

    /// What a code the server does not know means: never made (a typo the check characters
    /// missed), or a pairing that ended (cancelled by the device that made it, at its Ctrl-C or at
    /// its next `pair` after a crash; expired and purged).
    static let pairingNotFoundWords =
        "no pairing has this code: check it; if it is right, the pairing has ended (cancelled by the device that made it, which stopped or made a new code since, or expired): make a new code there"

    /// The claim; a refusal of the code in the server's words alone (it says what to do).
    private static func claim(id: String, _ claim: PairingClaim, client: SyncClient) async throws(SyncError) -> PairingClaimed {
        do {
            return try await client.claimPairing(pairingID: id, claim)
        } catch {
            guard let code = error.code, [SyncErrorCode.pairingNotFound, .pairingUsed, .pairingExpired].contains(code) else { throw error }
            throw SyncError(.local, code: code, code == .pairingNotFound ? pairingNotFoundWords : error.detail, status: error.status)
        }
    }

    /// Claims the pairing of `code` with a key pair made for it, waits for the keys and opens them;
    /// returns them with the token the server made for this device (to be written by the caller,
    /// with the keys: nothing is written before both are here).
    ///
    /// With `progressFile`, the key pair, the claim's token and the sealed keys are kept there
    /// (`PairingProgress`) as they come, so that a run interrupted after the claim finishes when it
    /// runs again with the same code; the caller removes the file once it has written the token and
    /// the keys. It is removed here when the pairing turns out to be over.
    ///
    /// - Parameters:
    ///   - code: The pairing code the pairing device shows.
    ///   - client: A client of the suite's server; its token is not used for the claim.
    ///   - deviceName: The name the new token is bound to (as `token create --device`); nil for none.
    ///   - progressFile: Where the pairing's progress is kept; nil keeps nothing.
    /// - Throws: `SyncError`: `pairingNotFound` (a wrong code: it reveals nothing), `pairingUsed`,
    ///   `pairingExpired`, keys that do not open (not sealed by a holder of the code).
    public static func accept(
        code: PairingCode,
        client: SyncClient,
        deviceName: String? = nil,
        progressFile: String? = nil
    ) async throws -> (token: String, keys: SuiteKeys) {
        let id = code.pairingID
        var progress = PairingProgress(pairingID: id)
        if let progressFile, let kept = try PairingProgress.read(from: progressFile), kept.pairingID == id { progress = kept }
        let save = { (progress: PairingProgress) throws(SyncError) in if let progressFile { try progress.write(to: progressFile) } }
        do {
            let privateKey = try progress.key()
            let token: String
            if let kept = progress.token {
                token = kept
            } else {
                // Kept before the claim is sent: a claim answered but not read is made again with the
                // same key, which the server refuses as used (the code is spent either way).
                try save(progress)
                let publicKey = privateKey.publicKey.rawRepresentation
                let claim = PairingClaim(
                    publicKey: publicKey.base64EncodedString(),
                    proof: code.proof(of: publicKey).base64EncodedString(),
                    deviceName: deviceName
                )
                let claimed: PairingClaimed
                do {
                    claimed = try await Self.claim(id: id, claim, client: client)
                } catch {
                    // A claim without its answer kept nothing worth keeping (sent again with this key
                    // it is refused as used): the file goes, so that a refused command leaves none.
                    if let progressFile { PairingProgress.remove(at: progressFile) }
                    throw error
                }
                guard claimed.suite.isSameName(as: client.suite) else {
                    throw SyncError(.local, "this pairing code is for the suite \(claimed.suite), not \(client.suite)")
                }
                token = claimed.token
                progress.token = token
                try save(progress)
                InterruptionPoint.reached("configure-pairing.claimed")
            }
            let bundle: Data
            if let kept = progress.bundle {
                bundle = kept
            } else {
                bundle = try await sealedKeys(id: id, client: client)
                progress.bundle = bundle
                try save(progress)
                InterruptionPoint.reached("configure-pairing.keys-received")
            }
            return (token, try open(bundle, privateKey: privateKey, code: code, suite: client.suite))
        } catch let error as SyncError where error.code.map([SyncErrorCode.pairingNotFound, .pairingUsed, .pairingExpired].contains) == true {
            // Over: nothing to finish by running again.
            if let progressFile { PairingProgress.remove(at: progressFile) }
            if error.code == .pairingNotFound, error.detail != pairingNotFoundWords {
                throw SyncError(
                    .local,
                    code: .pairingNotFound,
                    "the pairing was cancelled before its keys came (the device that made the code stopped, or made a new code since): make a new code there and use it here"
                )
            }
            throw error
        }
    }

    /// Waits for the keys of the claimed pairing `id`, read without a token (the new token works
    /// only once the keys are handed over). A transient failure (a 429, the network) is tried again
    /// until the pairing expires: the claim is made, and the code cannot be used again.
    private static func sealedKeys(id: String, client: SyncClient) async throws -> Data {
        var state = try await client.pairing(pairingID: id, authorized: false)
        while state.bundle == nil {
            if let expires = TypedJSONDate.parse(state.expires), expires <= Date() {
                throw SyncError(
                    .rejected,
                    code: .pairingExpired,
                    "the pairing expired, or the other device cancelled it, before it handed over the keys"
                )
            }
            try await Task.sleep(for: pollInterval)
            if let next = try await pollState(client, pairingID: id) { state = next }
        }
        guard let bundle = state.bundle.flatMap({ Data(base64Encoded: $0) }), bundle.count > 32 else {
            throw SyncError(.protocolError, "the pairing's keys are not what the API describes")
        }
        return bundle
    }

    /// Opens the keys sealed to `privateKey` under `code`.
    private static func open(_ bundle: Data, privateKey: Curve25519.KeyAgreement.PrivateKey, code: PairingCode, suite: String) throws -> SuiteKeys {
        let opened: Data
        do {
            var recipient = try HPKE.Recipient(
                privateKey: privateKey,
                ciphersuite: ciphersuite,
                info: info(suite: suite, pairingID: code.pairingID),
                encapsulatedKey: bundle.prefix(32),
                presharedKey: code.presharedKey,
                presharedKeyIdentifier: presharedKeyID
            )
            opened = try recipient.open(bundle.dropFirst(32))
        } catch {
            throw SyncError(.local, "the keys the server relayed do not open: they were not sealed by the device that made the code")
        }
        return try SuiteKeys(fileBytes: opened, suite: suite, source: "the keys the other device sent")
    }
}
