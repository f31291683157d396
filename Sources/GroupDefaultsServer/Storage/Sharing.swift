package import Foundation
package import GroupDefaultsWire

/// One account's membership of another account's suite, as storage keeps it.
package struct StoredMember: Sendable, Hashable, Codable {
    /// The account that owns the suite (its data, its quotas).
    package var owner: String
    package var suite: String
    /// The member.
    package var account: String
    /// `read`, `write` or `admin` (never `owner`).
    package var role: SuiteRole
    /// When it accepted its invitation.
    package var added: Date
    /// The account whose invitation it accepted.
    package var invitedBy: String
    /// In an end-to-end encrypted suite, its member key as the owner key admitted it.
    package var admission: MemberAdmission?
    /// True from accepting an invitation to an end-to-end encrypted suite until the owner's device
    /// hands over the keys (`StoredInvitation.handOver`): such a member may only leave, since the
    /// server cannot tell it from someone who learned the invitation's id but not its code.
    package var awaitingKeys: Bool?

    package init(owner: String, suite: String, account: String, role: SuiteRole, added: Date, invitedBy: String) {
        self.owner = owner
        self.suite = suite
        self.account = account
        self.role = role
        self.added = added
        self.invitedBy = invitedBy
    }
}

/// An invitation as storage keeps it: filed under the SHA-256 of its id (`lookup`), so that the
/// store holds neither the code nor what accepts it; `id` is its public name, for listing and
/// revoking. The rules of its life (accepted once, before it expires, unless revoked) are here,
/// once; backends apply them inside their transaction.
package struct StoredInvitation: Sendable, Hashable, Codable {
    /// SHA-256 of the invitation id, lowercase hex.
    package var lookup: String
    /// Its public name: `inv_` and 12 hex digits of random.
    package var id: String
    package var owner: String
    package var suite: String
    package var role: SuiteRole
    /// The account that made it (the owner or an admin).
    package var createdBy: String
    package var created: Date
    package var expires: Date
    package var acceptedBy: String?
    package var accepted: Date?
    package var revoked: Date?
    /// For an end-to-end encrypted suite: the accepting device's member key and proof, then the
    /// suite's keys sealed to it by the owner's device (opaque here).
    package var claim: InvitationClaim?
    package var keys: String?
    /// The inviting device's authentication of what it offers (opaque here).
    package var offerMAC: String?

    /// How many invitations one suite may have waiting: a family invites a few people at a time,
    /// and a stolen token cannot fill the store with them.
    package static let maximumPending = 20
    /// How long an ended invitation is kept (listed, and answering `invitation_used` or
    /// `invitation_expired` rather than `invitation_not_found`).
    package static let keptAfterEnd: TimeInterval = 30 * 24 * 3600

    package init(lookup: String, id: String, owner: String, suite: String, role: SuiteRole, createdBy: String, created: Date, lifetime: TimeInterval)
    {
        self.lookup = lookup
        self.id = id
        self.owner = owner
        self.suite = suite
        self.role = role
        self.createdBy = createdBy
        self.created = created
        self.expires = created.addingTimeInterval(lifetime)
    }

    /// The lookup of an invitation id: its SHA-256, lowercase hex.
    package static func lookup(id: String) -> String { Tokens.hash(id) }

    /// A new public name.
    package static func newPublicID() -> String {
        "inv_" + Hex.string((0..<6).map { _ in UInt8.random(in: 0...255) })
    }

    /// Where it stands at `now`.
    package func state(at now: Date) -> InvitationInfo.State {
        if acceptedBy != nil { return .accepted }
        if revoked != nil { return .revoked }
        return now >= expires ? .expired : .pending
    }

    /// When it stopped (or will stop) working.
    package var ended: Date { accepted ?? revoked ?? expires }

    /// Whether it is still kept at `now` (`keptAfterEnd`).
    package func isKept(at now: Date) -> Bool { now < ended.addingTimeInterval(Self.keptAfterEnd) }

    /// Whether `account` (whose membership of the suite is `member`, if any) may read it
    /// (`GET /v1/invitations/{id}`) or accept it: the owner and the suite's members every
    /// invitation of it; an account that is neither only one that it neither made nor used (a
    /// code it was given: the code is the credential). So a removed member reads none of its past
    /// invitations, those it made (as an admin) or used to join; to it they are as if there were
    /// none (`invitation_not_found`).
    package func isReadable(by account: String, member: StoredMember?) -> Bool {
        if account.isSameName(as: owner) || member?.account.isSameName(as: account) == true { return true }
        return !createdBy.isSameName(as: account) && acceptedBy?.isSameName(as: account) != true
    }

    /// How many ended invitations (used, revoked, expired) one suite keeps at most: the newest,
    /// by when they ended. Each new invitation drops the ones beyond (and those older than
    /// `keptAfterEnd`), so that a token inviting and revoking in a loop cannot pile them up.
    package static let maximumEnded = 100

    /// Of a suite's `invitations`, the lookups of the ended ones to drop at `now`: those no longer
    /// kept, and those beyond the newest `maximumEnded`.
    package static func endedToDrop(_ invitations: [StoredInvitation], at now: Date) -> [String] {
        let ended = invitations.filter { $0.state(at: now) != .pending }.sorted { ($0.ended, $0.lookup) > ($1.ended, $1.lookup) }
        return ended.enumerated().filter { index, invitation in index >= maximumEnded || !invitation.isKept(at: now) }.map(\.element.lookup)
    }

    /// The refusal of a new invitation beyond `maximumPending` (a cap, not a rate: waiting a
    /// second would not help).
    package static func checkCount(_ pending: Int) throws(SyncStorageError) {
        guard pending < maximumPending else {
            throw SyncStorageError(
                .quotaExceeded,
                "the suite has \(pending) invitations waiting (at most \(maximumPending)): revoke some, or wait until they are used or expire",
                limit: maximumPending
            )
        }
    }

    /// Accepts it for `account`, which `existing` says is or is not yet a member (`SharingRule.join`
    /// decides the rest): once, before it expires, unless revoked.
    package mutating func accept(
        by account: String,
        existing: StoredMember?,
        claim: InvitationClaim? = nil,
        now: Date
    ) throws(SyncStorageError) -> StoredMember {
        switch state(at: now) {
        case .accepted:
            throw SyncStorageError(.invitationUsed, "the invitation was already used: each invitation adds one account; ask for a new one")
        case .revoked:
            throw SyncStorageError(.invitationExpired, "the invitation was revoked: ask for a new one")
        case .expired:
            throw SyncStorageError(.invitationExpired, "the invitation expired: ask for a new one")
        case .pending: break
        }
        var member = try SharingRule.join(
            owner: owner,
            suite: suite,
            account: account,
            role: role,
            existing: existing,
            invitedBy: createdBy,
            now: now
        )
        if claim != nil { member.awaitingKeys = true }
        acceptedBy = account
        accepted = now
        self.claim = claim
        return member
    }

    /// Takes the suite's keys sealed for the device that accepted it (an encrypted suite), once,
    /// and admits its member key into `member`, the accepting account's record.
    package mutating func handOver(keys: String, admission: MemberAdmission, to member: inout StoredMember?) throws(SyncStorageError) {
        guard let acceptedBy, let claim else {
            throw SyncStorageError(.invitationNotFound, "the invitation was not accepted with a member key: there is nothing to hand over")
        }
        guard self.keys == nil else { throw SyncStorageError(.invitationUsed, "the suite's keys were handed over already") }
        guard var found = member, found.account.isSameName(as: acceptedBy) else {
            throw SyncStorageError(.notAMember, "\(acceptedBy) is no longer a member of the suite: the keys were not handed over")
        }
        guard admission.memberKey == claim.memberKey else {
            throw SyncStorageError(.malformed, "the admission is of another member key than the one the invitation was accepted with")
        }
        self.keys = keys
        found.admission = admission
        found.awaitingKeys = nil
        member = found
    }

    /// Revokes it for an account of `role` (`SharingRule.mayRevoke`): nobody can accept it
    /// afterwards. An invitation already accepted, revoked or expired is left as it is
    /// (`invitationUsed`, `invitationExpired`).
    package mutating func revoke(by role: SuiteRole, now: Date) throws(SyncStorageError) {
        try SharingRule.mayRevoke(self, by: role)
        switch state(at: now) {
        case .accepted: throw SyncStorageError(.invitationUsed, "the invitation was already used: remove the member instead")
        case .revoked, .expired: throw SyncStorageError(.invitationExpired, "the invitation has already ended")
        case .pending: revoked = now
        }
    }

    /// It as `/v1` describes it.
    package func info(at now: Date) -> InvitationInfo {
        var info = InvitationInfo(
            id: id,
            owner: owner,
            suite: suite,
            role: role,
            createdBy: createdBy,
            created: TypedJSONDate.format(created) ?? "",
            expires: TypedJSONDate.format(expires) ?? "",
            state: state(at: now),
            acceptedBy: acceptedBy
        )
        info.claim = claim
        info.keys = keys
        info.offerMAC = offerMAC
        return info
    }
}

