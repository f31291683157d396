import Foundation
import GroupDefaultsWire
import Hummingbird

/// Sharing a suite with other accounts: invitations (`/v1/suites/{suite}/invitations`, and
/// `/v1/invitations/{invitation_id}` for the invited), members (`/v1/suites/{suite}/members`).
/// Who may do what is `SharingRule`'s; the storage applies an invitation's own rules in its
/// transaction. The server sees an invitation id derived from the code, never the code. Each
/// change of who shares a suite is in the audit log (by `token tok_…`, from the client's address).
struct SharingRoutes: Sendable {
    let storage: any SharingStore & DeviceStore & AuditStore & SyncStore & KeyBagStore

    /// `POST /v1/suites/{suite}/invitations`: the owner or an admin invites (`SharingRule.mayInvite`).
    func invite(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .share, sharing: storage)
        let body = try await JSONBody.decode(InvitationRequest.self, from: request, limit: 4096)
        try Self.checkID(body.invitationID)
        let encrypted = try await isEncrypted(owner: access.owner, suite: access.suite)
        try SharingRule.mayInvite(access.role, giving: body.role, encrypted: encrypted)
        let lifetime = body.expiresIn ?? InvitationRequest.defaultLifetime
        guard InvitationRequest.lifetimes.contains(lifetime) else {
            throw APIError.malformed("expires_in must be 60 seconds to 30 days (\(InvitationRequest.lifetimes.upperBound) seconds)")
        }
        if let mac = body.offerMAC, !Self.isKey(mac) { throw APIError.malformed("offer_mac is 32 bytes, in base64") }
        let now = Date()
        var invitation = StoredInvitation(
            lookup: StoredInvitation.lookup(id: body.invitationID),
            id: StoredInvitation.newPublicID(),
            owner: access.owner,
            suite: access.suite,
            role: body.role,
            createdBy: access.token.account,
            created: now,
            lifetime: TimeInterval(lifetime)
        )
        invitation.offerMAC = body.offerMAC
        try await storage.createInvitation(invitation, now: now)
        var info = invitation.info(at: now)
        info.encrypted = encrypted
        try await audit(
            .invitationCreate,
            context,
            account: access.owner,
            target: "\(invitation.id) (\(body.role.rawValue)) of suite \(access.suite)",
            invitation: AuditInvitation(id: invitation.id, suite: access.suite, role: body.role)
        )
        return try JSONBody.response(info)
    }

    /// `GET /v1/suites/{suite}/invitations`: the suite's invitations, for the owner and admins.
    func invitations(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .read, sharing: storage)
        try SharingRule.mayManageInvitations(access.role)
        let now = Date()
        let list = try await storage.invitations(owner: access.owner, suite: access.suite)
        let encrypted = try await isEncrypted(owner: access.owner, suite: access.suite)
        return try JSONBody.response(
            InvitationList(
                invitations: list.map {
                    var info = $0.info(at: now)
                    info.encrypted = encrypted
                    return info
                }
            )
        )
    }

    /// `DELETE /v1/suites/{suite}/invitations/{invitation}`: revokes one by its public id.
    func revoke(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .share, sharing: storage)
        try SharingRule.mayManageInvitations(access.role)
        let id = context.parameters.get("invitation") ?? ""
        let now = Date()
        let revoked = try await storage.revokeInvitation(owner: access.owner, suite: access.suite, id: id, by: access.role, now: now)
        try await audit(
            .invitationRevoke,
            context,
            account: access.owner,
            target: "\(revoked.id) (\(revoked.role.rawValue)) of suite \(access.suite)",
            invitation: AuditInvitation(id: revoked.id, suite: access.suite, role: revoked.role)
        )
        return try JSONBody.response(revoked.info(at: now))
    }

    /// `GET /v1/invitations/{invitation_id}`: what an invitation offers (owner, suite, role) and
    /// where it stands, for a token holding its id, so that a device can check before accepting.
    /// For an end-to-end encrypted suite it says so (`encrypted`), and, once the owner's device
    /// handed them over, carries the suite's keys sealed for the accepting device (`keys`).
    /// A device joining again with its copy of the suite names the owner's incarnation it
    /// remembers: a new account of the owner's name is refused (410 `account_deleted`).
    func describe(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let invitation = try await invitation(context)
        try await context.accountIncarnation?.check(owner: invitation.owner)
        var info = invitation.info(at: Date())
        info.encrypted = try await isEncrypted(owner: invitation.owner, suite: invitation.suite)
        return try JSONBody.response(info)
    }

    /// `POST /v1/invitations/{invitation_id}/accept`: makes the token's account a member. The token
    /// must cover the suite's name (as its owner names it), or it could not use it afterwards. For
    /// an end-to-end encrypted suite the body is the joining device's claim (`InvitationClaim`),
    /// kept with the invitation for the owner's device, which checks its proof and hands the keys.
    func accept(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let token = context.token
        let invitation = try await invitation(context)
        try await context.accountIncarnation?.check(owner: invitation.owner)
        guard token.covers(invitation.suite) else {
            throw APIError.forbidden("the token does not cover the suite '\(invitation.suite)': accept with a token whose suites include it")
        }
        guard !token.readOnly else {
            throw APIError.forbidden("the token is read-only: accept with a token that may write (a read-only token cannot leave the suite either)")
        }
        var claim: InvitationClaim?
        if try await isEncrypted(owner: invitation.owner, suite: invitation.suite) {
            let body = try await JSONBody.decode(InvitationClaim.self, from: request, limit: 4096)
            guard Self.isKey(body.memberKey), Self.isKey(body.proof) else {
                throw APIError.malformed("member_key and proof are 32 bytes each, in base64")
            }
            claim = body
        }
        let member = try await storage.acceptInvitation(lookup: invitation.lookup, account: token.account, claim: claim, now: Date())
        try await audit(
            .memberAdd,
            context,
            account: member.owner,
            target: "member \(member.account) (\(member.role.rawValue)) of suite \(member.suite), by \(invitation.id)"
        )
        return try JSONBody.response(Membership(owner: member.owner, suite: member.suite, role: member.role, account: member.account))
    }

    /// `PUT /v1/suites/{suite}/invitations/{invitation}/keys`: the owner's device hands an
    /// encrypted suite's keys, sealed, to the device that accepted the invitation, and records the
    /// member's admission (`InvitationKeys`), once.
    func handOverKeys(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .share, sharing: storage)
        guard access.role == .owner else {
            throw APIError(.insufficientRole, "only the owner's devices hand over an end-to-end encrypted suite's keys")
        }
        let id = context.parameters.get("invitation") ?? ""
        let body = try await JSONBody.decode(InvitationKeys.self, from: request, limit: PairingRoutes.bodyLimit)
        guard let sealed = Data(base64Encoded: body.keys), sealed.count > 32, Self.isKey(body.admission.memberKey),
            Data(base64Encoded: body.admission.signature)?.count == 64
        else {
            throw APIError.malformed(
                "keys are base64 of the encapsulated key and the sealed keys; an admission's member key 32 bytes, its signature 64"
            )
        }
        let invitation = try await storage.handOverKeys(
            owner: access.owner,
            suite: access.suite,
            id: id,
            keys: body.keys,
            admission: body.admission
        )
        return try JSONBody.response(invitation.info(at: Date()))
    }

    /// `GET /v1/suites/{suite}/members`: the owner, then the members; the owner and admins also
    /// see each one's devices that used the suite.
    func members(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .read, sharing: storage)
        let members = try await storage.members(owner: access.owner, suite: access.suite)
        let accounts =
            [(access.owner, SuiteRole.owner, nil as Date?, nil as MemberAdmission?)]
            + members.map { ($0.account, $0.role, $0.added as Date?, $0.admission) }
        var list: [MemberList.Member] = []
        for (account, role, added, admission) in accounts {
            var devices: [DeviceInfo]?
            if access.role.mayAdminister {
                let name = SharingRule.deviceSuiteName(owner: access.owner, suite: access.suite, account: account)
                devices = try await storage.devices(account: account)
                    .filter { $0.suites.contains { $0.isSameName(as: name) } }
                    .map { device in
                        device.info(
                            current: device.tokenID == access.token.id && device.deviceID == context.deviceID,
                            unverified: false,
                            visibleSuites: { $0.isSameName(as: name) }
                        )
                    }
            }
            list.append(
                MemberList.Member(account: account, role: role, added: added.flatMap(TypedJSONDate.format), devices: devices, admission: admission)
            )
        }
        let pinned = try await storage.pinnedKeys(owner: access.owner, suite: access.suite).map(\.key)
        return try JSONBody.response(
            MemberList(owner: access.owner, suite: access.suite, account: access.token.account, you: access.role, members: list, pinned: pinned)
        )
    }

    /// `DELETE /v1/suites/{suite}/members/{account}`: the owner or an admin removes a member, or a
    /// member leaves (`SharingRule.mayRemove`). The member's devices lose access at once: their
    /// next request is refused, and their open event streams end. If it held an end-to-end
    /// encrypted suite's keys, a rotation is due (`KeyRotationDue`), and the answer says so.
    func remove(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .share, sharing: storage)
        guard let target = (context.parameters.get("account") ?? "").removingPercentEncoding else {
            throw APIError.malformed("the account is not valid percent-encoding")
        }
        if let problem = NameKind.account.problem(withStored: target) { throw APIError.malformed(problem) }
        let member = target.isSameName(as: access.owner) ? nil : try await storage.member(owner: access.owner, suite: access.suite, account: target)
        try SharingRule.mayRemove(
            member,
            target: target,
            owner: access.owner,
            by: access.token.account,
            role: access.role,
            encrypted: try await isEncrypted(owner: access.owner, suite: access.suite)
        )
        guard try await storage.removeMember(owner: access.owner, suite: access.suite, account: target) else {
            throw APIError.notFound("\(target) is not a member of the suite")
        }
        try await audit(
            .memberRemove,
            context,
            account: access.owner,
            target: "member \(target) of suite \(access.suite)" + (target.isSameName(as: access.token.account) ? " (left)" : "")
        )
        // A member whose device held an encrypted suite's keys: the owner's devices rotate next.
        let due = member?.admission == nil ? nil : try await storage.rotationDue(owner: access.owner, suite: access.suite)
        return try JSONBody.response(MemberRemoved(owner: access.owner, suite: access.suite, account: target, rotationDue: due))
    }

    /// `GET /v1/suites/{suite}/pins`: the suite's pinned keys (`PinRule`), for any member.
    func pins(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .read, sharing: storage)
        let pins = try await storage.pinnedKeys(owner: access.owner, suite: access.suite)
        return try JSONBody.response(StoredPin.list(pins, owner: access.owner, suite: access.suite))
    }

    /// `POST /v1/suites/{suite}/pins`: the owner or an admin pins and unpins keys (`PinChange`); a
    /// member without the role is refused (403 `insufficient_role`). Each key changed is audited.
    func changePins(_ request: Request, _ context: TokenRequestContext) async throws -> Response {
        let access = try await SuiteAccess.check(request, context, need: .share, sharing: storage)
        let body = try await JSONBody.decode(PinChange.self, from: request, limit: 256 * 1024)
        guard access.role.mayAdminister else {
            throw APIError(
                .insufficientRole,
                "only the owner and admins of \(access.owner)'s suite '\(access.suite)' pin or unpin its keys; this account is a \(access.role.rawValue) member"
            )
        }
        try PinRule.check(body, encrypted: try await isEncrypted(owner: access.owner, suite: access.suite))
        let before = Set(try await storage.pinnedKeys(owner: access.owner, suite: access.suite).map(\.key.exact))
        let pins = try await storage.changePins(owner: access.owner, suite: access.suite, body)
        let after = Set(pins.map(\.key.exact))
        for key in after.subtracting(before).sorted() {
            try await audit(.keyPin, context, account: access.owner, target: "key \(PinRule.shown(key.text)) of suite \(access.suite)")
        }
        for key in before.subtracting(after).sorted() {
            try await audit(.keyUnpin, context, account: access.owner, target: "key \(PinRule.shown(key.text)) of suite \(access.suite)")
        }
        return try JSONBody.response(StoredPin.list(pins, owner: access.owner, suite: access.suite))
    }

    /// Whether the suite is end-to-end encrypted: it has key bags (an anchor), or a sealed entry.
    private func isEncrypted(owner: String, suite: String) async throws -> Bool {
        if try await !storage.keyBags(account: owner, suite: suite).isEmpty { return true }
        return try await storage.snapshot(account: owner, suite: suite, after: nil, limit: 1).entries.first?.sealed != nil
    }

    /// Whether `text` is 32 bytes in base64 (a public key, a proof).
    private static func isKey(_ text: String) -> Bool { Data(base64Encoded: text)?.count == 32 }

    /// Records a change of who shares a suite, by the request's token, from its address; an
    /// invitation made or revoked names it (`AuditRepeats` counts those for read or write alike).
    private func audit(
        _ act: AuditRecord.Act,
        _ context: TokenRequestContext,
        account: String,
        target: String,
        invitation: AuditInvitation? = nil
    ) async throws {
        try await storage.appendAudit(
            AuditRecord(
                actor: "token \(context.token.id)",
                act: act,
                account: account,
                target: target,
                source: context.clientAddress ?? "unknown address",
                invitation: invitation
            )
        )
    }

    /// The invitation of the path, by the id derived from its code, if the token's account may
    /// read it (`StoredInvitation.isReadable`: a removed member reads none of the suite's).
    private func invitation(_ context: TokenRequestContext) async throws -> StoredInvitation {
        let id = context.parameters.get("invitation") ?? ""
        try Self.checkID(id)
        guard let invitation = try await storage.invitation(lookup: StoredInvitation.lookup(id: id)) else { throw Self.notFound }
        let account = context.token.account
        let member = try await storage.member(owner: invitation.owner, suite: invitation.suite, account: account)
        guard invitation.isReadable(by: account, member: member) else { throw Self.notFound }
        return invitation
    }

    /// An invitation id is 32 lowercase hex digits, as a pairing id is.
    private static func checkID(_ id: String) throws {
        try PairingRoutes.checkID(id, what: "an invitation id")
    }

    /// The same answer for a code never made or mistyped: it reveals nothing.
    private static let notFound = APIError(.invitationNotFound, "no invitation has this code: check it, or ask for a new one")
}
