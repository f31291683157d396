import Crypto
import Foundation
import GroupDefaultsWire

/// The secret a person writes down when a suite is first encrypted: 128 random bits from which the
/// suite's keys are derived (`SuiteKeys.init(recoveryKey:suite:)`), so that a device can be set up
/// with no other device at hand (`groupdefaults-sync configure … --recovery-key KEY`).
///
/// Written in Crockford's base32 (digits and capitals without I, L, O, U; read case-insensitively,
/// with I and L taken for 1 and O for 0), 26 characters of secret and 2 of check, in groups of four:
/// `7ZQ3-M1XA-…`. The check characters are the first 10 bits of the secret's SHA-256, so a typo is
/// caught (all but one in a thousand) before any key is derived from a wrong secret.
public struct RecoveryKey: Sendable, Equatable, CustomStringConvertible {
    let readable: ReadableSecret
    /// The secret's bytes (16).
    var secret: [UInt8] { readable.bytes }

    /// A new random recovery key.
    public init() { readable = ReadableSecret() }

    init(secret: [UInt8]) { readable = ReadableSecret(bytes: secret) }

    /// Reads a recovery key as a person typed it: spaces and hyphens ignored, any case.
    ///
    /// - Throws: `SyncError` (`local`) that says whether the text has the wrong length, a character
    ///   that is not Crockford base32, or a check that fails (a typo).
    public init(parsing text: String) throws(SyncError) { readable = try ReadableSecret(parsing: text, what: "recovery key") }

    /// The key as it is shown: seven groups of four characters joined by hyphens.
    public var description: String { readable.description }
}

/// 128 random bits written for a person: Crockford's base32 (digits and capitals without I, L, O,
/// U; read case-insensitively, I and L taken for 1 and O for 0), 26 characters of secret and 2 of
/// check (the first 10 bits of the secret's SHA-256), in seven groups of four. Recovery keys and
/// pairing codes are written so.
struct ReadableSecret: Sendable, Equatable, CustomStringConvertible {
    let bytes: [UInt8]

    init() { bytes = SymmetricKey(size: .bits128).withUnsafeBytes { Array($0) } }

    init(bytes: [UInt8]) {
        precondition(bytes.count == 16)
        self.bytes = bytes
    }

    init(parsing text: String, what: String) throws(SyncError) {
        var digits: [UInt8] = []
        for character in text.uppercased() where character != "-" && !character.isWhitespace {
            guard let digit = Self.value(of: character) else {
                throw SyncError(.local, "the \(what) has a character that cannot be in one: '\(character)'")
            }
            digits.append(digit)
        }
        guard digits.count == 28 else {
            let article = "aeiou".contains(what.first ?? "x") ? "an" : "a"
            throw SyncError(.local, "\(article) \(what) has 28 characters (7 groups of 4); this one has \(digits.count)")
        }
        let bytes = Self.unpack(Array(digits.prefix(26)), byteCount: 16)
        guard Self.check(bytes) == Array(digits.suffix(2)) else {
            throw SyncError(.local, "the \(what) does not check out: a character is mistyped")
        }
        self.bytes = bytes
    }

    var description: String {
        let digits = Self.pack(bytes, digitCount: 26) + Self.check(bytes)
        let characters = digits.map { Self.alphabet[Int($0)] }
        return stride(from: 0, to: characters.count, by: 4).map { String(characters[$0..<min($0 + 4, characters.count)]) }
            .joined(separator: "-")
    }

    // MARK: Crockford's base32

    private static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    private static func value(of character: Character) -> UInt8? {
        switch character {
        case "O": return 0
        case "I", "L": return 1
        default: return alphabet.firstIndex(of: character).map(UInt8.init)
        }
    }

    private static func check(_ bytes: [UInt8]) -> [UInt8] {
        let digest = Array(SHA256.hash(data: bytes))
        return pack(Array(digest.prefix(2)), digitCount: 2)
    }

    /// `bytes` as 5-bit digits, most significant first, the last digit padded with zero bits.
    private static func pack(_ bytes: [UInt8], digitCount: Int) -> [UInt8] {
        var digits: [UInt8] = []
        var buffer = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | Int(byte)
            bits += 8
            while bits >= 5, digits.count < digitCount {
                bits -= 5
                digits.append(UInt8((buffer >> bits) & 31))
            }
        }
        if digits.count < digitCount { digits.append(UInt8((buffer << (5 - bits)) & 31)) }
        return digits
    }

    private static func unpack(_ digits: [UInt8], byteCount: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = 0
        var bits = 0
        for digit in digits {
            buffer = (buffer << 5) | Int(digit)
            bits += 5
            if bits >= 8, bytes.count < byteCount {
                bits -= 8
                bytes.append(UInt8((buffer >> bits) & 255))
            }
        }
        return bytes
    }
}