/// When removing a member makes a key rotation of an end-to-end encrypted suite due, and what
/// ends it: the one rule both backends apply inside their transactions (`removeMember`,
/// `handOverKeys`, `putKeyBag`). Kept with the suite's members: it is authority, not data.
extension KeyRotationDue {
    /// The mark after `member` is removed from a suite at key epoch `epoch`, given the one kept
    /// (`existing`): a member whose device was handed the keys (its admission) is added; one that
    /// never got them (still awaiting them, or a plain suite's member) changes nothing.
    package static func after(removing member: StoredMember, epoch: UInt32, existing: KeyRotationDue?, now: Date) -> KeyRotationDue? {
        guard member.admission != nil else { return existing }
        var due = existing ?? KeyRotationDue(epoch: epoch, removed: [], since: TypedJSONDate.format(now) ?? "")
        if !due.removed.contains(where: { $0.isSameName(as: member.account) }) { due.removed.append(member.account) }
        return due
    }

    /// The mark once `account` is admitted again (its keys handed over after a new invitation): it
    /// may hold the key now; nil when nobody else is left.
    package func admitting(_ account: String) -> KeyRotationDue? {
        var due = self
        due.removed.removeAll { $0.isSameName(as: account) }
        return due.removed.isEmpty ? nil : due
    }

