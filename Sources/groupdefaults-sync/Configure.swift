import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import SystemCalls

extension SyncCommand {
    struct Configure: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mark a suite as synced with a server, creating the suite if needed.",
            discussion: """
                From then on every process's writes to the suite are recorded for sync. At the first \
                sync the suite joins the server's: for the keys the server has, its values win over \
                what the suite held before this command (kept in the conflict journal: see \
                `conflicts`); what is written after it competes by last writer wins; the other keys \
                are uploaded. The token file must not be readable by group or others; the token is \
                read from it at each request and never copied into the suite. Configuring again \
                with a new token file resumes a paused sync.

                Keys matching an --exclude pattern ('*' matches any run of characters) never leave \
                the device: they are not pushed, and pulled values for them are not applied. \
                Configuring again with --exclude replaces the patterns; --no-exclude removes them.

                --encrypt makes the suite end-to-end encrypted (on the first device, before its first \
                sync): the server stores and orders its entries but cannot read key names or values. \
                The suite's keys are written to the key file (--key-file; by default beside the token \
                file, named for the suite, the server's host and port and the token, \
                SUITE.HOST-PORT.TOKENHASH.keys, mode 0600) and a recovery key is printed once: keep it \
                safe, it is the way to set up a device when no other one is at hand (--recovery-key \
                KEY). An existing key file is used only when --key-file names it (or the suite was \
                configured with it). A suite is encrypted for every device or for none: configure asks \
                the server first, and refuses --encrypt for a suite it holds in plain, and a plain \
                configuration (or new keys) for one it holds encrypted, before anything is written.

                --invitation joins a suite another account shares (`groupdefaults-sync share` on one of \
                its devices prints the code), with this account's own token, which must cover the \
                owner's name for the suite and may write: the local suite takes the owner's name for \
                it, or --as NAME. Nothing changes on either side unless the invitation is waiting and \
                no suite of that name exists here, or it is this account's copy of the same shared \
                suite (a member removed and invited again joins with the copy it kept). For an \
                end-to-end encrypted suite it waits (up to 10 minutes) until the owner's `share` \
                hands over the keys. Another device of a member account joins with --shared-from \
                OWNER/SUITE instead, and, for an encrypted suite, --pairing-code from `pair` on one \
                of that account's devices.

                Example: groupdefaults-sync configure group.com.example.chat --server https://sync.example.com --token-file ~/.config/groupdefaults/chat.token
                Example: groupdefaults-sync configure group.com.example.chat --server https://sync.example.com --pairing-code CODE --device tablet
                Example: groupdefaults-sync configure --invitation CODE --server https://sync.example.com --token-file ~/.config/groupdefaults/me.token --as family
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var waiting: ServerOptions
        @Argument(help: "The suite name (with --invitation, give --as instead, or nothing for the owner's name).") var suite: String?
        @Option(help: ArgumentHelp("The server's base URL, http:// or https://.", valueName: "URL")) var server: String
        @Option(
            help: ArgumentHelp(
                "Join a suite another account shares, with the code `groupdefaults-sync share` printed on one of its devices.",
                valueName: "CODE"
            )
        )
        var invitation: String?
        @Option(help: ArgumentHelp("As --invitation, the code read from this file's first line; - reads standard input.", valueName: "PATH"))
        var invitationFile: String?
        @Option(
            help: ArgumentHelp(
                "Another device of an account that joined a shared suite: the owner's account, and its name for the suite if it differs from SUITE.",
                valueName: "OWNER[/SUITE]"
            )
        )
        var sharedFrom: String?
        @Option(
            name: .customLong("as"),
            help: ArgumentHelp("With --invitation, the local suite's name (default: the owner's name for it).", valueName: "NAME")
        )
        var localName: String?
        @Option(
            help: ArgumentHelp(
                "A file holding the token (mode 0600); with --pairing-code, where to write the new one (default: <suite>.token in ~/.config/groupdefaults).",
                valueName: "PATH"
            )
        )
        var tokenFile: String?
        @Option(help: ArgumentHelp("A PEM file of a private certificate authority to trust.", valueName: "PATH")) var caFile: String?
        @Option(
            name: .customLong("exclude"),
            help: ArgumentHelp("Keys that never leave this device (repeatable; '*' matches any run of characters).", valueName: "PATTERN")
        )
        var exclude: [String] = []
        @Flag(help: "Remove every --exclude pattern set before.") var noExclude = false
        @Flag(help: "Encrypt the suite end to end: create its keys and print its recovery key once.") var encrypt = false
        @Option(
            help: ArgumentHelp(
                "The file of the suite's keys (mode 0600; default: SUITE.HOST-PORT.TOKENHASH.keys beside the token file).",
                valueName: "PATH"
            )
        )
        var keyFile: String?
        @Option(
            help: ArgumentHelp(
                "Join an encrypted suite with its recovery key (--recovery-key-file keeps it out of `ps` and the shell's history).",
                valueName: "KEY"
            )
        ) var recoveryKey: String?
        @Option(
            help: ArgumentHelp(
                "Join an encrypted suite with the recovery key read from this file's first line; - reads standard input.",
                valueName: "PATH"
            )
        ) var recoveryKeyFile: String?
        @Option(
            help: ArgumentHelp(
                "Join an encrypted suite with a code from `groupdefaults-sync pair` on a device that has it: this device gets its own token and the suite's keys.",
                valueName: "CODE"
            )
        )
        var pairingCode: String?
        @Option(help: ArgumentHelp("As --pairing-code, the code read from this file's first line; - reads standard input.", valueName: "PATH"))
        var pairingCodeFile: String?
        @Option(
            name: .customLong("device"),
            help: ArgumentHelp("With --pairing-code, the name the new token is bound to (shown in device lists).", valueName: "NAME")
        )
        var deviceName: String?
        @Option(help: ArgumentHelp("How many replaced values the conflict journal keeps (default 1000).", valueName: "N"))
        var journalEntries: Int?
        @Option(help: ArgumentHelp("How many days the conflict journal keeps a replaced value (default 30).", valueName: "DAYS"))
        var journalDays: Int?

        func validate() throws {
            if noExclude && !exclude.isEmpty { throw ValidationError("--no-exclude and --exclude contradict each other") }
            for pattern in exclude {
                do { _ = try GlobPattern(pattern) } catch { throw ValidationError("--exclude: \(error)") }
            }
            // A replaced value is never lost without a trace: the journal keeps one, for a day, at least.
            if let journalEntries, journalEntries < 1 {
                throw ValidationError("--journal-entries must be 1 or more: the journal is where a replaced value stays")
            }
            if let journalDays, journalDays < 1 {
                throw ValidationError("--journal-days must be 1 or more: the journal is where a replaced value stays")
            }
            if recoveryKey != nil && recoveryKeyFile != nil { throw ValidationError("--recovery-key and --recovery-key-file: give one of them") }
            if pairingCode != nil && pairingCodeFile != nil { throw ValidationError("--pairing-code and --pairing-code-file: give one of them") }
            if [encrypt, recovers, pairs].filter({ $0 }).count > 1 {
                throw ValidationError("--encrypt, --recovery-key and --pairing-code each say where the keys come from: give one of them")
            }
            if tokenFile == nil && !pairs { throw ValidationError("--token-file is needed (or --pairing-code, which makes a token)") }
            if deviceName != nil && !pairs { throw ValidationError("--device names the token a pairing makes: it goes with --pairing-code") }
            if let deviceName, let problem = NameKind.device.problem(with: deviceName) { throw ValidationError("--device: \(problem)") }
            if invitation != nil && invitationFile != nil { throw ValidationError("--invitation and --invitation-file: give one of them") }
            if invites {
                if suite != nil { throw ValidationError("with --invitation the suite is the owner's: name it here with --as NAME") }
                if encrypt || recovers || pairs || keyFile != nil {
                    throw ValidationError(
                        "--invitation joins a shared suite: it does not go with --encrypt, --recovery-key, --pairing-code or --key-file"
                    )
                }
                if tokenFile == nil { throw ValidationError("--invitation needs --token-file: this account's own token") }
                if sharedFrom != nil { throw ValidationError("--invitation and --shared-from: give one of them") }
            } else {
                if localName != nil { throw ValidationError("--as names the local copy of a shared suite: it goes with --invitation") }
                if suite == nil { throw ValidationError("Missing expected argument '<suite>'") }
            }
            try validateSharedFrom()
        }

        private var invites: Bool { invitation != nil || invitationFile != nil }

        /// What goes with `--shared-from` (checked in `validate`).
        private func validateSharedFrom() throws {
            guard sharedFrom != nil else { return }
            if encrypt || recovers || keyFile != nil {
                throw ValidationError(
                    "--shared-from configures a shared suite: it does not go with --encrypt, --recovery-key or --key-file (an encrypted one's keys come with --pairing-code from another device of this account)"
                )
            }
            if tokenFile == nil { throw ValidationError("--shared-from needs --token-file: this account's own token") }
        }

        private var recovers: Bool { recoveryKey != nil || recoveryKeyFile != nil }
        private var pairs: Bool { pairingCode != nil || pairingCodeFile != nil }

        /// A secret given on the command line, or read from the first line of a file (`-`: standard
        /// input), so that it need not show in `ps` or the shell's history.
        static func secret(_ text: String?, file: String?, what: String) throws -> String? {
            guard let file else { return text }
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                if let exposure = PrivateFileRule.exposure(of: file, what: "the \(what) file") { throw CommandFailure(exposure) }
                do { data = try Data(contentsOf: URL(fileURLWithPath: file)) } catch {
                    throw CommandFailure("cannot read the \(what) from \(file): \((error as NSError).localizedDescription)")
                }
            }
            let line = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
            guard !line.trimmingCharacters(in: .whitespaces).isEmpty else {
                throw CommandFailure("\(file == "-" ? "standard input" : file) holds no \(what)")
            }
            return line
        }

        func run() async throws {
            try await perform {
                guard let url = URL(string: server), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
                    url.host?.isEmpty == false
                else { throw CommandFailure("--server must be an http:// or https:// URL, got \(server)") }
                if let port = url.port, !(1...65535).contains(port) {
                    throw CommandFailure("--server names the port \(port): a port is 1 to 65535")
                }
                if invites { return try await join(url) }
                let suite = self.suite ?? ""
                var setup = SyncSetup(server: url, tokenFile: tokenFile ?? SyncSetup.defaultTokenFile(suite: suite), caFile: caFile)
                if let sharedFrom { return try await configureMember(setup, suite: suite, sharedFrom: sharedFrom) }
                setup.keyFile = keyFile
                setup.keys = try keys()
                setup.localOnlyKeys = noExclude ? [] : exclude.isEmpty ? nil : exclude
                setup.journalEntries = journalEntries
                setup.journalAge = journalDays.map { .seconds($0 * 86_400) }
                setup.connectTimeout = waiting.connect
                setup.answerTimeout = waiting.answer
                let result: SyncSetup.Result
                let configuring = setup
                let directory = options.directoryURL
                do {
                    result = try await interruptedPairing(setup) { try await configuring.configure(suiteName: suite, directory: directory) }
                } catch let refusal as SyncSetup.Refusal {
                    throw Self.failure(refusal)
                }
                let settings = result.settings
                var line = "\(suite) syncs with \(url.absoluteString) (token from \(settings.tokenFile))"
                if !settings.localOnlyKeys.isEmpty { line += "; local-only keys: \(settings.localOnlyKeys.map(printable).joined(separator: " "))" }
                if let keyFile = settings.keyFile { line += "; end-to-end encrypted (keys in \(keyFile))" }
                output(line)
                if let recovery = result.newRecoveryKey {
                    output("recovery key: \(recovery)")
                    output(
                        "Write the recovery key down and keep it safe: it is shown only this once, and it is the way to set up a device when none of yours is at hand."
                    )
                }
            }
        }

        /// `--shared-from OWNER[/SUITE]`: another device of a member account.
        private func configureMember(_ setup: SyncSetup, suite: String, sharedFrom: String) async throws {
            var setup = setup
            setup.keys = try keys()
            setup.localOnlyKeys = noExclude ? [] : exclude.isEmpty ? nil : exclude
            setup.journalEntries = journalEntries
            setup.journalAge = journalDays.map { .seconds($0 * 86_400) }
            setup.connectTimeout = waiting.connect
            setup.answerTimeout = waiting.answer
            let parts = sharedFrom.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard let owner = parts.first, !owner.isEmpty, parts.count == 1 || !parts[1].isEmpty else {
                throw CommandFailure("--shared-from is the owner's account, or OWNER/SUITE, not '\(sharedFrom)'")
            }
            let result: SyncSetup.Result
            let remote = parts.count == 2 ? parts[1] : suite
            let configuring = setup
            let directory = options.directoryURL
            do {
                result = try await interruptedPairing(setup) {
                    try await configuring.configure(suiteName: suite, sharedBy: owner, remoteSuite: remote, directory: directory)
                }
            } catch let refusal as SyncSetup.Refusal {
                throw Self.failure(refusal)
            } catch let error as SyncError where error.code == .notAMember {
                throw CommandFailure(
                    "\(owner) shares no suite '\(remote)' with this account: check --shared-from OWNER/SUITE (the owner's account, and its name for the suite); nothing was changed"
                )
            }
            let shared = result.settings.shared
            output(
                "\(suite) syncs with \(server) (token from \(result.settings.tokenFile)): "
                    + "\(printable(owner))'s suite \(printable(shared?.suite ?? suite)), as \(shared?.role.asMember ?? "a member")"
                    + (result.settings.keyFile.map { "; end-to-end encrypted (keys in \($0))" } ?? "")
            )
        }

        /// `--invitation`: joins the shared suite and says whose it is.
        private func join(_ url: URL) async throws {
            let code = try InvitationCode(parsing: try Self.secret(invitation, file: invitationFile, what: "invitation code") ?? "")
            var setup = SyncSetup(server: url, tokenFile: tokenFile ?? "", caFile: caFile)
            setup.localOnlyKeys = noExclude ? [] : exclude.isEmpty ? nil : exclude
            setup.journalEntries = journalEntries
            setup.journalAge = journalDays.map { .seconds($0 * 86_400) }
            setup.connectTimeout = waiting.connect
            setup.answerTimeout = waiting.answer
            let joined: SyncSetup.Joined
            let (joining, localName, directory) = (setup, self.localName, options.directoryURL)
            do {
                // Ctrl-C or a `kill` while it waits for the keys: the join leaves the suite again
                // (`SyncSetup.join`), then the command says so. One that comes once the join is
                // done (the local suite set up) changes nothing: the join stands, and is reported.
                joined = try await interruptible(keepingFinished: true) {
                    try await joining.join(invitation: code, localName: localName, directory: directory) {
                        output(
                            "waiting for a device of the suite's owner to hand over its keys (its share command must be running; at most \(Int(SyncSetup.keyHandoverWait / 60)) minutes) …"
                        )
                    }
                }
            } catch let interrupted as Interrupted {
                throw interrupted.failure("this account left the suite again (nothing is joined); ask for a new invitation")
            } catch let refusal
                as SyncSetup.Refusal
            {
                throw Self.failure(refusal)
            } catch let error as SyncError where error.code == .forbidden {
                // The token worked, and cannot join: it does not cover the suite, or is read-only.
                throw CommandFailure(
                    "\(error.detail); join with --invitation CODE and a token of this account that covers the owner's name for the suite and may write; nothing was changed",
                    status: 3
                )
            }
            let membership = joined.membership
            output(
                "\(printable(joined.localName)) syncs with \(url.absoluteString) (token from \(joined.result.settings.tokenFile)): "
                    + "\(printable(membership.owner))'s suite \(printable(membership.suite)), as \(membership.role.asMember)"
                    + (joined.result.settings.keyFile.map { "; end-to-end encrypted (keys from the owner's device, in \($0))" } ?? "")
            )
            if membership.role == .read {
                output("A read member's changes stay on this device: the server keeps the owner's and the writers' values.")
            }
        }

        /// Runs `configure`; with a pairing code, a Ctrl-C or a `kill` while it claims and waits for
        /// the keys ends it with one line saying what was left and how to go on: the pairing's
        /// progress is kept (`SyncSetup.pairingProgressFile`), and the same command finishes it.
        private func interruptedPairing(
            _ setup: SyncSetup,
            _ configure: @escaping @Sendable () async throws -> SyncSetup.Result
        ) async throws -> SyncSetup.Result {
            guard case .pairingCode = setup.keys else { return try await configure() }
            do { return try await interruptible(configure) } catch let interrupted as Interrupted {
                let progress = SyncSetup.pairingProgressFile(tokenFile: setup.tokenFile)
                let suite = self.suite ?? ""
                if FileManager.default.fileExists(atPath: progress) {
                    throw interrupted.failure(
                        "\(suite) is not configured yet, and the pairing is kept in \(progress): run this same command again, with the same code, before the code expires (10 minutes after pair printed it) to finish it"
                    )
                }
                if let defaults = try? options.open(suite), (try? SyncSettings.stored(in: defaults))?.keyFile != nil {
                    throw interrupted.failure("the pairing had finished: \(suite) syncs, with its keys")
                }
                throw interrupted.failure("nothing was claimed and nothing is configured: run this same command again")
            }
        }

        /// Where the keys come from, as the options say.
        private func keys() throws -> SyncSetup.Keys {
            if let text = try Self.secret(pairingCode, file: pairingCodeFile, what: "pairing code") {
                return .pairingCode(try PairingCode(parsing: text), deviceName: deviceName)
            }
            if let text = try Self.secret(recoveryKey, file: recoveryKeyFile, what: "recovery key") {
                return .recoveryKey(try RecoveryKey(parsing: text))
            }
            return encrypt ? .new : .unchanged
        }

        /// A refusal in the tool's words: what is wrong, and which options put it right.
        private static func failure(_ refusal: SyncSetup.Refusal) -> CommandFailure {
            let suite = refusal.suite
            switch refusal.reason {
            case .serverHoldsPlain:
                return CommandFailure(
                    """
                    the server holds \(suite) in plain, not end-to-end encrypted, and a suite is encrypted for every device or \
                    for none: configure it without --encrypt and --key-file (or encrypt a suite of another name); nothing was changed
                    """
                )
            case .serverHoldsEncrypted:
                return CommandFailure(
                    """
                    the server holds \(suite) end-to-end encrypted: join it with a pairing code (groupdefaults-sync pair \(suite) on a \
                    device that has it, then configure --pairing-code CODE here) or its recovery key (--recovery-key-file PATH); \
                    nothing was changed
                    """
                )
            case .keyFileExists:
                return CommandFailure(
                    """
                    the key file \(refusal.path ?? "") exists already and \(suite) is not configured with it: to use its keys, name it \
                    with --key-file; to make new keys, move it away first; nothing was changed
                    """
                )
            case .tokenFileExists:
                return CommandFailure("the token file \(refusal.path ?? "") exists already: give another --token-file")
            case .recoveryKeyOpensNothing:
                return CommandFailure(refusal.description)
            case .nothingToRecover:
                return CommandFailure(
                    """
                    the server holds nothing of \(suite) yet, so a recovery key has nothing to join: sync the device that made it \
                    first, or start the suite with --encrypt; nothing was changed
                    """
                )
            case .localSuiteExists:
                return CommandFailure("a suite named \(suite) exists here already: join under another name with --as NAME; nothing was changed")
            case .copyOfLeftSuite(let left):
                return CommandFailure(
                    UnconfiguredHint.rejoin(suite: suite, left: left)
                        + "; configured as your own it would upload \(left.owner)'s values, so nothing was changed"
                )
            case .copyOfDeletedAccountsSuite(let copy):
                return CommandFailure(
                    "\(suite) holds a copy of \(copy.owner)'s suite \(copy.suite) from before the account \(copy.owner) was deleted, and "
                        + "\(copy.owner) is now a new account: the copy joins none of its suites, nor yours (it would upload the deleted "
                        + "account's values); keep it on this device (`groupdefaults-sync unconfigure \(suite)`), or join with --as NAME "
                        + "under another name; nothing was changed"
                )
            case .serverNotAsked(let error) where error.kind == .authenticationNeeded:
                // The token this very command names: no advice to run configure again. Status 3 when
                // the server refused it; a token file that cannot be read is a mistake like any other.
                return CommandFailure("\(error.detail); nothing was changed", status: error.status == nil ? 1 : 3)
            case .serverNotAsked(let error):
                return CommandFailure(
                    "\(error); configure asks the server how it holds \(suite), and nothing was changed: "
                        + (error.isLasting ? "check --server" : "try again later")
                )
            }
        }
    }

    struct Unconfigure: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop syncing a suite: forget its server, cursor and pending marks (its values stay).",
            discussion: "Example: groupdefaults-sync unconfigure group.com.example.chat"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await perform {
                let defaults = try options.open(suite)
                guard try defaults.syncState().isSynced else { throw CommandFailure("\(suite) does not sync: there is nothing to unconfigure") }
                // A member's copy remembers whose it was: no later plain configure uploads the
                // owner's values as this account's own.
                try defaults.disableSync(rememberingShare: true)
                output("\(suite) no longer syncs")
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget the server cursor: the next sync reads the server's snapshot again.",
            discussion: """
                The snapshot is merged by last writer wins; keys the server no longer has are removed \
                unless they have changes not yet pushed, which are kept and pushed (a key the server \
                holds but serves as unavailable is kept).

                Example: groupdefaults-sync reset group.com.example.chat
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await perform {
                let defaults = try options.open(suite)
                let state = try defaults.syncState()
                guard state.isSynced else { throw CommandFailure("\(suite) is not configured for sync") }
                // A suite that never synced joins at its first sync anyway; 0 is "read the snapshot again".
                if state.cursor != nil { try defaults.setSyncCursor(0) }
                output("\(suite): the next sync reads the server's snapshot")
            }
        }
    }
}
