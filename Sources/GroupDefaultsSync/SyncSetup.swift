import AsyncHTTPClient
import Crypto
public import Foundation
import GroupDefaults
public import GroupDefaultsWire

/// Configures a suite for sync with a server, as `groupdefaults-sync configure` does: prepares the
/// keys of an end-to-end encrypted suite (new ones, from a pairing code or from the recovery key),
/// then records the settings in the suite, creating the suite if needed.
///
/// The server is asked first, when that decides whether the configuration can work, whether it
/// holds the suite plain or encrypted: a suite is encrypted for every device or for none. The keys
/// are written before the suite records their file, and a suite that does not exist yet is created
/// only once they are: a refusal or a failure leaves everything as it was.
///
/// ```swift
/// var setup = SyncSetup(server: url, tokenFile: tokenPath)
/// setup.keys = .new
/// let result = try await setup.configure(suiteName: "group.com.example.chat")
/// print(result.newRecoveryKey!)  // shown once: the way to set up a device when none is at hand
/// ```
public struct SyncSetup: Sendable {
    /// Where the keys of an end-to-end encrypted suite come from.
    public enum Keys: Sendable {
        /// The suite stays as it was configured: plain, or encrypted with the key file it was
        /// configured with (or `keyFile`, when given, which must hold the suite's keys). A suite
        /// the server holds encrypted is refused without keys.
        case unchanged
        /// New keys and a new recovery key, for the suite's first device, before its first sync.
        /// With `keyFile` naming a file that exists, its keys are used instead.
        case new
        /// The keys of every epoch, from the suite's recovery key and the key bags the server keeps.
        case recoveryKey(RecoveryKey)
        /// The keys and a token of its own, from a device that has them (`DevicePairing.offer`):
        /// the token is written to `tokenFile`, which must not exist yet; `deviceName` is the name
        /// the token is bound to in device lists.
        case pairingCode(PairingCode, deviceName: String?)
    }

    /// What `configure` did: the settings the suite now holds, and the recovery key of new keys.
    public struct Result: Sendable {
        /// The settings recorded in the suite.
        public var settings: SyncSettings
        /// The recovery key of keys made by this configuration (`Keys.new`), to be shown once.
        public var newRecoveryKey: RecoveryKey?
    }

    /// The server's base URL, http:// or https://.
    public var server: URL
    /// The file holding the token (mode 0600); with `Keys.pairingCode`, where the new one goes.
    public var tokenFile: String
    /// A PEM file of a private certificate authority to trust.
    public var caFile: String?
    /// Where the keys come from.
    public var keys: Keys = .unchanged
    /// The key file to use: by default, the one the suite was configured with, or a new one beside
    /// the token file named for the suite, the server and the token (`KeyFileName`).
    public var keyFile: String?
    /// Keys that never leave the device (`GlobPattern`s); nil keeps the suite's patterns.
    public var localOnlyKeys: [String]?
    /// How many replaced values the conflict journal keeps; nil keeps the suite's bound.
    public var journalEntries: Int?
    /// How long the conflict journal keeps a replaced value; nil keeps the suite's bound.
    public var journalAge: Duration?
    /// How long to wait for a connection to the server, TLS handshake included.
    public var connectTimeout: Duration = SyncClient.defaultConnectTimeout
    /// How long to wait for each answer once a request is sent.
    public var answerTimeout: Duration = .seconds(30)
    /// For a suite another account shares with this one: whose it is, its name there and this
    /// account's role (`join` sets it); nil keeps what the suite was configured with, and for a
    /// suite never shared, the account's own suite of the same name.
    public var shared: Membership?

    /// A configuration for `server`, with the token in `tokenFile`.
    public init(server: URL, tokenFile: String, caFile: String? = nil) {
        self.server = server
        self.tokenFile = tokenFile
        self.caFile = caFile
    }

    /// Configures the suite named `suiteName` in `directory` (the default folder of suites when
    /// nil), creating it if needed. A different server than before is a different copy of the
    /// suite: its old cursor and pending marks are forgotten.
    ///
    /// - Throws: `SyncSetup.Refusal` when the configuration cannot work (nothing was changed),
    ///   `SyncError` when the server or a file fails, `SharedDefaultsError` when the suite does.
    public func configure(suiteName suite: String, directory: URL? = nil) async throws -> Result {
        var setup = self
        setup.tokenFile = Self.absolute(tokenFile)
        setup.caFile = caFile.map(Self.absolute)
        setup.keyFile = keyFile.map(Self.absolute)
        return try await setup.configureAbsolute(suite: suite, directory: directory)
    }

    /// A path as the suite records it: absolute, so that it holds from any working directory.
    private static func absolute(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }

    private func configureAbsolute(suite: String, directory: URL?) async throws -> Result {
        var setup = self
        if setup.shared == nil, let existing = try? SharedDefaults(existingSuiteName: suite, directory: directory),
            let previous = try? SyncSettings.stored(in: existing), previous.server == server
        {
            setup.shared = previous.shared  // the same server: still the suite it shares
        }
        return try await setup.configureShared(suite: suite, directory: directory)
    }

