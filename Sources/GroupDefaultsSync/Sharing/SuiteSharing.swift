import Foundation
import GroupDefaults
public import GroupDefaultsWire
import Logging

/// A suite shared with other accounts, seen from one of its devices: invitations, members, and
/// the rotations of an end-to-end encrypted suite's keys that removals make due. Every operation
/// goes through the engine that mirrors the suite (`SyncEngine.sharing`), whose keys it uses.
public struct SuiteSharing: Sendable {
    /// The engine of the shared suite.
    public let engine: SyncEngine

    private var defaults: SharedDefaults { engine.defaults }
    private var client: SyncClient { engine.client }
    private var shared: Membership? { engine.shared }
    private var logger: Logger { engine.logger }

    /// Invites another account to the suite: registers a one-time invitation giving `role` and
    /// returns its code, to hand to the person invited (who joins with
    /// `SyncSetup.join(invitation:localName:directory:)`), and the invitation as the server
    /// describes it. Only the owner and admin members invite, and only the owner makes admins.
    ///
    /// - Parameters:
    ///   - role: What the invited account may do: `read`, `write` or `admin` (the owner only).
    ///   - expiresIn: How long the code works: 60 seconds to 30 days; nil for 24 hours.
    /// An end-to-end encrypted suite is shared by the owner's devices only (they hold the owner
    /// key, `SharingKeys`), and the invited device gets its keys from this one: call
    /// `handOverKeys(code:invitation:)` next, which waits until the invitation is used.
    ///
    /// - Throws: `SyncError`: `forbidden` when this account may not invite (or give `role`),
    ///   `rateLimited` with 20 invitations waiting, `local` for an end-to-end encrypted suite on a
    ///   device without the owner key, or what a request can throw.
    public func share(role: SuiteRole, expiresIn: Duration? = nil) async throws(SyncError) -> (code: InvitationCode, invitation: InvitationInfo) {
        let keys = await engine.keyring.keys
        if let keys, keys.sharing?.isOwner != true { throw SuiteKeys.notOwner(defaults.suiteName) }
        if keys != nil { _ = try await newestKeys() }
        let seconds = expiresIn.map { UInt64(clamping: $0.components.seconds) }
        if let seconds, !InvitationRequest.lifetimes.contains(seconds) {
            throw SyncError(.local, "an invitation works for 60 seconds to 30 days")
        }
        let code = InvitationCode()
        let invitation = try await client.createInvitation(
            invitationID: code.invitationID,
            role: role,
            expiresIn: seconds,
            offerMAC: code.offerMAC(suite: client.suite, role: role, encrypted: keys != nil)
        )
        return (code, invitation)
    }

    /// For an end-to-end encrypted suite: waits until a device of another account accepts the
    /// invitation of `code` (until it expires), checks that its member key comes with a proof made
    /// from the code, vouches for it with the owner key (`MemberAdmission`) and hands it the
    /// suite's keys sealed to it (without the owner's private keys). Returns the invitation as
    /// it then stands.
    ///
    /// - Throws: `SyncError`: `invitationExpired` (expired or revoked unused), `local` when the
    ///   member key's proof does not check out (the member is removed again: the server may be
    ///   tampering), or what a request can throw.
    public func handOverKeys(code: InvitationCode, invitation: InvitationInfo) async throws(SyncError) -> InvitationInfo {
        guard let keys = await engine.keyring.keys else { return invitation }
        var current = invitation
        while current.state == .pending {
            do { try await Task.sleep(for: DevicePairing.pollInterval) } catch { throw SyncError(.local, "cancelled") }
            do {
                if let found = try await client.invitations().invitations.first(where: { $0.id == invitation.id }) { current = found }
            } catch  where error.isTransient {}
            if current.state == .pending, let expires = TypedJSONDate.parse(current.expires), expires <= Date() { break }
        }
        guard current.state == .accepted, let account = current.acceptedBy else {
            throw SyncError(
                .rejected,
                code: .invitationExpired,
                "the invitation \(invitation.id) \(current.state == .revoked ? "was revoked" : "expired") unused"
            )
        }
        guard let claim = current.claim else {
            throw SyncError(
                .local,
                "\(account) accepted the invitation without a member key: it cannot get the suite's keys; remove it and invite again"
            )
        }
        if current.keys != nil { return current }
        // The suite may have moved to a new key epoch while this waited (a removal elsewhere).
        let newest = try await newestKeys() ?? keys
        guard let memberKey = KeyHandover.checkedMemberKey(claim, code: code) else {
            let removed = (try? await client.removeMember(account)) != nil
            throw SyncError(
                .local,
                """
                the invitation was accepted by \(account) with a key that does not come with the code's proof (the server may be \
                tampering): the keys were not handed over\(removed ? ", and \(account) was removed" : "")
                """
            )
        }
        let handed = InvitationKeys(
            keys: try KeyHandover.seal(newest, to: memberKey, code: code),
            admission: try newest.admission(account: account, memberKey: memberKey)
        )
        do {
            return try await client.handOverKeys(invitation: invitation.id, handed)
        } catch  where error.code == .notAMember {
            // The joining device gave up waiting (or was stopped) and left: the owner's side of it.
            throw SyncError(
                .local,
                code: .notAMember,
                "\(account) accepted the invitation \(invitation.id) but left the suite before its keys were handed over (its join stopped or gave up waiting): nothing was handed over; make a new invitation for it"
            )
        }
    }

