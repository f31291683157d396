package import Foundation
package import GroupDefaultsWire

/// A pairing as storage keeps it (`/v1/pairings`): keyed by the SHA-256 of its id, so that
/// reading the store does not give what claims it. The rules of its life (one claim, before it
/// expires; keys only after the claim, once) are here, once; backends apply them inside their
/// transaction.
package struct StoredPairing: Sendable, Hashable, Codable {
    /// SHA-256 of the pairing id, lowercase hex.
    package var lookup: String
    package var account: String
    package var suite: String
    /// The token that made it: only it may hand over the keys.
    package var creatorTokenID: String
    /// Whether the new device's token is read-only (as the creator's is).
    package var readOnly: Bool
    package var created: Date
    package var expires: Date
    package var claim: PairingClaim?
    /// The id of the token made for the claiming device.
    package var tokenID: String?
    /// The suite's keys, sealed to the claimed public key.
    package var bundle: String?

    /// How long a pairing code works.
    package static let lifetime: TimeInterval = 600

    /// How many unexpired pairings one token may have made: a device pairs a few devices at a
    /// time, and a stolen token cannot fill the store with pairings.
    package static let maximumPerToken = 5

    /// The refusal of a pairing beyond `maximumPerToken`.
    package static func checkCount(_ live: Int) throws(SyncStorageError) {
        guard live < maximumPerToken else {
            throw SyncStorageError(
                .rateLimited,
                "this token has \(live) pairings waiting (at most \(maximumPerToken)): use one, or wait until they expire (10 minutes)"
            )
        }
    }

    package init(lookup: String, account: String, suite: String, creatorTokenID: String, readOnly: Bool, created: Date) {
        self.lookup = lookup
        self.account = account
        self.suite = suite
        self.creatorTokenID = creatorTokenID
        self.readOnly = readOnly
        self.created = created
        self.expires = created.addingTimeInterval(Self.lifetime)
    }

    /// The lookup of a pairing id: its SHA-256, lowercase hex.
    package static func lookup(id: String) -> String { Tokens.hash(id) }

    /// Records the claim and the token made for it: once, before the pairing expires.
    package mutating func claim(_ claim: PairingClaim, tokenID: String, now: Date) throws(SyncStorageError) {
        if now >= expires { throw SyncStorageError(.pairingExpired, "the pairing code expired: make a new one with groupdefaults-sync pair") }
        if self.claim != nil { throw SyncStorageError(.pairingUsed, "the pairing code was already used: each code pairs one device") }
        self.claim = claim
        self.tokenID = tokenID
    }

    /// Stores the sealed keys: once, after the claim, before the pairing expires.
    package mutating func complete(bundle: String, now: Date) throws(SyncStorageError) {
        if now >= expires { throw SyncStorageError(.pairingExpired, "the pairing expired before the keys were handed over") }
        guard claim != nil else { throw SyncStorageError(.malformed, "the pairing has not been claimed yet") }
        if self.bundle != nil { throw SyncStorageError(.pairingUsed, "the keys of this pairing were already handed over") }
        self.bundle = bundle
    }

    /// Cancels it (the offering device refused the claim's proof, or gave up): it expires now, so
    /// that nothing can claim or complete it; the claim's token, if any, is for the backend to
    /// revoke in the same transaction. Keys already handed over cannot be taken back.
    package mutating func cancel(now: Date) throws(SyncStorageError) {
        if bundle != nil { throw SyncStorageError(.pairingUsed, "the keys of this pairing were already handed over") }
        expires = min(expires, now)
    }

    /// Where it stands, as `GET /v1/pairings/{id}` says.
    package var state: PairingState {
        PairingState(
            state: bundle != nil ? .completed : claim != nil ? .claimed : .waiting,
            suite: suite,
            expires: TypedJSONDate.format(milliseconds: UInt64(max(0, expires.timeIntervalSince1970 * 1000))),
            claim: claim,
            bundle: bundle
        )
    }
}