    private func configureShared(suite: String, directory: URL?) async throws -> Result {
        if let caFile {
            try await SyncClient.makeHTTPClient(caFile: caFile, connectTimeout: connectTimeout).shutdown()  // checks that it reads
        }
        // A suite that does not exist yet is created only once the keys are prepared: a failed
        // pairing or recovery leaves nothing behind.
        let existing: SharedDefaults?
        do { existing = try SharedDefaults(existingSuiteName: suite, directory: directory) } catch let error
            as SharedDefaultsError where error.code == .suiteNotFound
        {
            existing = nil
        }
        let previous = try existing.flatMap { try SyncSettings.stored(in: $0) }
        // A copy of another account's suite (a member's, or one this account left or was removed
        // from) stays that suite's copy: configured as this account's own, or as a copy of any other
        // suite (`--shared-from` naming this account, or another owner), it would upload the owner's
        // values there.
        if let copyOf = previous?.shared ?? existing?.leftMembership() {
            guard let shared, shared.owner.isSameName(as: copyOf.owner), shared.suite.isSameName(as: copyOf.suite) else {
                throw Refusal(.copyOfLeftSuite(copyOf), suite: suite)
            }
            // ... and of the same owner account: a new account of the owner's name is refused by the
            // server when told the incarnation the copy last synced with (410 `account_deleted`).
            let remembered = try previous?.shared != nil ? existing?.syncState().accountIncarnation : existing?.leftAccountIncarnation()
            if let remembered {
                do {
                    _ = try await withClient(suite: suite) { client in
                        client.accountIncarnation.know(remembered)
                        return try await client.members()
                    }
                } catch let error as SyncError where error.code == .accountDeleted {
                    throw Refusal(.copyOfDeletedAccountsSuite(copyOf), suite: suite)
                } catch {
                    // Not a member (any more), unreachable: the configuration goes on as before, and
                    // its first sync says so.
                }
            }
        }
        // A member's copy whose owner's account was deleted starts over nowhere: the owner's name is
        // another person's account now, and this account's own would take the owner's values.
        if let existing, let copy = previous?.shared, SyncHealth.stored(in: existing)?.condition == .accountDeleted {
            throw Refusal(.copyOfDeletedAccountsSuite(copy), suite: suite)
        }
        let prepared = try await prepareKeys(suite: suite, previous: previous)
        var shared = shared
        if shared != nil, shared?.account == nil {
            // Another device of a member account that paired: its role, asked with its new token.
            let list = try await withClient(suite: suite) { client in try await client.members() }
            shared?.role = list.you
            shared?.account = list.account
        }
        let defaults = try existing ?? SharedDefaults(suiteName: suite, directory: directory)
        // A suite whose account was deleted on the server (its name now a new account's) starts
        // over, as a new copy: it joins the new account's suite by the joining rule, which uploads
        // what the server lacks. So does a suite configured for a different server.
        let health = SyncHealth.stored(in: defaults)
        let startingOver = health?.condition == .accountDeleted
        if let previous, previous.server != server || startingOver {
            try defaults.disableSync()
        }
        let settings = SyncSettings(
            server: server,
            tokenFile: tokenFile,
            caFile: caFile,
            localOnlyKeys: localOnlyKeys ?? previous?.localOnlyKeys ?? [],
            keyFile: prepared?.path,
            shared: shared
        )
        try settings.store(in: defaults)
        if shared != nil, (try? defaults.syncState())?.accountIncarnation == nil {
            // The owner's incarnation, recorded now rather than at the first sync: a copy that leaves
            // (or is removed) before it syncs must still know whose suite it was, so that it never
            // joins a new account of the owner's name with the deleted one's values.
            let named = try? await withClient(suite: suite) { client in
                _ = try await client.members()
                return client.accountIncarnation.latest
            }
            if let named = named ?? nil { _ = try? defaults.setAccountIncarnationIfNew(named) }
        }
        // A pairing is finished once the suite names its token and keys.
        if case .pairingCode = keys { PairingProgress.remove(at: Self.pairingProgressFile(tokenFile: tokenFile)) }
        // A configuration starts afresh: what a paused engine left in the suite (a refused token,
        // a suite no longer shared, a deleted account) is about the configuration this one
        // replaces, and an engine waiting on it resumes.
        if let health, [.paused, .notShared, .accountDeleted].contains(health.condition) {
            try SyncHealth(condition: .ok, since: Date(), lastSuccess: health.lastSuccess, lastFailure: health.lastFailure).store(in: defaults)
        }
        if journalEntries != nil || journalAge != nil {
            var bounds = try defaults.conflictJournalBounds()
            if let journalEntries { bounds.maximumCount = journalEntries }
            if let journalAge { bounds.maximumAge = journalAge }
            try defaults.setConflictJournalBounds(bounds)
        }
        return Result(settings: settings, newRecoveryKey: prepared?.newRecoveryKey)
    }

