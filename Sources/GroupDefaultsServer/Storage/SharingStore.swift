package import Foundation
package import GroupDefaultsWire

/// Shared suites: members (`StoredMember`) and invitations (`StoredInvitation`). The rules are
/// `SharingRule`'s and the invitation's own; backends apply them inside one transaction, so that
/// two accounts accepting one invitation at once cannot both become members.
package protocol SharingStore: Sendable {
    /// `account`'s membership of `owner`'s `suite`, if any.
    func member(owner: String, suite: String, account: String) async throws -> StoredMember?
    /// The members of `owner`'s `suite`, by account.
    func members(owner: String, suite: String) async throws -> [StoredMember]
    /// Whether `owner`'s `suite` has any member: asked at each sealed push, so one lookup, not
    /// the list.
    func hasMembers(owner: String, suite: String) async throws -> Bool
    /// The suites other accounts share with `account`, by owner and suite.
    func memberships(account: String) async throws -> [StoredMember]

    /// Stores a new invitation, and drops those ended longer ago than
    /// `StoredInvitation.keptAfterEnd`; `rateLimited` beyond `StoredInvitation.maximumPending`
    /// pending for its suite (`checkCount`), `invitationUsed` if its lookup exists.
    func createInvitation(_ invitation: StoredInvitation, now: Date) async throws
    /// The invitation under `lookup`, whatever its state; nil if there is none.
    func invitation(lookup: String) async throws -> StoredInvitation?
    /// The invitations of `owner`'s `suite` still kept, newest first.
    func invitations(owner: String, suite: String) async throws -> [StoredInvitation]
    /// Accepts the invitation under `lookup` for `account` (`StoredInvitation.accept`) and stores
    /// the membership it makes, in one transaction, keeping `claim` (an encrypted suite's joining
    /// device's member key) with the invitation. `invitationNotFound`, `invitationUsed`,
    /// `invitationExpired`, `memberConflict`.
    func acceptInvitation(lookup: String, account: String, claim: InvitationClaim?, now: Date) async throws -> StoredMember
    /// Stores the keys the owner's device sealed for the device that accepted the invitation of
    /// `owner`'s `suite` whose public id is `id`, and the member's admission, in one transaction
    /// (`StoredInvitation.handOver`). `invitationNotFound`, `invitationUsed`, `notAMember`.
    func handOverKeys(owner: String, suite: String, id: String, keys: String, admission: MemberAdmission) async throws -> StoredInvitation
    /// Revokes the invitation of `owner`'s `suite` whose public id is `id`, for an account of
    /// `role` (`StoredInvitation.revoke`). `invitationNotFound`, `insufficientRole`,
    /// `invitationUsed`, `invitationExpired`.
    func revokeInvitation(owner: String, suite: String, id: String, by role: SuiteRole, now: Date) async throws -> StoredInvitation
    /// Removes `account` from `owner`'s `suite`, revokes the invitations it made that are still
    /// waiting (a removed admin's invitations add nobody), in one transaction, and wakes the
    /// suite's waits on every instance, so that the removed account's open event streams re-check
    /// their access at once. Returns false, having changed nothing, when it was not a member.
    /// Removing a member whose device was handed an end-to-end encrypted suite's keys marks a key
    /// rotation due in the same transaction (`KeyRotationDue.after(removing:epoch:existing:now:)`).
    func removeMember(owner: String, suite: String, account: String) async throws -> Bool
    /// The key rotation due in `owner`'s `suite` since a member holding its keys was removed; nil
    /// when none is. `KeyBagStore.putKeyBag` ends it (`KeyRotationDue.isEnded(by:epoch:)`).
    func rotationDue(owner: String, suite: String) async throws -> KeyRotationDue?
    /// The keys pinned in `owner`'s `suite` (`PinChange`), in byte order.
    func pinnedKeys(owner: String, suite: String) async throws -> [StoredPin]
    /// Pins `change.pin` (with their sealed names) and then unpins `change.unpin` in `owner`'s
    /// `suite`, in one transaction; the pinned keys after it, in byte order. `quotaExceeded`
    /// (nothing changed) past `PinnedKeys.maximumKeys`.
    func changePins(owner: String, suite: String, _ change: PinChange) async throws -> [StoredPin]
}

extension SharingStore {
    /// Accepts the invitation under `lookup` for `account` with no claim (a plain suite).
    package func acceptInvitation(lookup: String, account: String, now: Date) async throws -> StoredMember {
        try await acceptInvitation(lookup: lookup, account: account, claim: nil, now: now)
    }
}
