import Crypto
package import Foundation
import GroupDefaultsWire

/// Bearer tokens: `gdt_` + 32 random bytes in base64url; only their SHA-256 is stored.
package enum Tokens {
    package static let prefix = "gdt_"

    /// A new token and what storage keeps of it.
    package static func make(
        account: String,
        suitePatterns: [String],
        readOnly: Bool,
        device: String? = nil,
        expires: Date?,
        now: Date = Date()
    ) -> (token: String, stored: StoredToken) {
        var generator = SystemRandomNumberGenerator()
        let secret = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let idBytes = (0..<6).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let token = prefix + base64URL(secret)
        let id = "tok_" + Hex.string(idBytes)
        let stored = StoredToken(
            id: id,
            account: account,
            suitePatterns: suitePatterns,
            readOnly: readOnly,
            device: device,
            created: now,
            expires: expires,
            revoked: nil,
            hash: hash(token)
        )
        return (token, stored)
    }

    /// The SHA-256 of a token, lowercase hex.
    package static func hash(_ token: String) -> String {
        var token = token
        let digest = token.withUTF8 { SHA256.hash(data: $0) }
        return digest.withUnsafeBytes { Hex.string($0) }
    }

    /// Whether an `Authorization` header is `Bearer expected`, compared by SHA-256 digest so that
    /// the time taken tells nothing of how much of it matched.
    package static func sameBearer(_ header: String?, _ expected: String) -> Bool {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return false }
        return hash(header.dropFirst(7).trimmingCharacters(in: .whitespaces)) == hash(expected)
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