    /// Where a paired device's token goes when no token file is named: `<suite>.token` in
    /// `$XDG_CONFIG_HOME/groupdefaults`, else `~/.config/groupdefaults`.
    public static func defaultTokenFile(suite: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let config =
            environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
        return config + "/groupdefaults/\(suite).token"
    }

    // MARK: - Joining a shared suite

    /// What `join` did: the membership the invitation made, the local suite's name, and the
    /// settings it now holds.
    public struct Joined: Sendable {
        /// The suite's owner, its name there, and this account's role.
        public var membership: Membership
        /// The local suite's name (the owner's suite's name unless another was asked for).
        public var localName: String
        /// What configuring the local suite did.
        public var result: Result
    }

    /// Joins a suite another account shares, with the invitation `code` its owner or an admin
    /// made (`SuiteSharing.share`): the server makes this token's account a member, and a new local
    /// suite named `localName` (by default the owner's name for it) in `directory` syncs with it.
    ///
    /// Checked before anything changes: the code's check characters, this token, that the
    /// invitation is waiting (not used, expired or revoked), and that no suite of the local name
    /// exists here, unless it is a copy of this same shared suite (an account removed, or that
    /// left, and invited again joins with the copy it kept).
    ///
    /// For an end-to-end encrypted suite, the device sends a member key of its own with its
    /// acceptance, with a proof made from the code, and waits (calling `waiting` once) until a
    /// device of the owner hands it the suite's keys, sealed to that key (`KeyHandover`): the
    /// owner's `share` runs meanwhile. After `keyHandoverWait` without them, it leaves again.
    ///
    /// - Throws: `SyncError` (`invitationNotFound`, `invitationUsed`, `invitationExpired`,
    ///   `memberConflict`, `authenticationNeeded`, what a request can throw), `SyncSetup.Refusal`
    ///   (`localSuiteExists`); nothing was changed on either side then, except after an
    ///   acceptance whose answer was lost and could not be undone: the joining note
    ///   (`JoiningNote`) is kept, and the same command again undoes or finishes it.
    public func join(
        invitation code: InvitationCode,
        localName: String? = nil,
        directory: URL? = nil,
        waiting: (@Sendable () -> Void)? = nil
    ) async throws -> Joined {
        var setup = self
        setup.tokenFile = Self.absolute(tokenFile)
        setup.caFile = caFile.map(Self.absolute)
        _ = try TokenFile.read(setup.tokenFile)
        let id = code.invitationID
        let offered: InvitationInfo
        do {
            offered = try await setup.withClient(suite: "-") { client in try await client.invitation(invitationID: id) }
        } catch let error as SyncError where error.code == .invitationNotFound {
            // The server says the same for a code never made and for an invitation this account
            // used and left (a removed member reads none of its past invitations).
            throw SyncError(.local, code: .invitationNotFound, Self.invitationNotFoundWords)
        }
        switch offered.state {
        case .pending: break
        case .accepted:
            // This command run before, and stopped before the local suite was set up: finished
            // (the keys were written) or undone (none came: the account leaves again).
            if let resumed = try await setup.resumeInterruptedJoin(offered, code: code, localName: localName, directory: directory) {
                return resumed
            }
            throw SyncError(
                refusal: .invitationUsed,
                status: 409,
                "the invitation was already used: each invitation adds one account; ask for a new one"
            )
        case .revoked:
            throw SyncError(
                refusal: .invitationExpired,
                status: 410,
                "the invitation was revoked (by its inviter, or when the inviting device stopped waiting to hand over the keys): ask for a new one"
            )
        case .expired:
            throw SyncError(refusal: .invitationExpired, status: 410, "the invitation expired: ask for a new one")
        }
        // What the server says the invitation offers must be what the inviting device made: else
        // the server could, for one, present an encrypted suite as a plain one.
        guard code.verifies(offer: offered) else {
            throw SyncError(
                .local,
                """
                the server's description of this invitation (\(offered.suite), \(offered.role.rawValue), \
                \(offered.encrypted == true ? "encrypted" : "plain")) is not what the inviting device made: nothing was joined
                """
            )
        }
        let name = localName ?? offered.suite
        var previousKeyFile: String?
        do {
            let existing = try SharedDefaults(existingSuiteName: name, directory: directory)
            // Only this very suite's copy, from before this account was removed or left, joins again.
            let previous = try SyncSettings.stored(in: existing)
            let copyOf = previous?.shared ?? existing.leftMembership()
            guard let copyOf, copyOf.owner.isSameName(as: offered.owner), copyOf.suite.isSameName(as: offered.suite) else {
                throw Refusal(.localSuiteExists, suite: name)
            }
            // ... and only into the same account: the server refuses a new account of the owner's
            // name when told the incarnation the copy last synced with.
            let remembered = previous?.shared != nil ? try existing.syncState().accountIncarnation : try existing.leftAccountIncarnation()
            if let remembered {
                do {
                    _ = try await setup.withClient(suite: "-") { client in
                        client.accountIncarnation.know(remembered)
                        return try await client.invitation(invitationID: id)
                    }
                } catch let error as SyncError where error.code == .accountDeleted {
                    throw Refusal(.copyOfDeletedAccountsSuite(copyOf), suite: name)
                }
            }
            previousKeyFile = previous?.keyFile
            if previousKeyFile == nil, offered.encrypted == true {
                // A copy kept when this account left: its key file, where `configure` put it,
                // holds the suite's keys of then, which the new ones replace (they open all of it).
                let token = try TokenFile.read(setup.tokenFile)
                let kept = KeyFileName.defaultPath(suite: name, server: server, token: token, beside: setup.tokenFile)
                if (try? SuiteKeys.read(from: kept, suite: offered.suite)) != nil { previousKeyFile = kept }
            }
        } catch let error as SharedDefaultsError where error.code == .suiteNotFound {
            // Free: the suite is made once the server made the membership.
        }
        let member = offered.encrypted == true ? KeyHandover.claim(code: code) : nil
        // Which invitation this device is joining with, until the join is done or undone: a run
        // stopped after the acceptance is finished or undone by the next (`resumeInterruptedJoin`).
        let note = JoiningNote(invitationID: id, memberKey: member?.claim.memberKey, localName: name)
        if member != nil, !note.write(beside: setup.tokenFile) {
            throw SyncError(
                .local,
                "cannot write \(JoiningNote.path(beside: setup.tokenFile)), where this device notes the invitation it is joining with: nothing was accepted"
            )
        }
        // Kept when this run could not undo an acceptance (the server could not be asked): the
        // same command again does (`resumeInterruptedJoin`).
        var keepNote = false
        defer { if !keepNote { JoiningNote.remove(beside: setup.tokenFile) } }
        // The acceptance in a task of its own, which a Ctrl-C does not cancel: its answer is
        // awaited, so that what the server did is known here.
        InterruptionPoint.reached("configure-invitation.accepting")
        try Task.checkCancellation()  // stopped before anything was sent
        let accepting = setup
        let claim = member?.claim
        let membership: Membership
        do {
            membership = try await Task { () async throws -> Membership in
                try await accepting.withClient(suite: "-") { client in
                    let accepted = try await client.acceptInvitation(invitationID: id, claim: claim)
                    // Stopped as the answer came, it is as if it were lost.
                    InterruptionPoint.reached("configure-invitation.answered")
                    try Task.checkCancellation()
                    return accepted
                }
            }.value
        } catch {
            // The answer was lost (the network, a stop as it came, one not understood): the server
            // may have accepted, now or a moment later. A refusal it gave is an answer: nothing
            // was accepted. Lost, an acceptance with this run's member key is undone, and the note
            // kept: the same command again undoes one the server makes after this look.
            let refused = (error as? SyncError).map { !$0.isTransient && $0 != .cancelled && (400..<500).contains($0.status ?? 0) } ?? false
            if member != nil, !refused {
                keepNote = true
                _ = await setup.leaveIfAccepted(note, offered: offered, localName: name)
            }
            throw error
        }
        InterruptionPoint.reached("configure-invitation.accepted")
        setup.shared = membership
        setup.keys = .unchanged
        setup.keyFile = nil
        var keyFile: String?
        do {
            try Task.checkCancellation()  // stopped while the acceptance was on its way: undone below
            if let member {
                // A copy joining again replaces its own keys (the new ones open everything the old did).
                let path =
                    try previousKeyFile
                    ?? KeyFileName.defaultPath(suite: name, server: server, token: try TokenFile.read(setup.tokenFile), beside: setup.tokenFile)
                if previousKeyFile == nil, FileManager.default.fileExists(atPath: path) { throw Refusal(.keyFileExists, suite: name, path: path) }
                waiting?()
                let keys = try await setup.receiveKeys(code: code, memberKey: member.memberKey, suite: offered.suite)
                try keys.write(to: path)
                // Not written, a run stopped from here on leaves again rather than finishing.
                var written = note
                written.keyFile = path
                _ = written.write(beside: setup.tokenFile)
                keyFile = previousKeyFile == nil ? path : nil
                setup.keyFile = path
                InterruptionPoint.reached("configure-invitation.keys-written")
            }
            let result = try await setup.configureShared(suite: name, directory: directory)
            InterruptionPoint.reached("configure-invitation.joined")
            return Joined(membership: membership, localName: name, result: result)
        } catch {
            // The local suite could not be set up, or the wait was interrupted (Ctrl-C, `kill`):
            // leave again, so that nothing changed on either side and the person can ask for a new
            // invitation. In a task of its own, which a cancelled wait does not cancel.
            let leaving = setup
            let left = await Task { () async -> Bool in
                do {
                    _ = try await leaving.withClient(suite: name) { client in
                        let account = if let account = membership.account { account } else { try await client.members().account }
                        return try await client.removeMember(account)
                    }
                    return true
                } catch let error as SyncError where error.isTransient {
                    return false
                } catch {
                    return true  // removed already (or refused: not this account's to undo)
                }
            }.value
            if !left, member != nil { keepNote = true }
            if let keyFile { try? FileManager.default.removeItem(atPath: keyFile) }
            throw error
        }
    }

