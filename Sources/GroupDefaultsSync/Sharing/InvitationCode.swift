import Crypto
import Foundation
import GroupDefaultsWire

/// A one-time invitation code: 128 random bits, written as a pairing code is (seven groups of
/// four characters, the last two a check, so that a typo is caught before anything is sent).
/// The server files the invitation under an id derived from it (HKDF-SHA256) and keeps only that
/// id's SHA-256: it never sees the code, and what it stores accepts nothing.
public struct InvitationCode: Sendable, Equatable, CustomStringConvertible {
    let readable: ReadableSecret

    /// A new random code.
    public init() { readable = ReadableSecret() }

    /// Reads a code as a person typed it: spaces and hyphens ignored, any case.
    ///
    /// - Throws: `SyncError` (`local`): the wrong length, a foreign character, or a typo.
    public init(parsing text: String) throws(SyncError) { readable = try ReadableSecret(parsing: text, what: "invitation code") }

    /// The code as it is shown: seven groups of four characters.
    public var description: String { readable.description }

    /// The id the server files the invitation under (32 hex digits).
    public var invitationID: String { derive("invitation id", bytes: 16).withUnsafeBytes { Hex.string($0) } }

    /// A key for `purpose` derived from the code (HKDF-SHA256): the id, the claim's proof key, the
    /// keys' pre-shared key, the offer's MAC key.
    func derive(_ purpose: String, bytes: Int = 32) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: readable.bytes),
            salt: Data("GroupDefaults invitation v1".utf8),
            info: Data(purpose.utf8),
            outputByteCount: bytes
        )
    }
}
