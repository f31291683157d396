import Crypto
import Foundation
import GroupDefaultsWire

/// What a claiming device keeps on disk while a pairing is under way (`DevicePairing.accept`), so
/// that a run interrupted after its claim (a Ctrl-C while it waits, a crash, the network gone)
/// finishes when the same command runs again with the same code: the key pair the claim was made
/// with, the token the claim got, and the sealed keys once they are here. A claim cannot be made
/// twice, so without this file an interrupted claim would use the code up for nothing.
///
/// Kept beside the token file (`TOKENFILE.pairing`, mode 0600, as secret as the token), written
/// before the claim is sent, and removed once the suite records its settings, when the claim gets
/// no answer (sent again with the same key, a claim is refused as used: the file would keep
/// nothing), or when the pairing turns out to be over (expired, cancelled, used by another claim).
struct PairingProgress: Codable, Sendable {
    /// The pairing it is for (derived from the code).
    var pairingID: String
    /// The raw X25519 private key the claim was made with.
    var privateKey: Data
    /// The token the claim got, once its answer arrived.
    var token: String?
    /// The keys the other device handed over, still sealed, once they arrived.
    var bundle: Data?

    enum CodingKeys: String, CodingKey {
        case pairingID = "pairing_id"
        case privateKey = "private_key"
        case token, bundle
    }

    /// A new record for the pairing `pairingID`, with a new key pair.
    init(pairingID: String) {
        self.pairingID = pairingID
        privateKey = Curve25519.KeyAgreement.PrivateKey().rawRepresentation
    }

    /// The file that keeps the progress of a pairing whose token goes to `tokenFile`.
    static func path(beside tokenFile: String) -> String { tokenFile + ".pairing" }

    /// The record in `path`; nil when there is none.
    static func read(from path: String) throws(SyncError) -> PairingProgress? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        try PrivateFile.check(path, what: "pairing progress file", missing: .local)
        do {
            return try JSONDecoder().decode(PairingProgress.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw SyncError(.local, "the pairing progress file \(path) is damaged: remove it and pair again with a new code")
        }
    }

    /// Writes the record to `path` (mode 0600, atomically).
    func write(to path: String) throws(SyncError) {
        let bytes: Data
        do { bytes = try JSONEncoder().encode(self) } catch { throw SyncError(.local, "cannot encode the pairing's progress: \(error)") }
        try PrivateFile.write(bytes, to: path, what: "pairing progress file")
    }

    /// Removes the record at `path`, if any.
    static func remove(at path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The key pair the claim was made with.
    func key() throws(SyncError) -> Curve25519.KeyAgreement.PrivateKey {
        do { return try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKey) } catch {
            throw SyncError(.local, "the pairing progress file holds no valid key: remove it and pair again with a new code")
        }
    }
}
