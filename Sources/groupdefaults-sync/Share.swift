import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

extension SyncCommand {
    struct Share: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Invite another account to the suite: print a one-time invitation code.",
            discussion: """
                On a device of the suite's owner (or of an admin member), makes an invitation \
                giving --role: read (pulls only), write, or admin (also invites and removes read and \
                write members; only the owner makes admins). Give the code to the person invited: \
                on a device of their own account, `groupdefaults-sync configure --invitation CODE \
                --server URL --token-file THEIR.token` joins. The code works once, for --expires \
                (default 24h; 60s to 30d); the server never sees it, only an id derived from it. \
                `invitations SUITE` lists them and revokes one. Only the owner's devices invite to \
                an end-to-end encrypted suite (an admin member there neither invites nor removes).

                An end-to-end encrypted suite is shared from a device of its owner (one that holds \
                the owner key: set up from the recovery key, or paired with one). The command then \
                waits until the code is used (keep it running, as `pair`): the joining device sends \
                a key of its own with a proof made from the code, and this device hands it the \
                suite's keys sealed to that key, which the server can neither read nor replace. The \
                joining device waits up to 10 minutes for them, then leaves the suite again: if \
                `share` was stopped, make a new invitation. Stopped (Ctrl-C, a `kill`) while it \
                waits, `share` revokes its invitation (or removes again an account that accepted it \
                without getting the keys); after a crash, the next `share` or `invitations` of the \
                suite on this device does so.

                Example: groupdefaults-sync share family --role write --expires 2h
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Option(help: ArgumentHelp("What the invited account may do: read, write or admin.", valueName: "ROLE")) var role: String
        @Option(help: ArgumentHelp("How long the code works: a number and s, m, h or d (default 24h).", valueName: "DURATION"))
        var expires: String?

        func validate() throws {
            guard let role = SuiteRole(rawValue: role), SuiteRole.invitable.contains(role) else {
                throw ValidationError("--role is read, write or admin, not '\(role)'")
            }
            if let expires { _ = try Self.duration(expires) }
        }

        /// "90s", "30m", "24h", "7d": 60 seconds to 30 days.
        static func duration(_ text: String) throws -> Duration {
            let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
            let lifetimes = InvitationRequest.lifetimes
            guard let unit = text.last.flatMap({ units[$0] }), let number = Int64(text.dropLast()), number > 0,
                number <= Int64(lifetimes.upperBound), lifetimes.contains(UInt64(number * unit))
            else {
                throw ValidationError("--expires is a number and s, m, h or d, from 60s to 30d (such as 2h or 7d), not '\(text)'")
            }
            return .seconds(number * unit)
        }

        func run() async throws {
            let role = SuiteRole(rawValue: role)!
            let expiry = try expires.map(Self.duration)
            try await withConfiguredEngine(options, server, suite) { defaults, engine in
                let waiting = WaitingShares(defaults)
                // Invitations a `share` that stopped (a crash, the network gone) left waiting.
                for line in await waiting.endLeftOver(engine) { output(line) }
                let (code, invitation) = try await engine.sharing.share(role: role, expiresIn: expiry)
                // Recorded (and locked for as long as this process runs) before the code is shown:
                // a crash from here on leaves it for the next `share` or `invitations` to end.
                let held = await engine.isEncrypted ? waiting.hold(invitation.id) : nil
                InterruptionPoint.reached("share.invitation-made")
                output(
                    "invitation \(invitation.id): \(invitation.role.rawValue) member of \(printable(invitation.owner))'s suite \(printable(invitation.suite)), until \(invitation.expires)"
                )
                output("code: \(code)")
                output(
                    "Give the code to the person invited; on a device of their account: groupdefaults-sync configure --invitation CODE --server URL --token-file THEIR.token"
                )
                guard await engine.isEncrypted else { return }
                if role == .admin {
                    output("(In an end-to-end encrypted suite an admin member neither invites nor removes: only your devices hold the owner key.)")
                }
                output("waiting for the invited device to join, to hand it the suite's keys (keep this running) …")
                let handed: InvitationInfo
                do {
                    handed = try await interruptible {
                        InterruptionPoint.reached("share.waiting")
                        return try await engine.sharing.handOverKeys(code: code, invitation: invitation)
                    }
                } catch let interrupted as Interrupted {
                    // Ctrl-C or a `kill`: nobody gets the suite through this code any more.
                    let undone = await WaitingShares.end(invitation.id, engine)
                    if undone != nil { held?.release() }
                    throw interrupted.failure(
                        undone
                            ?? "invitation \(invitation.id) may still be waiting: revoke it with `groupdefaults-sync invitations \(suite) --revoke \(invitation.id)`"
                    )
                } catch {
                    // Expired, revoked, or a claim without the code's proof: it is over either way.
                    held?.release()
                    throw error
                }
                held?.release()
                output("handed the keys of \(suite) to \(printable(handed.acceptedBy ?? "?"))'s device")
            }
        }
    }

    struct Invitations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the suite's invitations, or revoke one.",
            discussion: """
                Lists the invitations waiting, and those that ended in the last 30 days (accepted, \
                revoked, expired), newest first; --revoke ID revokes a waiting one, so that nobody \
                can use its code. For the suite's owner and admin members.