    /// After an acceptance whose answer was lost: if the server shows the invitation accepted
    /// with `note`'s member key (this run's claim, never another device's or another account's
    /// acceptance), the accepting account leaves again (only its token can remove it). False when
    /// the server could not be asked.
    private func leaveIfAccepted(_ note: JoiningNote, offered: InvitationInfo, localName name: String) async -> Bool {
        var leaving = self
        leaving.shared = Membership(owner: offered.owner, suite: offered.suite, role: offered.role)
        let asking = leaving
        return await Task { () async -> Bool in
            do {
                let info = try await asking.withClient(suite: "-") { client in try await client.invitation(invitationID: note.invitationID) }
                guard info.state == .accepted, let account = info.acceptedBy, note.memberKey != nil, note.claimed(info.claim) else { return true }
                _ = try await asking.withClient(suite: name) { client in try await client.removeMember(account) }
                return true
            } catch let error as SyncError where error.isTransient {
                return false
            } catch {
                return true
            }
        }.value
    }

    /// For an invitation to an encrypted suite that this command accepted in a run that stopped
    /// (a crash, a kill) before it was done: if that run wrote the keys (its `JoiningNote` names
    /// the key file), the suite is set up now (the join completes); else the account that
    /// accepted it leaves again (only this account's token can: the keys, if they came, were sealed
    /// to a key the stopped run lost), and the join fails saying so. Nil for an invitation used
    /// otherwise. The same whether the local suite is new or a copy kept from before.
    private func resumeInterruptedJoin(
        _ offered: InvitationInfo,
        code: InvitationCode,
        localName: String?,
        directory: URL?
    ) async throws -> Joined? {
        // Only this device's own stopped run (it left the note naming this invitation): never
        // another device's finished join of the same account.
        guard offered.encrypted == true, let account = offered.acceptedBy, let note = JoiningNote.read(beside: tokenFile),
            note.isOf(invitation: code.invitationID)
        else { return nil }
        // Accepted with another member key: another device's join (this run's acceptance never
        // arrived), which is not this note's to finish or undo.
        guard note.claimed(offered.claim) else {
            JoiningNote.remove(beside: tokenFile)
            return nil
        }
        // The local suite the stopped run set up, whatever this run names.
        let name = note.localName ?? localName ?? offered.suite
        var setup = self
        setup.shared = Membership(owner: offered.owner, suite: offered.suite, role: offered.role, account: account)
        setup.keys = .unchanged
        if offered.keys != nil, let keyFile = note.keyFile, (try? SuiteKeys.read(from: keyFile, suite: offered.suite)) != nil {
            setup.keyFile = keyFile
            let result = try await setup.configureShared(suite: name, directory: directory)
            JoiningNote.remove(beside: tokenFile)
            return Joined(membership: setup.shared!, localName: name, result: result)
        }
        // No keys here (none came, or they came sealed to a key the stopped run lost): leave.
        do {
            _ = try await setup.withClient(suite: name) { client in try await client.removeMember(account) }
        } catch let error as SyncError where error.isTransient {
            throw error  // the server cannot be asked now: the note stays for the same command again
        } catch {
            JoiningNote.remove(beside: tokenFile)
            return nil  // not this account's acceptance: used
        }
        JoiningNote.remove(beside: tokenFile)
        throw SyncError(
            .local,
            code: .invitationUsed,
            "a run of this command stopped before the owner's device handed over the keys: this account left the suite again, and the invitation is used up; ask for a new invitation"
        )
    }

