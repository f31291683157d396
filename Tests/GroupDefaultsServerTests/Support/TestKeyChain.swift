import Crypto
import Foundation
import GroupDefaultsWire

/// The signing keys of one suite's key epochs and of its recovery key, made up as a device would
/// hold them, for tests of the key-bag rules: anchors and bags signed by whichever key a test says.
struct TestKeyChain {
    let suite: String
    let recovery = Curve25519.Signing.PrivateKey()
    var epochs: [UInt32: Curve25519.Signing.PrivateKey] = [1: Curve25519.Signing.PrivateKey()]

    init(suite: String) { self.suite = suite }

    static func base64(_ key: Curve25519.Signing.PrivateKey) -> String { key.publicKey.rawRepresentation.base64EncodedString() }

    /// A bag for `epoch` (a new key for it, unless `bundle` reuses a stored one's bytes), signed by
    /// `signer` (default: the previous epoch's key); nil signs nothing.
    mutating func bag(_ epoch: UInt32, bundle: String? = nil, signer: Curve25519.Signing.PrivateKey?? = .none) -> SignedKeyBag {
        let key = epochs[epoch] ?? Curve25519.Signing.PrivateKey()
        epochs[epoch] = key
        let bundle = bundle ?? Data((0..<48).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        let signing: Curve25519.Signing.PrivateKey? =
            switch signer {
            case .none: epochs[epoch - 1]
            case .some(let chosen): chosen
            }
        let message = KeyBagSignature.message(
            suite: suite,
            epoch: epoch,
            verifyKey: key.publicKey.rawRepresentation,
            bundle: Data(base64Encoded: bundle)!
        )
        return SignedKeyBag(
            bundle: bundle,
            verifyKey: Self.base64(key),
            signature: try! signing?.signature(for: message).base64EncodedString()
        )
    }

    /// An anchor of epochs 1 to `through` (a bag made for each later epoch, or signed over
    /// `stored`'s bytes where given), with the recovery key's verify key.
    mutating func anchor(through: UInt32 = 1, stored: [UInt32: String] = [:]) -> KeyAnchor {
        var bags = ["1": SignedKeyBag(bundle: nil, verifyKey: Self.base64(epochs[1]!), signature: nil)]
        if through >= 2 {
            for epoch in 2...through { bags[String(epoch)] = bag(epoch, bundle: stored[epoch]) }
        }
        return KeyAnchor(recoveryVerifyKey: Self.base64(recovery), bags: bags)
    }
}
