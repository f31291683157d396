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
    package mutating func accept(by account: String, existing: StoredMember?, now: Date) throws(SyncStorageError) -> StoredMember {
        switch state(at: now) {
        case .accepted:
            throw SyncStorageError(.invitationUsed, "the invitation was already used: each invitation adds one account; ask for a new one")
        case .revoked:
            throw SyncStorageError(.invitationExpired, "the invitation was revoked: ask for a new one")
        case .expired:
            throw SyncStorageError(.invitationExpired, "the invitation expired: ask for a new one")
        case .pending: break
        }
        let member = try SharingRule.join(
            owner: owner,
            suite: suite,
            account: account,
            role: role,
            existing: existing,
            invitedBy: createdBy,
            now: now
        )
        acceptedBy = account
        accepted = now
        return member
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
        InvitationInfo(
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
    }
}

/// The rules of sharing, once: who may do what to a shared suite, invite whom, and remove whom.
/// Routes and backends call these; none decides on its own.
package enum SharingRule {
    /// The role `account` has in `owner`'s suite, given its membership record: `owner` for the
    /// owner's own account, the record's role for a member, nil for anyone else.
    package static func role(of account: String, owner: String, member: StoredMember?) -> SuiteRole? {
        if account == owner { return .owner }
        guard let member, member.account == account, member.owner == owner else { return nil }
        return member.role
    }

    /// Whether `inviter` (its role) may make an invitation giving `role`: the owner any member's
    /// role, an admin `read` and `write`.
    package static func mayInvite(_ inviter: SuiteRole, giving role: SuiteRole) throws(SyncStorageError) {
        guard role != .owner else { throw SyncStorageError(.malformed, "an invitation gives read, write or admin; a suite has one owner") }
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
    /// the owner may leave; the owner removes anyone; an admin removes `read` and `write` members.
    package static func mayRemove(
        _ member: StoredMember?,
        target: String,
        owner: String,
        by account: String,
        role: SuiteRole
    ) throws(SyncStorageError) {
        if target == owner {
            throw SyncStorageError(
                .memberConflict,
                "\(owner) owns the suite and cannot be removed from it (an owner stops sharing by removing the members)"
            )
        }
        guard let member else {
            throw SyncStorageError(.notFound, "\(target) is not a member of the suite")
        }
        if target == account { return }
        guard role.mayAdminister else {
            throw SyncStorageError(.insufficientRole, "only the suite's owner or an admin removes members: this account is a \(role.rawValue) member")
        }
        if member.role == .admin, role != .owner {
            throw SyncStorageError(.insufficientRole, "only the suite's owner removes an admin member")
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
        if account == owner {
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
        owner == account ? suite : "\(owner)/\(suite)"
    }

    /// The suite's own name in a device record's name (`deviceSuiteName`), for a token's scope.
    package static func suiteName(inDeviceRecord name: String) -> String {
        name.split(separator: "/", maxSplits: 1).last.map(String.init) ?? name
    }
}