    /// What a code the server does not show this account means: never made (a typo the check
    /// characters missed cannot be told from it), or an invitation this account used and left
    /// since (a join stopped before the keys came leaves, as does one that gave up waiting).
    static let invitationNotFoundWords =
        "no invitation this account can read has this code: check the code; if it is right, the invitation has ended (this account used it and left again: a join stopped or gave up before the keys came, or the inviting device stopped waiting and removed it): ask for a new invitation"

    /// How long a joining device waits for the owner's device to hand over the keys: 10 minutes.
    public static let keyHandoverWait: TimeInterval = 600

    /// Waits until the owner's device hands over the keys of the invitation of `code` (at most
    /// `keyHandoverWait`), and opens them.
    private func receiveKeys(code: InvitationCode, memberKey: Curve25519.KeyAgreement.PrivateKey, suite: String) async throws -> SuiteKeys {
        let deadline = Date().addingTimeInterval(Self.keyHandoverWait)
        let sealed = try await withClient(suite: "-") { client in
            while true {
                do throws(SyncError) {
                    if let sealed = try await client.invitation(invitationID: code.invitationID).keys { return sealed }
                } catch {
                    if !error.isTransient { throw error }
                }
                guard Date() < deadline else {
                    throw SyncError(
                        .rejected,
                        code: .invitationExpired,
                        """
                        no device of the suite's owner handed over its keys within \(Int(Self.keyHandoverWait / 60)) minutes (its `share` was not \
                        running): this account left the suite again; ask for a new invitation, and for `share` to keep running until it is used
                        """
                    )
                }
                try await Task.sleep(for: DevicePairing.pollInterval)
            }
        }
        return try KeyHandover.open(sealed, memberKey: memberKey, code: code, suite: suite)
    }

