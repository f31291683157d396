import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

/// The sharing routes' rules, in-process: who may invite, revoke, list and remove whom; what a
/// member's token reaches (the owner's suite, with `?owner=`, and nothing else); and the refusals
/// of bad input, each with its code and nothing changed.
@Suite("Sharing routes")
struct SharingRouteTests {
    private static func invite(
        _ client: some TestClientProtocol,
        token: String,
        id: String,
        role: SuiteRole,
        owner: String? = nil,
        expiresIn: UInt64? = nil
    ) async throws -> TestResponse {
        let body = ByteBuffer(bytes: try JSONEncoder().encode(InvitationRequest(invitationID: id, role: role, expiresIn: expiresIn)))
        let query = owner.map { "?owner=\($0)" } ?? ""
        return try await client.execute(uri: "/v1/suites/family/invitations\(query)", method: .post, headers: API.auth(token), body: body)
    }

    private static func accept(_ client: some TestClientProtocol, token: String, id: String) async throws -> TestResponse {
        try await client.execute(uri: "/v1/invitations/\(id)/accept", method: .post, headers: API.auth(token))
    }

    private static func id(_ n: Int) -> String { String(format: "%032x", n) }

    @Test(
        "roles: a member reaches the owner's suite with ?owner= and nothing else; read members and non-admins are refused what their role does not allow"
    )
    func roles() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.token()
        let bob = try await fixture.token(account: "bob")
        let carol = try await fixture.token(account: "carol")
        let dave = try await fixture.token(account: "dave")
        let bobReadOnly = try await fixture.token(account: "bob", readOnly: true)
        try await fixture.test { client in
            #expect(try await client.push("family", token: alice, API.push([API.set("doorbell", "ding.caf")])).status == .ok)
            #expect(try await Self.invite(client, token: alice, id: Self.id(1), role: .admin).status == .ok)
            #expect(try await Self.invite(client, token: alice, id: Self.id(2), role: .read).status == .ok)
            // A read-only token does not join (it could not leave).
            #expect(try await API.error(Self.accept(client, token: bobReadOnly, id: Self.id(1))).error == .forbidden)
            #expect(try await Self.accept(client, token: bob, id: Self.id(1)).status == .ok)
            #expect(try await Self.accept(client, token: carol, id: Self.id(2)).status == .ok)

            // The owner's suite, through ?owner=; without it, bob's own (empty) suite of that name.
            let shared = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/family/snapshot?owner=alice", token: bob))
            #expect(shared.entries.map(\.key) == ["doorbell"])
            let own = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/family/snapshot", token: bob))
            #expect(own.entries.isEmpty)
            // Not shared with dave; another suite of alice's is not shared with bob.
            #expect(try await API.error(client.get("/v1/suites/family/snapshot?owner=alice", token: dave)).error == .notAMember)
            #expect(try await API.error(client.get("/v1/suites/other/snapshot?owner=alice", token: bob)).error == .notAMember)
            #expect(try await API.error(client.get("/v1/suites/family/snapshot?owner=a%00b", token: bob)).error == .malformed)
            // The suite's history in pages, as the snapshot: the owner's through ?owner=, nobody else's.
            let history = try API.decode(SuiteHistoryPage.self, try await client.get("/v1/suites/family/history?owner=alice", token: carol))
            #expect(history.history.map(\.key) == ["doorbell"] && history.next == nil)
            #expect(try API.decode(SuiteHistoryPage.self, try await client.get("/v1/suites/family/history", token: bob)).history.isEmpty)
            #expect(try await API.error(client.get("/v1/suites/family/history?owner=alice", token: dave)).error == .notAMember)
            #expect(try await API.error(client.get("/v1/suites/other/history?owner=alice", token: bob)).error == .notAMember)

            // carol reads, and may not push, invite, list invitations or remove.
            let push = try await client.execute(
                uri: "/v1/suites/family/push?owner=alice",
                method: .post,
                headers: API.auth(carol),
                body: try API.push([API.set("doorbell", "carol.caf")])
            )
            #expect(try push.status == .forbidden && API.error(push).error == .insufficientRole)
            #expect(try await API.error(Self.invite(client, token: carol, id: Self.id(3), role: .read, owner: "alice")).error == .insufficientRole)
            #expect(try await API.error(client.get("/v1/suites/family/invitations?owner=alice", token: carol)).error == .insufficientRole)
            let removal = try await client.execute(uri: "/v1/suites/family/members/bob?owner=alice", method: .delete, headers: API.auth(carol))
            #expect(try API.error(removal).error == .insufficientRole)

            // bob, an admin, invites read and write members, not admins; does not revoke the
            // owner's invitation of an admin; removes carol, not alice.
            #expect(try await Self.invite(client, token: bob, id: Self.id(4), role: .write, owner: "alice").status == .ok)
            #expect(try await API.error(Self.invite(client, token: bob, id: Self.id(5), role: .admin, owner: "alice")).error == .insufficientRole)
            #expect(try await Self.invite(client, token: alice, id: Self.id(6), role: .admin).status == .ok)
            let list = try API.decode(InvitationList.self, try await client.get("/v1/suites/family/invitations?owner=alice", token: bob))
            let adminInvitation = try #require(list.invitations.first { $0.role == .admin && $0.state == .pending })
            let revoke = try await client.execute(
                uri: "/v1/suites/family/invitations/\(adminInvitation.id)?owner=alice",
                method: .delete,
                headers: API.auth(bob)
            )
            #expect(try API.error(revoke).error == .insufficientRole)
            let ownerRemoval = try await client.execute(uri: "/v1/suites/family/members/alice?owner=alice", method: .delete, headers: API.auth(bob))
            #expect(try ownerRemoval.status == .conflict && API.error(ownerRemoval).error == .memberConflict)
            let removed = try await client.execute(uri: "/v1/suites/family/members/carol?owner=alice", method: .delete, headers: API.auth(bob))
            #expect(try API.decode(MemberRemoved.self, removed) == MemberRemoved(owner: "alice", suite: "family", account: "carol"))
            #expect(try await API.error(client.get("/v1/suites/family/snapshot?owner=alice", token: carol)).error == .notAMember)
            #expect(try await API.error(client.get("/v1/suites/family/history?owner=alice", token: carol)).error == .notAMember)

            // Read and write members see the list without devices; the owner and admins see each
            // one's devices too. bob's /v1/suites lists alice's suite as shared; nobody's
            // /v1/devices lists another account's devices.
            #expect(try await Self.accept(client, token: dave, id: Self.id(4)).status == .ok)
            let forDave = try API.decode(MemberList.self, try await client.get("/v1/suites/family/members?owner=alice", token: dave))
            #expect(forDave.account == "dave" && forDave.you == .write && forDave.members.map(\.account) == ["alice", "bob", "dave"])
            #expect(forDave.members.allSatisfy { $0.devices == nil })
            let forBob = try API.decode(MemberList.self, try await client.get("/v1/suites/family/members?owner=alice", token: bob))
            #expect(forBob.you == .admin && forBob.members.allSatisfy { $0.devices != nil })
            let forAlice = try API.decode(MemberList.self, try await client.get("/v1/suites/family/members", token: alice))
            #expect(forAlice.you == .owner && forAlice.members.allSatisfy { $0.devices != nil })
            let suites = try API.decode(SuiteList.self, try await client.get("/v1/suites", token: bob))
            #expect(suites.suites == [SuiteList.Suite(name: "family", headRev: 1, keys: 1, owner: "alice", role: .admin)])
            var headers = API.auth(bob)
            headers[.init(DeviceHeader.name)!] = "77"
            #expect(try await client.execute(uri: "/v1/suites/family/changes?owner=alice", method: .get, headers: headers).status == .ok)
            // The server records a device just after the request that saw it.
            #expect(
                try await eventually {
                    let list = try API.decode(MemberList.self, try await client.get("/v1/suites/family/members", token: alice))
                    return list.members.first { $0.account == "bob" }?.devices?.map(\.deviceID) == [77]
                }
            )
            let bobsDevices = try API.decode(DeviceList.self, try await client.get("/v1/devices", token: bob))
            #expect(bobsDevices.devices.map(\.deviceID) == [77] && bobsDevices.devices.first?.suites == ["alice/family"])
            let alicesDevices = try API.decode(DeviceList.self, try await client.get("/v1/devices", token: alice))
            #expect(!alicesDevices.devices.contains { $0.deviceID == 77 })
        }
    }

    @Test(
        "an encrypted shared suite: accepting sends a member key; only the owner invites, removes, rotates and hands the keys over, once, for the claimed key; a member's sealed push is taken"
    )
    func encryptedSharedSuite() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.token()
        let bob = try await fixture.token(account: "bob")
        let carol = try await fixture.token(account: "carol")
        try await fixture.test { client in
            let sealed = PushOp(
                keyID: String(repeating: "a", count: 32),
                sealed: SealedPayload(epoch: 1, box: Array(repeating: 7, count: 64)),
                deleted: false,
                hlc: API.hlc()
            )
            #expect(try await client.push("family", token: alice, API.push([sealed])).status == .ok)
            let made = try API.decode(InvitationInfo.self, try await Self.invite(client, token: alice, id: Self.id(1), role: .admin))
            #expect(made.encrypted == true)
            let described = try API.decode(InvitationInfo.self, try await client.get("/v1/invitations/\(Self.id(1))", token: bob))
            #expect(described.encrypted == true && described.keys == nil)

            // Accepting sends a member key with its proof (the owner's device checks the proof).
            #expect(try await API.error(Self.accept(client, token: bob, id: Self.id(1))).error == .malformed)
            let key = Data(repeating: 1, count: 32).base64EncodedString()
            let claim = InvitationClaim(memberKey: key, proof: Data(repeating: 2, count: 32).base64EncodedString())
            func accept(_ token: String, id: String, _ claim: InvitationClaim) async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/invitations/\(id)/accept",
                    method: .post,
                    headers: API.auth(token),
                    body: ByteBuffer(bytes: try JSONEncoder().encode(claim))
                )
            }
            #expect(try await accept(bob, id: Self.id(1), claim).status == .ok)
            let listed = try API.decode(InvitationList.self, try await client.get("/v1/suites/family/invitations", token: alice))
            #expect(listed.invitations.first?.claim == claim)
            #expect(try await Self.invite(client, token: alice, id: Self.id(3), role: .read).status == .ok)
            let carolClaim = InvitationClaim(memberKey: Data(repeating: 3, count: 32).base64EncodedString(), proof: key)
            #expect(try await accept(carol, id: Self.id(3), carolClaim).status == .ok)

            // Until the owner's device hands over the keys, a member (or whoever accepted with the
            // id alone) reads nothing and writes nothing.
            #expect(try await API.error(client.get("/v1/suites/family/snapshot?owner=alice", token: carol)).error == .notAMember)
            #expect(try await API.error(client.get("/v1/suites/family/members?owner=alice", token: bob)).error == .notAMember)

            // The keys are handed over by the owner, for the claimed key, once.
            let signature = Data(repeating: 4, count: 64).base64EncodedString()
            let sealedKeys = Data(repeating: 5, count: 80).base64EncodedString()
            func handOver(_ token: String, owner: String? = nil, memberKey: String) async throws -> TestResponse {
                let body = InvitationKeys(keys: sealedKeys, admission: MemberAdmission(memberKey: memberKey, epoch: 1, signature: signature))
                return try await client.execute(
                    uri: "/v1/suites/family/invitations/\(made.id)/keys" + (owner.map { "?owner=\($0)" } ?? ""),
                    method: .put,
                    headers: API.auth(token),
                    body: ByteBuffer(bytes: try JSONEncoder().encode(body))
                )
            }
            #expect(try await API.error(handOver(bob, owner: "alice", memberKey: key)).error == .insufficientRole)
            #expect(try await API.error(handOver(alice, memberKey: carolClaim.memberKey)).error == .malformed)
            #expect(try await handOver(alice, memberKey: key).status == .ok)
            #expect(try await API.error(handOver(alice, memberKey: key)).error == .invitationUsed)
            let handed = try API.decode(InvitationInfo.self, try await client.get("/v1/invitations/\(Self.id(1))", token: bob))
            #expect(handed.keys == sealedKeys)
            #expect(try await client.get("/v1/suites/family/snapshot?owner=alice", token: bob).status == .ok)
            let members = try API.decode(MemberList.self, try await client.get("/v1/suites/family/members", token: alice))
            #expect(members.members.first { $0.account == "bob" }?.admission?.memberKey == key)
            #expect(members.members.first { $0.account == "carol" }?.admission == nil)

            // A member seals as the owner does; only the owner's devices rotate, and the owner's bag
            // of a suite with members carries their part.
            let memberPush = try await client.execute(
                uri: "/v1/suites/family/push?owner=alice",
                method: .post,
                headers: API.auth(bob),
                body: try API.push([PushOp(keyID: String(repeating: "b", count: 32), sealed: sealed.sealed!, deleted: false, hlc: API.hlc())])
            )
            #expect(memberPush.status == .ok)
            let unsharedBag = SignedKeyBag(bundle: String(repeating: "A", count: 64), verifyKey: key, signature: key)
            let bag = ByteBuffer(bytes: try JSONEncoder().encode(unsharedBag))
            let bobsBag = try await client.execute(uri: "/v1/suites/family/key-bags/2?owner=alice", method: .put, headers: API.auth(bob), body: bag)
            #expect(try API.error(bobsBag).error == .insufficientRole)
            let unshared = try await client.execute(uri: "/v1/suites/family/key-bags/2", method: .put, headers: API.auth(alice), body: bag)
            #expect(try API.error(unshared).error == .malformed)

            // An admin neither invites to nor removes from an encrypted suite; a waiting member may leave.
            #expect(try await API.error(Self.invite(client, token: bob, id: Self.id(2), role: .read, owner: "alice")).error == .insufficientRole)
            let removal = try await client.execute(uri: "/v1/suites/family/members/carol?owner=alice", method: .delete, headers: API.auth(bob))
            #expect(try API.error(removal).error == .insufficientRole)
            let left = try await client.execute(uri: "/v1/suites/family/members/carol?owner=alice", method: .delete, headers: API.auth(carol))
            #expect(left.status == .ok)
        }
    }

    @Test("account names: no control character, no space at either end (a list would print them as other lines or names)")
    func accountNames() {
        for name in ["mal\nana  owner", "esc\u{1B}[31m", " ", "ana ", " ana", "tab\t"] {
            #expect(NameKind.account.problem(with: name) != nil, "\(name.debugDescription)")
        }
        for name in ["ana", "Ana Bell", "é😀", "<b>bob<b>"] { #expect(NameKind.account.problem(with: name) == nil, "\(name)") }
    }

    @Test("bad invitations: an id that is no id, a role no invitation gives, a lifetime out of range, a code never made; each a 4xx and nothing made")
    func badInvitations() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.token()
        let bob = try await fixture.token(account: "bob")
        try await fixture.test { client in
            #expect(try await API.error(Self.invite(client, token: alice, id: "XYZ", role: .read)).error == .malformed)
            #expect(try await API.error(Self.invite(client, token: alice, id: Self.id(1), role: .owner)).error == .malformed)
            for seconds: UInt64 in [0, 59, 30 * 86_400 + 1] {
                #expect(try await API.error(Self.invite(client, token: alice, id: Self.id(1), role: .read, expiresIn: seconds)).error == .malformed)
            }
            #expect(try await API.error(Self.accept(client, token: bob, id: Self.id(9))).error == .invitationNotFound)
            #expect(try await API.error(client.get("/v1/invitations/\(Self.id(9))", token: bob)).error == .invitationNotFound)
            #expect(try await API.error(Self.accept(client, token: bob, id: "not-an-id")).error == .malformed)
            let list = try API.decode(InvitationList.self, try await client.get("/v1/suites/family/invitations", token: alice))
            #expect(list.invitations.isEmpty)
            let unauthenticated = try await client.execute(uri: "/v1/invitations/\(Self.id(9))/accept", method: .post)
            #expect(unauthenticated.status == .unauthorized)
        }
    }
}
