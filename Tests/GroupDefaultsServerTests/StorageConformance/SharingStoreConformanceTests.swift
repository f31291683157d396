import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `SharingStore` (members and invitations of shared suites), over every backend.
    @Suite("SharingStore")
    struct SharingStoreConformance: StorageConformance {
        static func invitation(
            _ id: String,
            role: SuiteRole = .write,
            by creator: String = "alice",
            at created: Date,
            lifetime: TimeInterval = 3600
        )
            -> StoredInvitation
        {
            StoredInvitation(
                lookup: StoredInvitation.lookup(id: id),
                id: "inv_\(id)",
                owner: "alice",
                suite: "family",
                role: role,
                createdBy: creator,
                created: created,
                lifetime: lifetime
            )
        }

        @Test(
            "an encrypted suite's keys are handed over once, for the key the invitation was accepted with, to a member still there; the admission is kept with the membership",
            arguments: StorageBackend.allCases
        )
        func keyHandover(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                let claim = InvitationClaim(memberKey: "bWVtYmVy", proof: "cHJvb2Y=")
                let admission = MemberAdmission(memberKey: claim.memberKey, epoch: 1, signature: "c2lnbmVk")
                for id in ["k1", "k2", "k3"] { try await storage.createInvitation(Self.invitation(id, at: now), now: now) }
                // Not accepted yet, or accepted without a claim: nothing to hand over.
                await expectStorageError(.invitationNotFound) {
                    _ = try await storage.handOverKeys(owner: "alice", suite: "family", id: "inv_k1", keys: "a2V5cw==", admission: admission)
                }
                _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "k2"), account: "carol", now: now)
                await expectStorageError(.invitationNotFound) {
                    _ = try await storage.handOverKeys(owner: "alice", suite: "family", id: "inv_k2", keys: "a2V5cw==", admission: admission)
                }
                _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "k1"), account: "bob", claim: claim, now: now)
                #expect(try await storage.invitation(lookup: StoredInvitation.lookup(id: "k1"))?.claim == claim)
                let other = MemberAdmission(memberKey: "b3RoZXI=", epoch: 1, signature: "c2lnbmVk")
                await expectStorageError(.malformed) {
                    _ = try await storage.handOverKeys(owner: "alice", suite: "family", id: "inv_k1", keys: "a2V5cw==", admission: other)
                }
                await expectStorageError(.invitationNotFound) {
                    _ = try await storage.handOverKeys(owner: "alice", suite: "other", id: "inv_k1", keys: "a2V5cw==", admission: admission)
                }
                let handed = try await storage.handOverKeys(owner: "alice", suite: "family", id: "inv_k1", keys: "a2V5cw==", admission: admission)
                #expect(handed.keys == "a2V5cw==" && handed.info(at: now).keys == "a2V5cw==")
                #expect(try await storage.member(owner: "alice", suite: "family", account: "bob")?.admission == admission)
                await expectStorageError(.invitationUsed) {
                    _ = try await storage.handOverKeys(owner: "alice", suite: "family", id: "inv_k1", keys: "b3RoZXI=", admission: admission)
                }
                #expect(try await storage.invitation(lookup: StoredInvitation.lookup(id: "k1"))?.keys == "a2V5cw==")
                // A member removed before its keys came gets none.
                _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "k3"), account: "dave", claim: claim, now: now)
                #expect(try await storage.removeMember(owner: "alice", suite: "family", account: "dave"))
                await expectStorageError(.notAMember) {
                    _ = try await storage.handOverKeys(owner: "alice", suite: "family", id: "inv_k3", keys: "a2V5cw==", admission: admission)
                }
                #expect(try await storage.invitation(lookup: StoredInvitation.lookup(id: "k3"))?.keys == nil)
            }
        }

        @Test(
            "an invitation makes one member, once, before it expires, unless revoked; members and memberships list it; removal ends it",
            arguments: StorageBackend.allCases
        )
        func lifeOfAnInvitation(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                let write = Self.invitation("w1", at: now)
                try await storage.createInvitation(write, now: now)
                await expectStorageError(.invitationUsed) { try await storage.createInvitation(write, now: now) }
                #expect(try await storage.invitation(lookup: write.lookup)?.state(at: now) == .pending)

                // The owner cannot accept its own; an unknown code is not found.
                await expectStorageError(.memberConflict) { _ = try await storage.acceptInvitation(lookup: write.lookup, account: "alice", now: now) }
                await expectStorageError(.invitationNotFound) {
                    _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "nope"), account: "bob", now: now)
                }
                #expect(try await storage.members(owner: "alice", suite: "family").isEmpty)
                #expect(try await !storage.hasMembers(owner: "alice", suite: "family"))

                let member = try await storage.acceptInvitation(lookup: write.lookup, account: "bob", now: now)
                #expect(member.owner == "alice" && member.suite == "family" && member.role == .write && member.invitedBy == "alice")
                #expect(try await storage.member(owner: "alice", suite: "family", account: "bob")?.role == .write)
                #expect(try await storage.member(owner: "alice", suite: "other", account: "bob") == nil)
                #expect(try await storage.memberships(account: "bob").map(\.suite) == ["family"])
                #expect(try await storage.hasMembers(owner: "alice", suite: "family"))
                #expect(try await !storage.hasMembers(owner: "alice", suite: "famil"), "a prefix of the name is another suite")
                #expect(try await storage.invitation(lookup: write.lookup)?.state(at: now) == .accepted)
                await expectStorageError(.invitationUsed) { _ = try await storage.acceptInvitation(lookup: write.lookup, account: "carol", now: now) }
                #expect(try await storage.member(owner: "alice", suite: "family", account: "carol") == nil)

                // A member already: another invitation does not change its role.
                let read = Self.invitation("r1", role: .read, at: now)
                try await storage.createInvitation(read, now: now)
                await expectStorageError(.memberConflict) { _ = try await storage.acceptInvitation(lookup: read.lookup, account: "bob", now: now) }
                #expect(try await storage.invitation(lookup: read.lookup)?.state(at: now) == .pending, "nothing changed")

                // Expired, then revoked: refused, nothing made.
                await expectStorageError(.invitationExpired) {
                    _ = try await storage.acceptInvitation(lookup: read.lookup, account: "carol", now: now.addingTimeInterval(3601))
                }
                let revoked = try await storage.revokeInvitation(owner: "alice", suite: "family", id: read.id, by: .owner, now: now)
                #expect(revoked.state(at: now) == .revoked)
                await expectStorageError(.invitationExpired) {
                    _ = try await storage.acceptInvitation(lookup: read.lookup, account: "carol", now: now)
                }
                await expectStorageError(.invitationExpired) {
                    _ = try await storage.revokeInvitation(owner: "alice", suite: "family", id: read.id, by: .owner, now: now)
                }
                await expectStorageError(.invitationUsed) {
                    _ = try await storage.revokeInvitation(owner: "alice", suite: "family", id: write.id, by: .owner, now: now)
                }
                await expectStorageError(.invitationNotFound) {
                    _ = try await storage.revokeInvitation(owner: "alice", suite: "other", id: write.id, by: .owner, now: now)
                }
                #expect(try await storage.member(owner: "alice", suite: "family", account: "carol") == nil)
                #expect(Set(try await storage.invitations(owner: "alice", suite: "family").map(\.id)) == [read.id, write.id])

                #expect(try await storage.removeMember(owner: "alice", suite: "family", account: "bob"))
                #expect(try await !storage.removeMember(owner: "alice", suite: "family", account: "bob"))
                #expect(try await storage.member(owner: "alice", suite: "family", account: "bob") == nil)
                #expect(try await storage.memberships(account: "bob").isEmpty)
            }
        }

        @Test(
            "a member's push authorized before its removal, or before it became a read member, is refused in its write: nothing written",
            arguments: StorageBackend.allCases
        )
        func memberPushRecheckedInItsWrite(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                let alice = Tokens.make(account: "alice", suitePatterns: ["*"], readOnly: false, device: "phone", expires: nil)
                let bob = Tokens.make(account: "bob", suitePatterns: ["*"], readOnly: false, device: "phone", expires: nil)
                try await storage.createToken(alice.stored)
                try await storage.createToken(bob.stored)
                try await push(storage, suite: "family", [op("doorbell", .string("ding"), hlc: 1)])
                let writer = Self.invitation("w-recheck", at: now)
                try await storage.createInvitation(writer, now: now)
                _ = try await storage.acceptInvitation(lookup: writer.lookup, account: "bob", now: now)
                let incarnation = try await storage.accountIncarnation("alice")
                func bobs(_ value: String) throws -> PreparedPush {
                    var push = try PreparedPush(PushRequest(deviceID: 9, batchID: UUID().uuidString, ops: [op("doorbell", .string(value), hlc: 50)]))
                    push.account = "bob"
                    push.authority = PushAuthority(tokenID: bob.stored.id, ownerIncarnation: incarnation)
                    return push
                }
                func write(_ push: PreparedPush) async throws {
                    _ = try await storage.push(account: "alice", suite: "family", push: push, quota: Self.roomy, serverTime: Self.now)
                }
                // Authorized while bob writes, then removed: refused.
                let late = try bobs("after removal")
                #expect(try await storage.removeMember(owner: "alice", suite: "family", account: "bob"))
                await expectStorageError(.notAMember) { try await write(late) }
                // Joined again as a read member: refused as such.
                let reader = Self.invitation("r-recheck", role: .read, at: now)
                try await storage.createInvitation(reader, now: now)
                _ = try await storage.acceptInvitation(lookup: reader.lookup, account: "bob", now: now)
                await expectStorageError(.insufficientRole) { try await write(try bobs("as a reader")) }
                let held = try await storage.snapshot(account: "alice", suite: "family", after: nil, limit: 10).page()
                #expect(held.entries.map(\.value) == [.string("ding")], "nothing of bob's written")
            }
        }

        @Test("two accounts accepting one invitation at once: exactly one becomes a member", arguments: StorageBackend.allCases)
        func oneInvitationOneMember(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                let invitation = Self.invitation("race", at: now)
                try await storage.createInvitation(invitation, now: now)
                let accounts = (0..<8).map { "acct\($0)" }
                let outcomes = await withTaskGroup(of: Bool.self) { group in
                    for account in accounts {
                        group.addTask { (try? await storage.acceptInvitation(lookup: invitation.lookup, account: account, now: now)) != nil }
                    }
                    return await group.reduce(into: [Bool]()) { $0.append($1) }
                }
                #expect(outcomes.filter { $0 }.count == 1)
                #expect(try await storage.members(owner: "alice", suite: "family").count == 1)
            }
        }

        @Test(
            "a suite has at most 20 invitations waiting; ended ones do not count",
            arguments: StorageBackend.allCases
        )
        func invitationCap(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                for index in 0..<StoredInvitation.maximumPending {
                    try await storage.createInvitation(Self.invitation("c\(index)", at: now), now: now)
                }
                await expectStorageError(.quotaExceeded) { try await storage.createInvitation(Self.invitation("more", at: now), now: now) }
                _ = try await storage.revokeInvitation(owner: "alice", suite: "family", id: "inv_c0", by: .owner, now: now)
                try await storage.createInvitation(Self.invitation("after-revoke", at: now), now: now)
                // Once they expired, more may be made.
                let later = now.addingTimeInterval(3601)
                try await storage.createInvitation(Self.invitation("later", at: later), now: later)
            }
        }

        @Test("removing an admin revokes the invitations it made that were waiting; the owner's stay", arguments: StorageBackend.allCases)
        func removedAdminsInvitations(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                try await storage.createInvitation(Self.invitation("admin", role: .admin, at: now), now: now)
                _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "admin"), account: "bob", now: now)
                try await storage.createInvitation(Self.invitation("by-bob", role: .read, by: "bob", at: now), now: now)
                try await storage.createInvitation(Self.invitation("by-alice", role: .read, at: now), now: now)
                #expect(try await storage.removeMember(owner: "alice", suite: "family", account: "bob"))
                let states = Dictionary(
                    uniqueKeysWithValues: try await storage.invitations(owner: "alice", suite: "family").map { ($0.id, $0.state(at: now)) }
                )
                #expect(states == ["inv_admin": .accepted, "inv_by-bob": .revoked, "inv_by-alice": .pending])
                await expectStorageError(.invitationExpired) {
                    _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "by-bob"), account: "carol", now: now)
                }
            }
        }

        @Test(
            "removing a member that was handed an encrypted suite's keys marks a key rotation due (the console's, the API's, a leave, a deleted account alike); a keyless member's removal does not; one admitted again leaves the mark",
            arguments: StorageBackend.allCases
        )
        func rotationDueAfterRemoval(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                let claim = InvitationClaim(memberKey: "bWVtYmVy", proof: "cHJvb2Y=")
                let admission = MemberAdmission(memberKey: claim.memberKey, epoch: 1, signature: "c2lnbmVk")
                func admit(_ id: String, _ account: String, keys: Bool = true) async throws {
                    try await storage.createInvitation(Self.invitation(id, at: now), now: now)
                    _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: id), account: account, claim: claim, now: now)
                    if keys {
                        _ = try await storage.handOverKeys(owner: "alice", suite: "family", id: "inv_\(id)", keys: "a2V5cw==", admission: admission)
                    }
                }
                try await admit("r1", "bob")
                try await admit("r2", "carol")
                try await admit("r3", "dave", keys: false)
                try await admit("r4", "erin")
                #expect(try await storage.rotationDue(owner: "alice", suite: "family") == nil)
                // Dave never got the keys: nothing is due.
                #expect(try await storage.removeMember(owner: "alice", suite: "family", account: "dave"))
                #expect(try await storage.rotationDue(owner: "alice", suite: "family") == nil)
                #expect(try await storage.removeMember(owner: "alice", suite: "family", account: "bob"))
                let due = try #require(try await storage.rotationDue(owner: "alice", suite: "family"))
                #expect(due.removed == ["bob"] && due.epoch == 0 && TypedJSONDate.parse(due.since) != nil)
                // Carol leaves, erin's account is deleted: both are added to the same mark.
                #expect(try await storage.removeMember(owner: "alice", suite: "family", account: "carol"))
                #expect(try await storage.deleteAccount("erin"))
                #expect(try await storage.rotationDue(owner: "alice", suite: "family")?.removed == ["bob", "carol", "erin"])
                #expect(try await storage.rotationDue(owner: "alice", suite: "other") == nil)
                // Bob invited again and handed the keys may hold them: he leaves the mark.
                try await admit("r5", "bob")
                #expect(try await storage.rotationDue(owner: "alice", suite: "family")?.removed == ["carol", "erin"])
                // The owner's account deleted: its marks go with its suites.
                #expect(try await storage.deleteAccount("alice"))
                #expect(try await storage.rotationDue(owner: "alice", suite: "family") == nil)
            }
        }

        @Test("deleting an account deletes its memberships and its suites' members and invitations", arguments: StorageBackend.allCases)
        func deletedAccount(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let now = Date()
                try await storage.createInvitation(Self.invitation("d1", at: now), now: now)
                try await storage.createInvitation(Self.invitation("d2", at: now), now: now)
                _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "d1"), account: "bob", now: now)
                _ = try await storage.acceptInvitation(lookup: StoredInvitation.lookup(id: "d2"), account: "carol", now: now)
                #expect(try await storage.deleteAccount("bob"))
                #expect(try await storage.memberships(account: "bob").isEmpty)
                #expect(try await storage.members(owner: "alice", suite: "family").map(\.account) == ["carol"])
                #expect(try await storage.deleteAccount("alice"))
                #expect(try await storage.memberships(account: "carol").isEmpty)
                #expect(try await storage.invitation(lookup: StoredInvitation.lookup(id: "d1")) == nil)
                #expect(try await storage.invitations(owner: "alice", suite: "family").isEmpty)
            }
        }
    }
}