                Example: groupdefaults-sync invitations family --revoke inv_0123456789ab
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Option(help: ArgumentHelp("Revoke the invitation of this id (as listed: inv_ and 12 hex digits).", valueName: "ID")) var revoke: String?
        @Flag(help: "Print JSON.") var json = false

        func validate() throws {
            // The id, never the code: a code given here would be sent to the server.
            if let revoke, !(revoke.hasPrefix("inv_") && revoke.utf8.count == 16 && revoke.dropFirst(4).allSatisfy(\.isHexDigit)) {
                throw ValidationError(
                    "--revoke takes an invitation's id as `groupdefaults-sync invitations \(shellWord(suite))` lists it (inv_ and 12 hex digits), not its code"
                )
            }
        }

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { defaults, engine in
                for line in await WaitingShares(defaults).endLeftOver(engine) { output(line) }
                if let revoke {
                    let revoked = try await engine.sharing.revokeInvitation(id: revoke)
                    if json { return output(try prettyJSON(revoked)) }
                    output("invitation \(revoked.id) revoked: its code adds nobody")
                    return
                }
                let list = try await engine.sharing.invitations()
                if json { return output(try prettyJSON(InvitationList(invitations: list))) }
                if list.isEmpty { return output("\(suite): no invitations") }
                for invitation in list {
                    var line = "\(printable(invitation.id))  \(invitation.role.rawValue)  \(invitation.state.rawValue)"
                    if let account = invitation.acceptedBy { line += " by \(printable(account))" }
                    line += "  made by \(printable(invitation.createdBy)) \(invitation.created), until \(invitation.expires)"
                    output(line)
                }
            }
        }
    }

    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List who shares the suite, with roles and (for owners and admins) devices.",
            discussion: """
                The owner first, then each member with its role and when it joined; the owner and \
                admins also see each account's devices that used the suite, with when the server \
                last saw them.

                Example: groupdefaults-sync members family --json
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { _, engine in
                let list = try await engine.sharing.members()
                if json { return output(try prettyJSON(list)) }
                output("\(printable(list.owner))'s suite \(printable(list.suite)) (you: \(printable(list.account)), \(list.you.rawValue))")
                // In an encrypted suite a member without an admission was never handed the keys:
                // its join is under way, or stopped before the keys (a crash, the network gone).
                let encrypted = await engine.isEncrypted
                let holdsNoKeys = { (member: MemberList.Member) in encrypted && member.role != .owner && member.admission == nil }
                for member in list.members {
                    let waiting = holdsNoKeys(member) ? "  holds no keys yet" : ""
                    output("\(printable(member.account))  \(member.role.rawValue)" + (member.added.map { "  joined \($0)" } ?? "") + waiting)
                    for device in member.devices ?? [] {
                        output("  device \(device.name.map(printable) ?? "(unnamed)") \(device.deviceID)  last seen \(device.lastSeen)")
                    }
                }
                if let pinned = list.pinned, !pinned.isEmpty {
                    output(Pin.listing(try await engine.sharing.pinnedKeys()))
                }
                if list.members.contains(where: holdsNoKeys) {
                    output(
                        """
                        A member that holds no keys yet reads nothing: its join waits for a `share` of the owner's to hand \
                        them over, or stopped before they were (the same `configure --invitation` run again leaves the \
                        suite again). The owner removes it with `groupdefaults-sync unshare \(printable(suite)) --account NAME`.
                        """
                    )
                }
            }
        }
    }

    struct Pin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pin keys for the suite's members: only the owner's devices change them.",
            discussion: """
                For the suite's owner and admin members. The server refuses every member's write of a \
                pinned key (that change alone, code pinned_key); the member's device puts the owner's \
                value back, keeps its own change in the conflict journal (`conflicts`), and its \
                programs see the key as forced (objectIsForced). A key that holds no value yet may be \
                pinned: its values to come are the owner's. In an end-to-end encrypted suite the \
                server is given each key's id, never its name. Prints the pinned keys.

                Example: groupdefaults-sync pin family quietHours serverURL
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Argument(help: "The keys to pin.") var keys: [String]

        func validate() throws {
            if keys.isEmpty { throw ValidationError("name at least one key to pin") }
        }

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { _, engine in
                let pinned = try await engine.sharing.changePins(pin: keys, unpin: [])
                output(Self.listing(pinned))
            }
        }

        /// How `pin`, `unpin` and `members` show the pinned keys: one line.
        static func listing(_ pinned: [String]) -> String {
            pinned.isEmpty ? "no key is pinned" : "pinned for the members: " + pinned.map(printable).joined(separator: ", ")
        }
    }

    struct Unpin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unpin keys: the suite's members may change them again.",
            discussion: """
                For the suite's owner and admin members; others are refused (insufficient_role). \
                Prints the keys still pinned.

                Example: groupdefaults-sync unpin family quietHours
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Argument(help: "The keys to unpin.") var keys: [String]

        func validate() throws {
            if keys.isEmpty { throw ValidationError("name at least one key to unpin") }
        }

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { _, engine in
                let pinned = try await engine.sharing.changePins(pin: [], unpin: keys)
                output(Pin.listing(pinned))
            }
        }
    }

    struct Unshare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove an account from the suite: its devices lose access at once.",
            discussion: """
                For the suite's owner (any member) and admin members (read and write members). The \
                removed account's devices keep the values they hold, which stop changing; their \
                requests are refused from now on and their open event streams end. In an \
                end-to-end encrypted suite (owner only), this device then rotates the suite's keys: \
                the new key is sealed for the owner's devices and the remaining members' keys, so \
                that nothing written from then on opens with what the removed account holds, and \
                the other devices take it without pairing.

                Example: groupdefaults-sync unshare family --account bob
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Option(help: ArgumentHelp("The account to remove.", valueName: "ID")) var account: String

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { _, engine in
                let rotation: KeyRotation.Outcome?
                do { rotation = try await engine.sharing.unshare(account: account) } catch let error as SyncError where error.code == .notFound {
                    throw CommandFailure("\(printable(account)) is not a member of \(suite); nothing was changed")
                }
                output("\(printable(account)) no longer shares \(suite)")
                if let rotation {
                    output(
                        "rotated \(suite) to key epoch \(rotation.keys.currentEpoch) (\(rotation.resealed) \(rotation.resealed == 1 ? "entry" : "entries") sealed again): "
                            + "the other devices take the new key without pairing; \(printable(account))'s cannot"
                    )
                    for refused in rotation.refused {
                        output("not sealed again: \(printable(refused.key ?? refused.keyID)): \(printable(refused.reason))")
                    }
                }
            }
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Leave a suite another account shares with yours; the local copy stops syncing.",
            discussion: """
                Ends this account's membership (every device of the account loses access), then \
                stops syncing the local suite, whose values stay. The owner of a suite removes \
                members instead.

                Example: groupdefaults-sync leave family
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            // A suite that syncs no more (left already, or never joined) has nothing to leave.
            if let defaults = try? options.open(suite), (try? SyncSettings.stored(in: defaults)) == nil {
                throw CommandFailure("\(suite) does not sync: there is nothing to leave")
            }
            try await withConfiguredEngine(options, server, suite) { _, engine in
                let shared = engine.shared
                try await engine.sharing.leaveSuite()
                output(
                    "left \(shared.map { "\(printable($0.owner))'s suite \(printable($0.suite))" } ?? printable(suite)); \(suite) keeps its values and no longer syncs"
                )
            }
        }
    }
}

extension SuiteRole {
    /// "a read member", "an admin member": how the tools name a member's role in a sentence.
    var asMember: String { self == .admin ? "an admin member" : "a \(rawValue) member" }
}

/// `value` as indented JSON with sorted keys, as `--json` prints.
func prettyJSON(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}