    /// The keys of the suite's newest epoch, before this device vouches for a new member: taken
    /// from the key bags if the suite was rotated on another device since this one last synced.
    /// What it hands over and the admission it signs are then at that epoch; at an older one the
    /// next rotation would leave the new member out (an admission older than the last rotation's
    /// members is one a server could replay), and the member could open nothing written since.
    ///
    /// - Throws: `SyncError` `staleKeyEpoch` (pair this device again) when the newest epoch is not
    ///   to be had here (`rotate-key` on another device hands it to no device).
    func newestKeys() async throws(SyncError) -> SuiteKeys? {
        _ = try await engine.adoptSharedEpochs()
        guard let keys = await engine.keyring.keys else { return nil }
        let newest = try await client.keyBags().newestEpoch
        guard newest <= keys.currentEpoch else {
            var error = SyncError(
                .local,
                code: .staleKeyEpoch,
                "the key of \(client.suite) was rotated on another device (epoch \(newest); this device has up to \(keys.currentEpoch)): pair this device again with one that has the new key, then share"
            )
            error.remedy = .pairAgain
            throw error
        }
        return keys
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

    /// The keys pinned for the suite's members (`PinChange`), by name, in byte order (in an
    /// end-to-end encrypted suite, their sealed names opened; a key id without one this device
    /// opens shows as `id:` and the id).
    public func pinnedKeys() async throws(SyncError) -> [String] {
        await engine.pinNames(try await client.pinnedKeys()).named
    }

    /// Pins `pin` and unpins `unpin` for the suite's members (the owner or an admin; others are
    /// refused with `insufficientRole`): members' writes of a pinned key are refused by the server
    /// and their devices put the owner's value back. A key that holds no value yet may be pinned.
    /// In an end-to-end encrypted suite the server is given each key's id and its name sealed with
    /// the suite's key. Returns the pinned keys after the change (as `pinnedKeys()`).
    public func changePins(pin: [String], unpin: [String]) async throws(SyncError) -> [String] {
        for key in pin {
            if let problem = NameKind.key.problem(with: key) {
                throw SyncError(.rejected, code: .malformed, "key \(key.debugDescription) cannot be pinned: \(problem); nothing was pinned")
            }
        }
        let change = try await engine.sealedPinChange(pin: pin, unpin: unpin)
        let after = try await client.changePins(change)
        try await engine.refreshPins()
        return await engine.pinNames(after).named
    }

    /// Removes `account` from the suite: its devices' requests are refused from now on and their
    /// open event streams end. They keep the values they hold, which stop changing.
    ///
    /// In an end-to-end encrypted suite this device (the owner's) then rotates the suite's keys
    /// (`KeyRotation`): the new epoch's key is sealed for the owner's devices and to each remaining
    /// member's key, never to the removed account's, so that nothing written from then on opens
    /// with what its devices hold; the other devices take the new key from the key bag without
    /// pairing. Returns what the rotation did (nil for a plain suite).
    ///
    /// - Throws: `SyncError`: `memberConflict` for the owner, `notFound` for an account that is no
    ///   member, `forbidden` when this account may not remove it, `local` for an encrypted suite
    ///   on a device without the owner key (nothing is removed then), or what a rotation throws
    ///   (the member is removed already: `rotate-key` finishes it).
    @discardableResult
    public func unshare(account: String) async throws(SyncError) -> KeyRotation.Outcome? {
        if let keys = await engine.keyring.keys, keys.sharing?.isOwner != true {
            if let shared {
                throw SyncError(
                    .local,
                    "only the owner removes a member of \(shared.owner)'s end-to-end encrypted suite \(shared.suite): nothing was changed"
                )
            }
            throw SuiteKeys.notOwner(defaults.suiteName)
        }
        _ = try await client.removeMember(account)
        // From here the server marks a rotation due (`KeyRotationDue`): stopped before it is
        // made, the next sync (or `rotate-key`) on a device holding the owner key makes it.
        InterruptionPoint.reached("unshare.removed")
        let keyring = await engine.keyring
        guard let keys = keyring.keys, let keyFile = keyring.file else { return nil }
        return try await KeyRotation.rotate(engine, keys: keys, keyFile: keyFile, excluding: [account])
    }

    /// The key rotation the server marks due in this account's end-to-end encrypted suite since a
    /// member that held its keys was removed (by anyone: the console, the API, `leave`, or an
    /// `unshare` whose rotation did not finish), or nil when none is or this device could not make
    /// it (a plain suite, a member's device, a device without the owner key).
    public func rotationDue() async throws(SyncError) -> KeyRotationDue? {
        guard shared == nil, let keys = await engine.keyring.keys, keys.sharing?.isOwner == true else { return nil }
        return try await client.keyBags().rotationDue
    }

    /// Asks the server, with one request on the suite's route (`GET key-bags`, which every member
    /// may read), what the next sync would meet first: it throws when the token is refused, the
    /// suite is no longer shared with this account (or waits for its keys), the account was
    /// deleted, or the server cannot be reached; else it returns the key rotation due, as
    /// `rotationDue()` does (nil where this device could not make one). What `groupdefaults-sync
    /// status` asks.
    package func checkAccess() async throws(SyncError) -> KeyRotationDue? {
        let bags = try await client.keyBags()
        guard shared == nil, await engine.keyring.keys?.sharing?.isOwner == true else { return nil }
        return bags.rotationDue
    }

    /// The accounts `due` names that the server does not list as members again (one invited back
    /// holds the keys rightly), compared by their bytes.
    func stillRemoved(_ due: KeyRotationDue) async throws(SyncError) -> [String] {
        let listed = try await client.members().members.map(\.account)
        return due.removed.filter { account in !listed.contains { $0.isSameName(as: account) } }
    }

    /// Finishes the key rotation this device began and did not finish (`KeyRotation`, stopped
    /// after its new key was written: the bag stored or maybe stored, not every entry sealed again
    /// under the new epoch), as `rotate-key` run again would; nil when there is none. Until it is
    /// finished, other devices with the new key refuse what is left under the retired epoch.
    /// `sync` and `run` call it before anything else.
    ///
    /// - Throws: `SyncError`, as `KeyRotation.rotate` does (the mark stays: the next sync tries again).
    public func finishRotation() async throws(SyncError) -> KeyRotation.Outcome? {
        _ = await engine.reloadKeys()  // finished by another process meanwhile
        let keyring = await engine.keyring
        guard let keys = keyring.keys, keys.hasUnfinishedRotation, let pending = keys.pendingBag, let keyFile = keyring.file else { return nil }
        // Only this rotation's bag, stored or about to be: a server already past its epoch (another
        // owner device rotated since) makes it moot, and so does another device's bag for the same
        // epoch, stored first (the key made here for it is dropped, and the suite's taken from
        // the bags): no new rotation is begun here.
        let bags = try await client.keyBags()
        let lost = keys.settlingRotation(with: bags).flatMap { $0.pendingBag == nil ? $0 : nil }
        guard lost == nil, pending.epoch >= bags.newestEpoch else {
            let settled = lost ?? keys.with(pendingBag: nil)
            let moot = settled.adopting(bags) ?? settled
            try moot.write(to: keyFile)
            await engine.reloadKeys(taking: moot)
            return nil
        }
        logger.notice(
            "finishing the rotation of the suite's keys to epoch \(keys.currentEpoch) that this device began",
            metadata: ["suite": "\(client.suite)"]
        )
        // A removal due since is left out of the bag, if it is sent again (`rotateIfDue` follows);
        // an account invited back since is not.
        var removed: [String] = []
        if let due = try await rotationDue() { removed = try await stillRemoved(due) }
        return try await KeyRotation.rotate(engine, keys: keys, keyFile: keyFile, excluding: removed)
    }

    /// Makes the key rotation due (`rotationDue()`), if any: the new epoch is sealed for the owner's
    /// devices and the remaining members, never to an account removed since (`KeyRotation`); once
    /// the server stores its key bag, the mark is gone. Returns what was due and what the rotation
    /// did, or nil when nothing was due. `sync` and `run` call it on a device holding the owner key.
    ///
    /// - Throws: `SyncError`, as `KeyRotation.rotate` does (the mark stays: the next sync tries again).
    public func rotateIfDue() async throws(SyncError) -> (due: KeyRotationDue, outcome: KeyRotation.Outcome)? {
        guard let due = try await rotationDue() else { return nil }
        let keyring = await engine.keyring  // after the request: the keys may have changed meanwhile
        guard let keys = keyring.keys, let keyFile = keyring.file else { return nil }
        let removed = try await stillRemoved(due)
        logger.notice(
            "a key rotation is due: \(due.removed.joined(separator: ", ")) held the suite's keys when removed; rotating",
            metadata: ["suite": "\(client.suite)"]
        )
        let outcome = try await KeyRotation.rotate(engine, keys: keys, keyFile: keyFile, excluding: removed)
        return (due, outcome)
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
            InterruptionPoint.reached("leave.left")
        } catch SyncErrorCode.notAMember {
            // Removed already (or the suite is no longer shared): only the local part is left.
        }
        do { try engine.defaults.disableSync(rememberingShare: true) } catch {
            throw SyncError(.local, "left \(shared.owner)'s suite \(shared.suite), but the local suite could not stop syncing: \(error)")
        }
    }
}

extension SyncEngine {
    /// Sharing the suite with other accounts: invitations, members, key rotations.
    public nonisolated var sharing: SuiteSharing { SuiteSharing(engine: self) }
}
