package import Foundation
import Crypto

/// Bearer tokens: `gdt_` + 32 random bytes in base64url; only their SHA-256 is stored.
package enum Tokens {
    package static let prefix = "gdt_"

    /// A new token and what storage keeps of it.
    package static func make(account: String, suitePatterns: [String], readOnly: Bool, expires: Date?, now: Date = Date()) -> (token: String, stored: StoredToken) {
        var generator = SystemRandomNumberGenerator()
        let secret = (0 ..< 32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let idBytes = (0 ..< 6).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let token = prefix + base64URL(secret)
        let id = "tok_" + idBytes.map { String(format: "%02x", $0) }.joined()
        let stored = StoredToken(id: id, account: account, suitePatterns: suitePatterns, readOnly: readOnly, created: now,
                                 expires: expires, revoked: nil, hash: hash(token))
        return (token, stored)
    }

    /// The SHA-256 of a token, lowercase hex.
    package static func hash(_ token: String) -> String {
        SHA256.hash(data: Array(token.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// Suite patterns: `*` matches any run of characters (dots included); everything else itself.
package enum SuitePattern {
    package static func matches(_ pattern: String, _ name: String) -> Bool {
        let p = Array(pattern.unicodeScalars), s = Array(name.unicodeScalars)
        // Greedy wildcard matching with backtracking to the last '*'.
        var pi = 0, si = 0, star = -1, mark = 0
        while si < s.count {
            if pi < p.count, p[pi] != "*", p[pi] == s[si] {
                pi += 1; si += 1
            } else if pi < p.count, p[pi] == "*" {
                star = pi; mark = si; pi += 1
            } else if star >= 0 {
                pi = star + 1; mark += 1; si = mark
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }
}