    /// Whether storing `bag` as the key bag of `bagEpoch` ends it: a later epoch than the removal's,
    /// whose shared part is sealed to none of the removed accounts.
    package func isEnded(by bag: SignedKeyBag, epoch bagEpoch: UInt32) -> Bool {
        guard bagEpoch > epoch else { return false }
        let sealedTo = bag.shared?.accounts ?? []
        return !removed.contains { account in sealedTo.contains { $0.isSameName(as: account) } }
    }
}

/// The rules of sharing, once: who may do what to a shared suite, invite whom, and remove whom.
/// Routes and backends call these; none decides on its own.
package enum SharingRule {
    /// The role `account` has in `owner`'s suite, given its membership record: `owner` for the
    /// owner's own account, the record's role for a member, nil for anyone else.
    package static func role(of account: String, owner: String, member: StoredMember?) -> SuiteRole? {
        if account.isSameName(as: owner) { return .owner }
        guard let member, member.account.isSameName(as: account), member.owner.isSameName(as: owner) else { return nil }
        return member.role
    }

    /// Whether `inviter` (its role) may make an invitation giving `role`: the owner any member's
    /// role, an admin `read` and `write`.
    /// In an end-to-end `encrypted` suite only the owner invites: the owner's devices alone hold
    /// the owner key that vouches for a member's key.
    package static func mayInvite(_ inviter: SuiteRole, giving role: SuiteRole, encrypted: Bool = false) throws(SyncStorageError) {
        guard role != .owner else { throw SyncStorageError(.malformed, "an invitation gives read, write or admin; a suite has one owner") }
        if encrypted, inviter != .owner {
            throw SyncStorageError(
                .insufficientRole,
                "only the owner invites to an end-to-end encrypted suite: its devices alone hold the key that vouches for a member's key"
            )
        }
        guard inviter.mayAdminister else {
            throw SyncStorageError(
                .insufficientRole,
                "only the suite's owner or an admin member invites: this account is a \(inviter.rawValue) member"
            )
        }
        if role == .admin, inviter != .owner {
            throw SyncStorageError(.insufficientRole, "only the suite's owner makes admin members")
        }
    }

    /// Whether `role` may list and revoke the suite's invitations: the owner and admins.
    package static func mayManageInvitations(_ role: SuiteRole) throws(SyncStorageError) {
        guard role.mayAdminister else {
            throw SyncStorageError(
                .insufficientRole,
                "only the suite's owner or an admin member manages its invitations: this account is a \(role.rawValue) member"
            )
        }
    }

    /// Whether `role` may revoke `invitation`: as it may make one giving that role (an admin does
    /// not revoke the owner's invitation of an admin).
    package static func mayRevoke(_ invitation: StoredInvitation, by role: SuiteRole) throws(SyncStorageError) {
        try mayInvite(role, giving: invitation.role)
    }

    /// Whether `remover` (`account`, with its role) may remove `member` from the suite: anyone but
    /// the owner may leave; the owner removes anyone; an admin removes `read` and `write` members,
    /// except from an end-to-end `encrypted` suite, where removing rotates its keys.
    package static func mayRemove(
        _ member: StoredMember?,
        target: String,
        owner: String,
        by account: String,
        role: SuiteRole,
        encrypted: Bool = false
    ) throws(SyncStorageError) {
        if target.isSameName(as: owner) {
            throw SyncStorageError(
                .memberConflict,
                "\(owner) owns the suite and cannot be removed from it (an owner stops sharing by removing the members)"
            )
        }
        guard let member else {
            throw SyncStorageError(.notFound, "\(target) is not a member of the suite")
        }
        if target.isSameName(as: account) { return }
        guard role.mayAdminister else {
            throw SyncStorageError(.insufficientRole, "only the suite's owner or an admin removes members: this account is a \(role.rawValue) member")
        }
        if member.role == .admin, role != .owner {
            throw SyncStorageError(.insufficientRole, "only the suite's owner removes an admin member")
        }
        if encrypted, role != .owner {
            throw SyncStorageError(
                .insufficientRole,
                "only the owner removes a member of an end-to-end encrypted suite: its devices alone seal the next key epoch for the others"
            )
        }
    }

    /// The membership `account` gets by accepting an invitation of `owner`'s suite: refused to the
    /// owner itself and to an account that is a member already (whose role the owner changes by
    /// removing and inviting again).
    package static func join(
        owner: String,
        suite: String,
        account: String,
        role: SuiteRole,
        existing: StoredMember?,
        invitedBy: String,
        now: Date
    ) throws(SyncStorageError) -> StoredMember {
        if account.isSameName(as: owner) {
            throw SyncStorageError(.memberConflict, "\(account) owns the suite \(suite): an owner does not accept its own invitation")
        }
        if let existing {
            throw SyncStorageError(.memberConflict, "\(account) is already a \(existing.role.rawValue) member of \(owner)'s suite \(suite)")
        }
        return StoredMember(owner: owner, suite: suite, account: account, role: role, added: now, invitedBy: invitedBy)
    }

    /// How a device record names a suite another account shares: `owner/suite` (no account or
    /// suite name holds '/'), so that an account's devices list its own suites and shared ones apart.
    package static func deviceSuiteName(owner: String, suite: String, account: String) -> String {
        owner.isSameName(as: account) ? suite : "\(owner)/\(suite)"
    }

    /// The suite's own name in a device record's name (`deviceSuiteName`), for a token's scope.
    package static func suiteName(inDeviceRecord name: String) -> String {
        name.split(separator: "/", maxSplits: 1).last.map(String.init) ?? name
    }
}
