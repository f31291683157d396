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
        "a shared suite stays plain: a member's sealed push and key bags, the owner's sealed push while it has members, an invitation to an encrypted suite: 409, nothing stored"
    )
    func sharedSuitesStayPlain() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.token()
        let bob = try await fixture.token(account: "bob")
        try await fixture.test { client in
            #expect(try await Self.invite(client, token: alice, id: Self.id(1), role: .write).status == .ok)
            #expect(try await Self.accept(client, token: bob, id: Self.id(1)).status == .ok)
            let sealed = PushOp(
                keyID: String(repeating: "a", count: 32),
                sealed: SealedPayload(epoch: 1, box: Array(repeating: 7, count: 64)),
                deleted: false,
                hlc: API.hlc()
            )
            let memberPush = try await client.execute(
                uri: "/v1/suites/family/push?owner=alice",
                method: .post,
                headers: API.auth(bob),
                body: try API.push([sealed])
            )
            #expect(try API.error(memberPush).error == .suiteNotEncrypted)
            #expect(try await API.error(client.push("family", token: alice, API.push([sealed]))).error == .suiteNotEncrypted)
            let bags = try await client.execute(
                uri: "/v1/suites/family/key-bags?owner=alice",
                method: .put,
                headers: API.auth(bob),
                body: ByteBuffer(string: "{}")
            )
            #expect(try API.error(bags).error == .suiteNotEncrypted)
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/family/snapshot", token: alice))
            #expect(snapshot.headRev == 0)

            // An encrypted suite of alice's is not shared.
            #expect(try await client.push("sealed", token: alice, API.push([sealed])).status == .ok)
            let body = ByteBuffer(bytes: try JSONEncoder().encode(InvitationRequest(invitationID: Self.id(2), role: .read)))
            let invitation = try await client.execute(uri: "/v1/suites/sealed/invitations", method: .post, headers: API.auth(alice), body: body)
            #expect(try API.error(invitation).error == .suiteEncrypted)

            // An invitation made while a suite was empty joins nobody once the owner sealed it.
            let early = ByteBuffer(bytes: try JSONEncoder().encode(InvitationRequest(invitationID: Self.id(3), role: .read)))
            #expect(try await client.execute(uri: "/v1/suites/later/invitations", method: .post, headers: API.auth(alice), body: early).status == .ok)
            #expect(try await client.push("later", token: alice, API.push([sealed])).status == .ok)
            #expect(try await API.error(Self.accept(client, token: bob, id: Self.id(3))).error == .suiteEncrypted)
            #expect(try await API.error(client.get("/v1/suites/later/snapshot?owner=alice", token: bob)).error == .notAMember)
        }
    }

    @Test("account names: no control character, no space at either end (a list would print them as other lines or names)")
    func accountNames() {
        for name in ["mal\nana  owner", "esc\u{1B}[31m", " ", "ana ", " ana", "tab\t"] {
            #expect(Names.accountProblem(with: name) != nil, "\(name.debugDescription)")
        }
        for name in ["ana", "Ana Bell", "é😀", "<b>bob<b>"] { #expect(Names.accountProblem(with: name) == nil, "\(name)") }
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