    /// Configures another device of a member account for a suite `owner` shares with it (the
    /// account joined already, with an invitation, on its first device): the local suite
    /// `suiteName` in `directory` syncs with `owner`'s suite `remoteSuite` (by default of the same
    /// name). The server is asked for this account's role, which the suite records: first, or,
    /// for an encrypted suite whose keys (and token) come by pairing with another device of the
    /// account (`keys` `.pairingCode`), once the pairing is done.
    ///
    /// - Throws: `SyncError` (`notAMember` when the suite is not shared with this token's account;
    ///   nothing was changed then), and what `configure(suiteName:directory:)` throws.
    public func configure(suiteName: String, sharedBy owner: String, remoteSuite: String? = nil, directory: URL? = nil) async throws -> Result {
        var setup = self
        setup.tokenFile = Self.absolute(tokenFile)
        setup.caFile = caFile.map(Self.absolute)
        setup.keyFile = keyFile.map(Self.absolute)
        let remote = remoteSuite ?? suiteName
        setup.shared = Membership(owner: owner, suite: remote, role: .read)
        if case .pairingCode = keys {
            // The token comes with the pairing: the role is asked once it is here.
        } else {
            let list = try await setup.withClient(suite: suiteName) { client in try await client.members() }
            setup.shared?.role = list.you
            setup.shared?.account = list.account
        }
        return try await setup.configureShared(suite: suiteName, directory: directory)
    }

    // MARK: - Keys

    /// The suite name a local suite's keys are bound to: the owner's name for a suite another
    /// account shares with this one (the name in every sealed entry), else the suite's own.
    private func keysSuite(_ suite: String) -> String { shared?.suite ?? suite }

    /// The key file this configuration uses, nil for a plain suite, and the recovery key of new keys.
    private func prepareKeys(suite: String, previous: SyncSettings?) async throws -> (path: String, newRecoveryKey: RecoveryKey?)? {
        // A file the caller named, or the one this suite was configured with: never another's.
        let named = keyFile ?? previous?.keyFile
        let defaultPath = { () throws -> String in
            KeyFileName.defaultPath(suite: suite, server: server, token: try TokenFile.read(tokenFile), beside: tokenFile)
        }
        switch keys {
        case .pairingCode(let code, let deviceName):
            let path = try await pairedKeys(code: code, deviceName: deviceName, suite: suite, keyFile: named)
            // A member's keys (of another account's suite) sync that suite only: without the owner
            // named, this device would sync a suite of its own account's under the same name.
            if shared == nil, (try? SuiteKeys.read(from: path, suite: suite))?.sharing?.member != nil {
                throw SyncError(
                    .local,
                    """
                    these are the keys of a suite another account shares with yours: configure it with --shared-from OWNER/SUITE \
                    (as `pair` printed it on the other device); the keys and the token are in \(path) and \(tokenFile)
                    """
                )
            }
            return (path, nil)
        case .recoveryKey(let recovery):
            let path = try named ?? defaultPath()
            try await recoveredKeys(recovery, suite: suite, keyFile: path)
            return (path, nil)
        case .new, .unchanged:
            break
        }
        let isNew = if case .new = keys { true } else { false }
        if isNew || keyFile != nil, previous?.keyFile == nil {
            switch try await serverCopy(suite: suite) {
            case .plain:
                throw Refusal(.serverHoldsPlain, suite: suite)
            case .encrypted where !(named.map(FileManager.default.fileExists) ?? false):
                throw Refusal(.serverHoldsEncrypted, suite: suite)  // new keys would open none of its entries
            case .encrypted, .empty:
                break
            }
        }
        if isNew {
            if let named, FileManager.default.fileExists(atPath: named) {
                _ = try SuiteKeys.read(from: named, suite: keysSuite(suite))  // named, or configured before: keep its keys
                return (named, nil)
            }
            let path = try named ?? defaultPath()
            if FileManager.default.fileExists(atPath: path) { throw Refusal(.keyFileExists, suite: suite, path: path) }
            let recovery = RecoveryKey()
            try SuiteKeys(recoveryKey: recovery, suite: suite).write(to: path)
            return (path, recovery)
        }
        if let keyFile {
            _ = try SuiteKeys.read(from: keyFile, suite: keysSuite(suite))
            return (keyFile, nil)
        }
        if let kept = previous?.keyFile { return (kept, nil) }
        let joinsAnotherCopy = previous.map { $0.server != server } ?? true
        if joinsAnotherCopy, try await serverCopy(suite: suite) == .encrypted {
            throw Refusal(.serverHoldsEncrypted, suite: suite)
        }
        return nil
    }

