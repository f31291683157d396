import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `AccountStore` (deleting an account) and the account queries built on the other protocols
    /// (`accountSummaries`, `AccountExport`), over every backend.
    @Suite("AccountStore")
    struct AccountStoreConformance: StorageConformance {
        /// Writes an account's data of every kind, each carrying `marker`: keys, values, a
        /// tombstone, history, a device name, a token's device name, a pairing's suite.
        func fill(_ storage: any ServerStorage, account: String, marker: String) async throws -> StoredToken {
            let made = Tokens.make(account: account, suitePatterns: ["\(marker).*"], readOnly: false, device: "phone-\(marker)", expires: nil)
            try await storage.createToken(made.stored)
            try await push(storage, account: account, suite: "\(marker).a", [op("k-\(marker)", .string("v1-\(marker)"), hlc: 10)])
            try await push(storage, account: account, suite: "\(marker).a", [op("k-\(marker)", .string("v2-\(marker)"), hlc: 20)])
            try await push(storage, account: account, suite: "\(marker).a", [op("gone-\(marker)", nil, hlc: 30)])
            try await storage.recordDevice(
                StoredDevice(
                    account: account,
                    tokenID: made.stored.id,
                    name: "phone-\(marker)",
                    deviceID: 7,
                    firstSeen: 1000,
                    lastSeen: 2000,
                    lastPush: 2000,
                    suites: ["\(marker).a"]
                )
            )
            try await storage.createPairing(
                StoredPairing(
                    lookup: StoredPairing.lookup(id: "pairing-\(marker)"),
                    account: account,
                    suite: "\(marker).a",
                    creatorTokenID: made.stored.id,
                    readOnly: false,
                    created: Date()
                )
            )
            return made.stored
        }

        @Test(
            "accounts: listed with suites, tokens and devices; exported as one document; deleted whole, others untouched",
            arguments: StorageBackend.allCases
        )
        func listExportDelete(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let token = try await fill(storage, account: "alice", marker: "AAAMARK")
                _ = try await fill(storage, account: "bob", marker: "BBBMARK")

                let summaries = try await storage.accountSummaries()
                #expect(summaries.map(\.account) == ["alice", "bob"])
                #expect(summaries.first?.suites == ["AAAMARK.a"])
                #expect(summaries.first?.tokens == 1 && summaries.first?.activeTokens == 1 && summaries.first?.devices == 1)

                let export = try await AccountExport.read(account: "alice", from: storage)
                let json = String(decoding: try export.json(), as: UTF8.self)
                #expect(json.contains("\"format\" : \"groupdefaults-account-export\""))
                #expect(export.suites.map(\.name) == ["AAAMARK.a"])
                #expect(export.suites.first?.entries.map(\.key) == ["gone-AAAMARK", "k-AAAMARK"])
                #expect(export.suites.first?.entries.first?.isDeleted == true)
                #expect(export.suites.first?.history.first { $0.key.isSameName(as: "k-AAAMARK") }?.versions.count == 2)
                #expect(export.tokens?.map(\.id) == [token.id])
                #expect(!json.contains(token.hash))
                #expect(!json.contains("BBBMARK"))
                #expect(export.devices.first?.name == "phone-AAAMARK")
                #expect(export.pairings?.map(\.suite) == ["AAAMARK.a"] && export.pairings?.first?.state == "waiting")
                #expect(!json.contains(StoredPairing.lookup(id: "pairing-AAAMARK")))
                #expect(try await storage.pairings(account: "alice").map(\.suite) == ["AAAMARK.a"])

                #expect(try await storage.deleteAccount("alice"))
                #expect(try await storage.deleteAccount("alice") == false)  // nothing left: nothing changed
                #expect(try await storage.accountSummaries().map(\.account) == ["bob"])
                #expect(try await storage.token(hash: token.hash) == nil)
                #expect(try await storage.token(id: token.id) == nil)
                #expect(try await storage.devices(account: "alice").isEmpty)
                #expect(try await storage.suites(account: "alice").suites.isEmpty)
                #expect(try await storage.history(account: "alice", suite: "AAAMARK.a", key: "k-AAAMARK").isEmpty)
                #expect(try await storage.pairing(lookup: StoredPairing.lookup(id: "pairing-AAAMARK")) == nil)
                #expect(try await storage.pairings(account: "alice").isEmpty)
                // Bob's account is whole.
                #expect(try await storage.suites(account: "bob").suites.map(\.name) == ["BBBMARK.a"])
                #expect(try await storage.devices(account: "bob").count == 1)
                #expect(try await storage.pairing(lookup: StoredPairing.lookup(id: "pairing-BBBMARK")) != nil)
                #expect(try await storage.deleteAccount("nobody") == false)
            }
        }

        @Test(
            "an export holds the sharing: an owner's suite its members and invitations, a member the suites it belongs to",
            arguments: StorageBackend.allCases
        )
        func exportHoldsSharing(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await push(storage, account: "ana", suite: "family", [op("sound", .string("ring.caf"), hlc: 10)])
                let now = Date()
                func invite(_ code: String, _ role: SuiteRole) async throws {
                    let invitation = StoredInvitation(
                        lookup: StoredInvitation.lookup(id: code),
                        id: "inv_\(code.suffix(12))",
                        owner: "ana",
                        suite: "family",
                        role: role,
                        createdBy: "ana",
                        created: now,
                        lifetime: 3600
                    )
                    try await storage.createInvitation(invitation, now: now)
                }
                try await invite("code-bob-000000000000", .write)
                try await invite("code-pending-00000000", .read)
                _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "code-bob-000000000000"), account: "bob", now: now)

                let owner = try await AccountExport.read(account: "ana", from: storage, now: now)
                let suite = try #require(owner.suites.first)
                #expect(suite.members?.map(\.account) == ["bob"] && suite.members?.first?.role == .write)
                #expect(suite.members?.first?.invitedBy == "ana")
                #expect(Set(suite.invitations?.map(\.state) ?? []) == [.accepted, .pending])
                #expect(suite.invitations?.first { $0.state == .accepted }?.acceptedBy == "bob")
                #expect(owner.memberships?.isEmpty == true)
                let ownerJSON = String(decoding: try owner.json(), as: UTF8.self)
                #expect(!ownerJSON.contains("code-bob") && !ownerJSON.contains("code-pending"), "an invitation's code is never exported")
                #expect(!ownerJSON.contains(StoredInvitation.lookup(id: "code-pending-00000000")))

                let member = try await AccountExport.read(account: "bob", from: storage, now: now)
                #expect(member.suites.isEmpty)
                #expect(member.memberships?.map { [$0.owner, $0.suite, $0.account] } == [["ana", "family", "bob"]])
                #expect(member.memberships?.first?.role == .write)
                let memberJSON = String(decoding: try member.json(), as: UTF8.self)
                #expect(memberJSON.contains("\"memberships\" : ["), "\(memberJSON)")
                #expect(!memberJSON.contains("ring.caf"), "the owner's values stay the owner's")
            }
        }

        @Test(
            "an account's incarnation: made with its first token, kept, gone with the account, a new one for the name used again",
            arguments: StorageBackend.allCases
        )
        func incarnation(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await storage.createToken(Tokens.make(account: "zed", suitePatterns: ["*"], readOnly: false, expires: nil).stored)
                let first = try await storage.accountIncarnation("zed")
                #expect(first.count == 32)
                try await storage.createToken(Tokens.make(account: "zed", suitePatterns: ["*"], readOnly: false, expires: nil).stored)
                #expect(try await storage.accountIncarnation("zed") == first, "a second token is the same account")
                #expect(try await storage.accountIncarnation("bob") != first, "made for an account from before incarnations")
                #expect(try await storage.deleteAccount("zed", audit: .commandLine(.accountDelete, account: "zed")))
                #expect(try await storage.auditRecords(account: "zed", since: nil, limit: 10).map(\.act) == [.accountDelete])
                try await storage.createToken(Tokens.make(account: "zed", suitePatterns: ["*"], readOnly: false, expires: nil).stored)
                #expect(try await storage.accountIncarnation("zed") != first, "the name used again is a new account")
            }
        }

        @Test("a deleted account leaves no byte of its data in the store's files or the database's dump", arguments: StorageBackend.allCases)
        func deleteLeavesNoTrace(backend: StorageBackend) async throws {
            let (storage, scan, cleanup) = try await Self.rawStorage(backend)
            defer { cleanup() }
            do {
                _ = try await fill(storage, account: "alice", marker: "AAAMARK")
                _ = try await fill(storage, account: "bob", marker: "BBBMARK")
                #expect(try await storage.deleteAccount("alice"))
                try await storage.shutdown()
            } catch {
                try? await storage.shutdown()
                throw error
            }
            if let embedded = storage as? LMDBSyncStorage {
                // LMDB frees a deleted row's pages without overwriting them: the store's next open
                // with nothing else using it rebuilds the file from the live records (`LMDBErase`).
                #expect(LMDBErase.isPending(in: embedded.directory))
                let reopened = try LMDBSyncStorage(directory: embedded.directory)
                #expect(reopened.eraseOnOpen == .erased)
                #expect(try await reopened.suites(account: "bob").suites.map(\.name) == ["BBBMARK.a"])
                try await reopened.shutdown()
            }
            let bytes = try await scan()
            #expect(Self.occurrences(of: "BBBMARK", in: bytes) > 0)  // the scan sees what is there
            #expect(Self.occurrences(of: "AAAMARK", in: bytes) == 0)
        }

        static func occurrences(of marker: String, in bytes: [UInt8]) -> Int {
            let needle = Array(marker.utf8)
            guard bytes.count >= needle.count else { return 0 }
            var count = 0
            for start in 0...(bytes.count - needle.count) where bytes[start] == needle[0] {
                if bytes[start..<(start + needle.count)].elementsEqual(needle) { count += 1 }
            }
            return count
        }

        /// A fresh store, and how to read all of it raw: every file of the LMDB data directory, or
        /// a `pg_dump` of the database.
        static func rawStorage(
            _ backend: StorageBackend
        ) async throws -> (storage: any ServerStorage, scan: @Sendable () async throws -> [UInt8], cleanup: @Sendable () -> Void) {
            switch backend {
            case .lmdb:
                let fixture = try Fixture()
                let directory = fixture.directory
                let scan: @Sendable () async throws -> [UInt8] = {
                    var bytes: [UInt8] = []
                    for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                        bytes += try Array(Data(contentsOf: directory.appendingPathComponent(name)))
                    }
                    return bytes
                }
                return (fixture.storage, scan, { try? FileManager.default.removeItem(at: directory) })
            case .postgres:
                let url = try await PostgresFixture.freshDatabase()
                let storage = try await PostgresFixture.storage(url: url)
                let scan: @Sendable () async throws -> [UInt8] = { Array(try await PostgresFixture.dump(url).utf8) }
                return (storage, scan, {})
            }
        }

        @Test(
            "a push authorized before its account was deleted, or its token revoked, is refused in its write, and writes nothing into a new account of the name",
            arguments: StorageBackend.allCases
        )
        func pushAuthorizedBeforeDeletion(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let old = try await fill(storage, account: "ana", marker: "OLD")
                let oldIncarnation = try await storage.accountIncarnation("ana")
                func authorized(_ token: StoredToken, _ incarnation: String?, value: String) throws -> PreparedPush {
                    var push = try PreparedPush(PushRequest(deviceID: 3, batchID: UUID().uuidString, ops: [op("k", .string(value), hlc: 50)]))
                    push.authority = PushAuthority(tokenID: token.id, ownerIncarnation: incarnation)
                    return push
                }
                func write(_ push: PreparedPush, suite: String = "caf\u{e9}") async throws {
                    _ = try await storage.push(account: "ana", suite: suite, push: push, quota: Self.roomy, serverTime: Self.now)
                }
                // Authorized, then the account is deleted and made again under its name.
                let late = try authorized(old, oldIncarnation, value: "the deleted account's")
                #expect(try await storage.deleteAccount("ana"))
                let made = Tokens.make(account: "ana", suitePatterns: ["*"], readOnly: false, device: "new", expires: nil)
                try await storage.createToken(made.stored)
                let newIncarnation = try await storage.accountIncarnation("ana")
                #expect(newIncarnation != oldIncarnation)
                await expectStorageError(.unauthorized) { try await write(late) }
                // The old incarnation under a token of the new account (a member's push checked
                // against the deleted owner): refused too.
                await expectStorageError(.accountDeleted) { try await write(try authorized(made.stored, oldIncarnation, value: "stale")) }
                #expect(try await storage.suites(account: "ana").suites.isEmpty, "nothing written into the new account")

                // A revoked token's push, authorized before the revocation.
                let revoked = try authorized(made.stored, newIncarnation, value: "revoked")
                try await storage.revokeToken(id: made.stored.id, at: Date())
                await expectStorageError(.unauthorized) { try await write(revoked) }
                #expect(try await storage.suites(account: "ana").suites.isEmpty)

                // The same push by a token still held is written.
                let current = Tokens.make(account: "ana", suitePatterns: ["*"], readOnly: false, device: "other", expires: nil)
                try await storage.createToken(current.stored)
                try await write(try authorized(current.stored, newIncarnation, value: "kept"))
                let kept = try await storage.snapshot(account: "ana", suite: "caf\u{e9}", after: nil, limit: 10).page()
                #expect(kept.entries.map(\.value) == [.string("kept")])
            }
        }
    }
}
