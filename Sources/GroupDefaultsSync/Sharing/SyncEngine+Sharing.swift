import GroupDefaults
public import GroupDefaultsWire

extension SyncEngine {
    /// Invites another account to the suite: registers a one-time invitation giving `role` and
    /// returns its code, to hand to the person invited (who joins with
    /// `SyncSetup.join(invitation:localName:directory:)`), and the invitation as the server
    /// describes it. Only the owner and admin members invite, and only the owner makes admins.
    ///
    /// - Parameter expiresIn: How long the code works: 60 seconds to 30 days; nil for 24 hours.
    /// - Throws: `SyncError`: `forbidden` when this account may not invite (or give `role`),
    ///   `rateLimited` with 20 invitations waiting, `local` for an end-to-end encrypted suite,
    ///   which this version cannot share, or what a request can throw.
    public func share(role: SuiteRole, expiresIn: Duration? = nil) async throws(SyncError) -> (code: InvitationCode, invitation: InvitationInfo) {
        guard sealer == nil else {
            throw SyncError(
                .local,
                "\(defaults.suiteName) is end-to-end encrypted, and this version shares plain suites only: nothing was shared"
            )
        }
        let seconds = expiresIn.map { UInt64(clamping: $0.components.seconds) }
        if let seconds, !InvitationRequest.lifetimes.contains(seconds) {
            throw SyncError(.local, "an invitation works for 60 seconds to 30 days")
        }
        let code = InvitationCode()
        let invitation = try await client.createInvitation(invitationID: code.invitationID, role: role, expiresIn: seconds)
        return (code, invitation)
    }

    /// The suite's invitations, newest first: waiting, and those that ended in the last 30 days
    /// (for the owner and admin members).
    public func invitations() async throws(SyncError) -> [InvitationInfo] {
        try await client.invitations().invitations
    }

    /// Revokes the invitation whose public id (`InvitationInfo.id`) is `id`: nobody can accept it
    /// afterwards.
    @discardableResult
    public func revokeInvitation(id: String) async throws(SyncError) -> InvitationInfo {
        try await client.revokeInvitation(id: id)
    }

    /// Who shares the suite: its owner and its members with their roles, and, for the owner and
    /// admins, each one's devices that used it with when they were last seen.
    public func members() async throws(SyncError) -> MemberList {
        try await client.members()
    }

    /// Removes `account` from the suite: its devices' requests are refused from now on and their
    /// open event streams end. They keep the values they hold, which stop changing.
    ///
    /// - Throws: `SyncError`: `memberConflict` for the owner, `notFound` for an account that is no
    ///   member, `forbidden` when this account may not remove it.
    public func unshare(account: String) async throws(SyncError) {
        _ = try await client.removeMember(account)
    }

    /// Leaves a suite another account shares with this one: the membership ends on the server,
    /// then the local suite stops syncing (its values stay, as a local copy). This account's other
    /// devices lose access too, as a removal does.
    ///
    /// - Throws: `SyncError`: `local` for the account's own suite (an owner stops sharing by
    ///   removing the members), or what a request can throw.
    public func leaveSuite() async throws(SyncError) {
        guard let shared else {
            throw SyncError(.local, "\(defaults.suiteName) is this account's own suite: an owner stops sharing by removing the members")
        }
        do {
            let list = try await client.members()
            _ = try await client.removeMember(list.account)
        } catch SyncErrorCode.notAMember {
            // Removed already (or the suite is no longer shared): only the local part is left.
        }
        do { try defaults.disableSync() } catch {
            throw SyncError(.local, "left \(shared.owner)'s suite \(shared.suite), but the local suite could not stop syncing: \(error)")
        }
    }
}
