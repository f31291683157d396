package import Foundation
package import GroupDefaultsWire

/// Pairings (`StoredPairing`: its rules are its own; backends apply them in a transaction).
package protocol PairingStore: Sendable {
    /// Stores a new pairing, and drops those that expired; `pairingUsed` if its lookup exists.
    func createPairing(_ pairing: StoredPairing) async throws
    /// The pairing under `lookup`, expired or not; nil if there is none.
    func pairing(lookup: String) async throws -> StoredPairing?
    /// Claims the pairing (`StoredPairing.claim`) and stores `token`, the claiming device's, in one
    /// transaction; `pairingNotFound`, `pairingExpired`, `pairingUsed`.
    func claimPairing(lookup: String, claim: PairingClaim, token: StoredToken, now: Date) async throws -> StoredPairing
    /// Stores the sealed keys (`StoredPairing.complete`) and gives the claiming device's token its
    /// lasting expiry, `tokenExpires` (nil: none), in one transaction; until then it works for
    /// nothing (it is made expired). `pairingNotFound`, `pairingExpired`, `pairingUsed`.
    func completePairing(lookup: String, bundle: String, now: Date, tokenExpires: Date?) async throws -> StoredPairing
    /// Cancels the pairing (`StoredPairing.cancel`) and revokes the claiming device's token, if
    /// any, at `now`, in one transaction. `pairingNotFound`, `pairingUsed`.
    func cancelPairing(lookup: String, now: Date) async throws -> StoredPairing
}
