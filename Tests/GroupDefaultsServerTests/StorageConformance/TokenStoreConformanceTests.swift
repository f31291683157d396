import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `TokenStore` (tokens), over every backend.
    @Suite("TokenStore")
    struct TokenStoreConformance: StorageConformance {
        @Test("tokens: create, find by hash, list, revoke", arguments: StorageBackend.allCases)
        func tokens(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let created = Date(timeIntervalSince1970: 1_800_000_000)
                let first = StoredToken(
                    id: "t1",
                    account: "alice",
                    suitePatterns: ["com.example.*", "group.x"],
                    readOnly: false,
                    created: created,
                    expires: nil,
                    revoked: nil,
                    hash: String(repeating: "a", count: 64)
                )
                let second = StoredToken(
                    id: "t2",
                    account: "bob",
                    suitePatterns: ["*"],
                    readOnly: true,
                    device: "tablet",
                    created: created.addingTimeInterval(60),
                    expires: created.addingTimeInterval(3600),
                    revoked: nil,
                    hash: String(repeating: "b", count: 64)
                )
                try await storage.createToken(first)
                try await storage.createToken(second)
                #expect(try await storage.token(hash: first.hash) == first)
                #expect(try await storage.token(hash: second.hash) == second)
                #expect(try await storage.token(hash: String(repeating: "c", count: 64)) == nil)
                #expect(try await storage.tokens() == [first, second])

                let revokedAt = created.addingTimeInterval(120)
                try await storage.revokeToken(id: "t1", at: revokedAt)
                #expect(try await storage.token(hash: first.hash)?.revoked == revokedAt)
                #expect(try await storage.token(hash: second.hash)?.revoked == nil)
                await expectStorageError(.notFound) { try await storage.revokeToken(id: "nope", at: revokedAt) }
            }
        }

        @Test("tokens by id and by account: only the one asked for, an account's oldest first", arguments: StorageBackend.allCases)
        func tokensByIDAndAccount(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let created = Date(timeIntervalSince1970: 1_800_000_000)
                func token(_ id: String, _ account: String, after seconds: Double, _ hash: Character) -> StoredToken {
                    StoredToken(
                        id: id,
                        account: account,
                        suitePatterns: ["*"],
                        readOnly: false,
                        created: created.addingTimeInterval(seconds),
                        expires: nil,
                        revoked: nil,
                        hash: String(repeating: hash, count: 64)
                    )
                }
                let later = token("t1", "alice", after: 60, "a")
                let other = token("t2", "bob", after: 0, "b")
                let earlier = token("t3", "alice", after: 0, "c")
                for made in [later, other, earlier] { try await storage.createToken(made) }
                #expect(try await storage.token(id: "t1") == later)
                #expect(try await storage.token(id: "t2") == other)
                #expect(try await storage.token(id: "nope") == nil)
                #expect(try await storage.tokens(account: "alice") == [earlier, later])
                #expect(try await storage.tokens(account: "bob") == [other])
                #expect(try await storage.tokens(account: "carol").isEmpty)
                #expect(try await storage.tokens(account: nil).count == 3)

                try await storage.revokeToken(id: "t1", at: created.addingTimeInterval(120))
                #expect(try await storage.token(id: "t1")?.revoked == created.addingTimeInterval(120))
                #expect(try await storage.activeTokenIDs(account: "alice", at: created.addingTimeInterval(180)) == ["t3"])
            }
        }

        @Test(
            "replacing the tokens: exactly the ones given, revoked ones as they are, found by hash; the old ones gone",
            arguments: StorageBackend.allCases
        )
        func replaceTokens(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let created = Date(timeIntervalSince1970: 1_800_000_000)
                func token(_ id: String, _ account: String, _ hash: Character, revoked: Date? = nil) -> StoredToken {
                    StoredToken(
                        id: id,
                        account: account,
                        suitePatterns: ["group.*"],
                        readOnly: false,
                        device: "phone",
                        created: created,
                        expires: nil,
                        revoked: revoked,
                        hash: String(repeating: hash, count: 64)
                    )
                }
                let old = token("t1", "carol", "a")
                try await storage.createToken(old)
                let generation = try storage.tokenGeneration()
                let revoked = token("t2", "alice", "b", revoked: created.addingTimeInterval(60))
                let active = token("t3", "alice", "c")
                try await storage.replaceTokens(with: [revoked, active])
                #expect(try await storage.tokens() == [revoked, active])
                #expect(try await storage.token(hash: old.hash) == nil)
                #expect(try await storage.token(id: "t1") == nil)
                #expect(try await storage.token(hash: revoked.hash) == revoked)
                #expect(try await storage.token(hash: active.hash) == active)
                if backend == .lmdb { #expect(try storage.tokenGeneration() != generation, "a cached verification does not outlive it") }
                try await storage.replaceTokens(with: [])
                #expect(try await storage.tokens().isEmpty)
            }
        }
    }
}