    /// What the server holds of a suite, which decides whether a device can join it plain or encrypted.
    private enum ServerCopy {
        /// Nothing yet: the first device decides.
        case empty
        /// Entries in plain.
        case plain
        /// Sealed entries, or the key bags of an encrypted suite.
        case encrypted
    }

    /// Asks the server what it holds of `suite`: its key bags and the first entry of its snapshot.
    private func serverCopy(suite: String) async throws -> ServerCopy {
        do {
            return try await withClient(suite: suite) { client in
                let bags = try await client.keyBags()
                if bags.anchor != nil || !bags.epochs.isEmpty { return .encrypted }
                guard let first = try await client.snapshot(after: nil, limit: 1).entries.first else { return .empty }
                return first.sealed == nil ? .plain : .encrypted
            }
        } catch let error as SyncError where error.kind == .unavailable || error.kind == .authenticationNeeded {
            // Asked before anything is written: the caller can say that nothing was changed.
            throw Refusal(.serverNotAsked(error), suite: suite)
        }
    }

    /// Claims the pairing of `code` and writes the token and the keys it brings, together, once
    /// both are here: a pairing that fails leaves nothing behind. The keys go to `keyFile`, or by
    /// default to the file named for the suite, the server and the new token. Its progress is kept
    /// beside the token file (`PairingProgress`) until the suite records its settings, so that a
    /// run interrupted at any step after the claim finishes when it runs again with the same code.
    private func pairedKeys(code: PairingCode, deviceName: String?, suite: String, keyFile: String?) async throws -> String {
        // A key file named that exists must hold this suite's keys only.
        if let keyFile, FileManager.default.fileExists(atPath: keyFile) { _ = try SuiteKeys.read(from: keyFile, suite: keysSuite(suite)) }
        let progressFile = Self.pairingProgressFile(tokenFile: tokenFile)
        let kept = try PairingProgress.read(from: progressFile)
        if let kept, kept.pairingID != code.pairingID, kept.token != nil {
            throw SyncError(
                .local,
                """
                a pairing with another code was interrupted after its claim and left \(progressFile): run this command again with \
                that code to finish it, or remove \(progressFile) to give it up
                """
            )
        }
        // The token file may be this pairing's own, written by a run that was interrupted.
        let resumed = kept?.pairingID == code.pairingID ? kept?.token : nil
        if FileManager.default.fileExists(atPath: tokenFile), resumed == nil || (try? TokenFile.read(tokenFile)) != resumed {
            throw Refusal(.tokenFileExists, suite: suite, path: tokenFile)
        }
        // The token file's folder holds the pairing's progress from the claim on; made here (with
        // any folder above it that was missing), each goes again if the pairing fails with
        // nothing in it.
        let folder = URL(fileURLWithPath: tokenFile).deletingLastPathComponent()
        var made: [URL] = []
        var above = folder
        while !FileManager.default.fileExists(atPath: above.path) {
            made.append(above)
            above = above.deletingLastPathComponent()
        }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let token: String
        let keys: SuiteKeys
        do {
            (token, keys) = try await withClient(
                suite: suite,
                token: { throw SyncError(.authenticationNeeded, "no token yet: the pairing makes one") }
            ) {
                try await DevicePairing.accept(code: code, client: $0, deviceName: deviceName, progressFile: progressFile)
            }
        } catch {
            // Only if empty: what an interrupted claim kept there stays for the next run.
            for made in made {
                guard (try? FileManager.default.contentsOfDirectory(atPath: made.path))?.isEmpty == true else { break }
                try? FileManager.default.removeItem(at: made)
            }
            throw error
        }
        let path = keyFile ?? KeyFileName.defaultPath(suite: suite, server: server, token: token, beside: tokenFile)
        if !FileManager.default.fileExists(atPath: tokenFile) {
            try TokenFile.create(token, at: tokenFile)
            InterruptionPoint.reached("configure-pairing.token-written")
        }
        try keys.write(to: path)
        InterruptionPoint.reached("configure-pairing.keys-written")
        return path
    }

    /// Where a pairing whose token goes to `tokenFile` keeps its progress until the suite records
    /// its settings (`configure --pairing-code`): a run interrupted after its claim left this file,
    /// and running the same command again with the same code finishes the pairing.
    public static func pairingProgressFile(tokenFile: String) -> String {
        PairingProgress.path(beside: absolute(tokenFile))
    }

