import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `PairingStore` (pairings), over every backend.
    @Suite("PairingStore")
    struct PairingStoreConformance: StorageConformance {
        @Test(
            "pairings: claimed once, before they expire, with the claiming device's token stored in the same step; keys only after a claim, once",
            arguments: StorageBackend.allCases
        )
        func pairings(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let created = Date()
                let pairing = StoredPairing(
                    lookup: StoredPairing.lookup(id: "p1"),
                    account: "alice",
                    suite: "s",
                    creatorTokenID: "tok_1",
                    readOnly: false,
                    created: created
                )
                try await storage.createPairing(pairing)
                await expectStorageError(.pairingUsed) { try await storage.createPairing(pairing) }
                await expectStorageError(.malformed) {
                    _ = try await storage.completePairing(lookup: pairing.lookup, bundle: "b", now: created, tokenExpires: nil)
                }
                let claim = PairingClaim(publicKey: "pk", proof: "proof")
                func token(_ id: String) -> StoredToken {
                    StoredToken(
                        id: id,
                        account: "alice",
                        suitePatterns: ["s"],
                        readOnly: false,
                        created: created,
                        expires: pairing.expires,
                        revoked: nil,
                        hash: "hash-\(id)"
                    )
                }
                // Expired: refused, and no token made.
                await expectStorageError(.pairingExpired) {
                    _ = try await storage.claimPairing(
                        lookup: pairing.lookup,
                        claim: claim,
                        token: token("tok_late"),
                        now: created.addingTimeInterval(StoredPairing.lifetime + 1)
                    )
                }
                #expect(try await storage.token(hash: "hash-tok_late") == nil)
                let claimed = try await storage.claimPairing(lookup: pairing.lookup, claim: claim, token: token("tok_2"), now: created)
                #expect(claimed.state.state == .claimed && claimed.tokenID == "tok_2")
                #expect(try await storage.token(hash: "hash-tok_2")?.id == "tok_2")
                await expectStorageError(.pairingUsed) {
                    _ = try await storage.claimPairing(lookup: pairing.lookup, claim: claim, token: token("tok_3"), now: created)
                }
                #expect(try await storage.token(hash: "hash-tok_3") == nil)
                let interim = try await storage.token(hash: "hash-tok_2")?.expires
                #expect(interim.map { abs($0.timeIntervalSince(pairing.expires)) < 0.001 } == true, "until the keys are handed over")
                let completed = try await storage.completePairing(lookup: pairing.lookup, bundle: "sealed", now: created, tokenExpires: nil)
                #expect(completed.state.state == .completed && completed.state.bundle == "sealed")
                #expect(try await storage.token(hash: "hash-tok_2")?.expires == nil, "then as long as the creator's")
                await expectStorageError(.pairingUsed) {
                    _ = try await storage.completePairing(lookup: pairing.lookup, bundle: "x", now: created, tokenExpires: nil)
                }
                #expect(try await storage.pairing(lookup: pairing.lookup)?.bundle == "sealed")
                await expectStorageError(.pairingNotFound) {
                    _ = try await storage.claimPairing(lookup: StoredPairing.lookup(id: "nope"), claim: claim, token: token("tok_4"), now: created)
                }

                // Cancelled: its claim's token revoked at once; nothing can complete it; keys handed over cannot be taken back.
                let second = StoredPairing(
                    lookup: StoredPairing.lookup(id: "p2"),
                    account: "alice",
                    suite: "s",
                    creatorTokenID: "tok_1",
                    readOnly: false,
                    created: created
                )
                try await storage.createPairing(second)
                _ = try await storage.claimPairing(lookup: second.lookup, claim: claim, token: token("tok_5"), now: created)
                let cancelled = try await storage.cancelPairing(lookup: second.lookup, now: created.addingTimeInterval(1))
                #expect(cancelled.expires <= created.addingTimeInterval(1))
                #expect(try await storage.token(hash: "hash-tok_5")?.revoked != nil)
                await expectStorageError(.pairingExpired) {
                    _ = try await storage.completePairing(lookup: second.lookup, bundle: "b", now: created.addingTimeInterval(2), tokenExpires: nil)
                }
                await expectStorageError(.pairingUsed) { _ = try await storage.cancelPairing(lookup: pairing.lookup, now: created) }
            }
        }

        @Test(
            "pairings are capped per token: five waiting at once, then 429 until one expires; other tokens are not affected",
            arguments: StorageBackend.allCases
        )
        func pairingCap(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let created = Date()
                func pairing(_ id: String, by token: String, at date: Date = created) -> StoredPairing {
                    StoredPairing(
                        lookup: StoredPairing.lookup(id: id),
                        account: "alice",
                        suite: "s",
                        creatorTokenID: token,
                        readOnly: false,
                        created: date
                    )
                }
                for index in 0..<StoredPairing.maximumPerToken { try await storage.createPairing(pairing("a\(index)", by: "tok_a")) }
                await expectStorageError(.rateLimited) { try await storage.createPairing(pairing("a-more", by: "tok_a")) }
                try await storage.createPairing(pairing("b0", by: "tok_b"))
                // Once they expired, the token may make more.
                try await storage.createPairing(pairing("a-later", by: "tok_a", at: created.addingTimeInterval(StoredPairing.lifetime + 1)))
            }
        }
    }
}