    /// The keys of every epoch from `recovery` (epoch 1 from the key itself, the later ones from
    /// the key bags the server keeps, sealed to it), written once they are known to open the
    /// suite's entries: another suite's recovery key passes the check characters but opens nothing.
    private func recoveredKeys(_ recovery: RecoveryKey, suite: String, keyFile: String) async throws {
        let keys = try await withClient(suite: suite) { client in
            let bags = try await client.keyBags()
            let keys = SuiteKeys(recoveryKey: recovery, suite: suite, keyBags: bags)
            let sample = try await client.snapshot(after: nil, limit: 3).entries
            // Nothing to check the key against, and nothing to join: new keys start a suite.
            if sample.isEmpty, bags.anchor == nil, bags.epochs.isEmpty { throw Refusal(.nothingToRecover, suite: suite) }
            let sealer = EntrySealer(keys: keys)
            if !sample.isEmpty, !sample.contains(where: { (try? sealer.open($0)) != nil }) {
                throw Refusal(.recoveryKeyOpensNothing, suite: suite)
            }
            return keys
        }
        if FileManager.default.fileExists(atPath: keyFile) { _ = try SuiteKeys.read(from: keyFile, suite: suite) }  // this suite's only
        try keys.write(to: keyFile)
    }

    /// Runs `body` with a client of the server for `suite`, on an HTTP client of its own.
    private func withClient<T>(
        suite: String,
        token: (@Sendable () throws -> String)? = nil,
        _ body: (SyncClient) async throws -> T
    ) async throws -> T {
        let http = try SyncClient.makeHTTPClient(caFile: caFile, connectTimeout: connectTimeout)
        let tokenFile = tokenFile
        var client = SyncClient(server: server, suite: shared?.suite ?? suite, http: http, token: token ?? { try TokenFile.read(tokenFile) })
        client.owner = shared?.owner
        client.connectTimeout = connectTimeout
        client.timeout = answerTimeout
        let result: Swift.Result<T, any Error>
        do { result = .success(try await body(client)) } catch { result = .failure(error) }
        try await http.shutdown()
        return try result.get()
    }
}

extension SyncSetup {
    /// Why a configuration cannot work, said before anything was changed.
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        /// What stands in the way.
        public enum Reason: Sendable {
            /// The server holds the suite in plain: it cannot become encrypted for one device.
            case serverHoldsPlain
            /// The server holds the suite encrypted, and this configuration brings no keys that
            /// open it: the keys come from a pairing code or the recovery key.
            case serverHoldsEncrypted
            /// New keys would replace a key file that exists and that the suite is not configured with.
            case keyFileExists
            /// A pairing would replace a token file that exists (another suite's token may be in it).
            case tokenFileExists
            /// The recovery key opens none of the suite's entries on the server: another suite's.
            case recoveryKeyOpensNothing
            /// The server holds nothing of the suite (no entry, no key bag): a recovery key joins a
            /// suite that a device has synced; new keys start one.
            case nothingToRecover
            /// The server could not be asked how it holds the suite (unreachable, or the token refused).
            case serverNotAsked(SyncError)
            /// Joining a shared suite would make a local suite of a name one already has.
            case localSuiteExists
            /// The suite is a copy of another account's suite, which this account left: configured
            /// as this account's own, it would upload that account's values into it.
            case copyOfLeftSuite(Membership)
            /// The suite is a copy of a suite whose owner's account was deleted on the server (its
            /// name now a new account's): joined or configured, it would upload the deleted
            /// account's values into an account of another person.
            case copyOfDeletedAccountsSuite(Membership)
        }

        /// What stands in the way.
        public var reason: Reason
        /// The suite being configured.
        public var suite: String
        /// The file concerned (`keyFileExists`, `tokenFileExists`).
        public var path: String?

        /// A refusal of the configuration of `suite`.
        public init(_ reason: Reason, suite: String, path: String? = nil) {
            self.reason = reason
            self.suite = suite
            self.path = path
        }

        /// What is wrong, in words that name no tool's options.
        public var description: String {
            switch reason {
            case .serverHoldsPlain:
                "the server holds \(suite) in plain, not end-to-end encrypted, and a suite is encrypted for every device or for none; nothing was changed"
            case .serverHoldsEncrypted:
                "the server holds \(suite) end-to-end encrypted: join it with a pairing code from a device that has it, or its recovery key; nothing was changed"
            case .keyFileExists:
                "the key file \(path ?? "") exists already and \(suite) is not configured with it; nothing was changed"
            case .tokenFileExists:
                "the token file \(path ?? "") exists already"
            case .recoveryKeyOpensNothing:
                "this recovery key does not open the entries of \(suite) on the server: is it this suite's?"
            case .nothingToRecover:
                "the server holds nothing of \(suite) yet, so a recovery key has nothing to join (new keys start a suite); nothing was changed"
            case .serverNotAsked(let error):
                "\(error); the server was asked how it holds \(suite), and nothing was changed"
            case .localSuiteExists:
                "a suite named \(suite) exists here already: join under another local name; nothing was changed"
            case .copyOfLeftSuite(let left):
                "\(suite) holds a copy of \(left.owner)'s suite \(left.suite), which this account left: configured as this account's own it would upload \(left.owner)'s values; join \(left.owner)'s suite again with an invitation; nothing was changed"
            case .copyOfDeletedAccountsSuite(let copy):
                "\(suite) holds a copy of \(copy.owner)'s suite \(copy.suite) from before the account \(copy.owner) was deleted: it joins none of the new account's suites, nor this account's; nothing was changed"
            }
        }
    }
}
