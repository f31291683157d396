import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync

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

                Example: groupdefaults-sync configure group.com.example.chat --server https://sync.example.com --token-file ~/.config/groupdefaults/chat.token
                Example: groupdefaults-sync configure group.com.example.chat --server https://sync.example.com --pairing-code CODE --device tablet
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var waiting: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Option(help: ArgumentHelp("The server's base URL, http:// or https://.", valueName: "URL")) var server: String
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
            if let journalEntries, journalEntries < 0 { throw ValidationError("--journal-entries must not be negative") }
            if let journalDays, journalDays < 0 { throw ValidationError("--journal-days must not be negative") }
            if recoveryKey != nil && recoveryKeyFile != nil { throw ValidationError("--recovery-key and --recovery-key-file: give one of them") }
            if pairingCode != nil && pairingCodeFile != nil { throw ValidationError("--pairing-code and --pairing-code-file: give one of them") }
            if [encrypt, recovers, pairs].filter({ $0 }).count > 1 {
                throw ValidationError("--encrypt, --recovery-key and --pairing-code each say where the keys come from: give one of them")
            }
            if tokenFile == nil && !pairs { throw ValidationError("--token-file is needed (or --pairing-code, which makes a token)") }
            if deviceName != nil && !pairs { throw ValidationError("--device names the token a pairing makes: it goes with --pairing-code") }
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
                var info = stat()
                if stat(file, &info) == 0, info.st_mode & 0o077 != 0 {
                    throw CommandFailure(
                        "the \(what) file \(file) can be read by its group or others (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 \(file)"
                    )
                }
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
                let tokenPath = Self.absolute(tokenFile ?? Self.defaultTokenFile(suite: suite))
                let caPath = caFile.map(Self.absolute)
                if let caPath {
                    try await waiting.makeHTTPClient(caFile: caPath).shutdown()  // checks that it reads
                }
                // A suite that does not exist yet is created only once the keys are prepared: a failed
                // pairing or recovery leaves nothing behind.
                let existing: SharedDefaults?
                do { existing = try options.open(suite) } catch let error as SharedDefaultsError where error.code == .suiteNotFound {
                    existing = nil
                }
                let previous = try existing.flatMap { try SyncSettings.stored(in: $0) }
                let encryption = try await prepareKeys(suite: suite, server: url, tokenFile: tokenPath, caFile: caPath, previous: previous)
                let defaults = try existing ?? options.openOrCreate(suite)
                // A different server is a different copy of the suite: forget the old cursor and marks.
                if let previous, previous.server != url {
                    try defaults.disableSync()
                }
                let localOnly = noExclude ? [] : !exclude.isEmpty ? exclude : previous?.localOnlyKeys ?? []
                try SyncSettings(server: url, tokenFile: tokenPath, caFile: caPath, localOnlyKeys: localOnly, keyFile: encryption?.path)
                    .store(in: defaults)
                if journalEntries != nil || journalDays != nil {
                    var bounds = try defaults.conflictJournalBounds()
                    if let journalEntries { bounds.maximumCount = journalEntries }
                    if let journalDays { bounds.maximumAge = .seconds(journalDays * 86_400) }
                    try defaults.setConflictJournalBounds(bounds)
                }
                var line = "\(suite) syncs with \(url.absoluteString) (token from \(tokenPath))"
                if !localOnly.isEmpty { line += "; local-only keys: \(localOnly.joined(separator: " "))" }
                if let encryption { line += "; end-to-end encrypted (keys in \(encryption.path))" }
                output(line)
                if let recovery = encryption?.newRecoveryKey {
                    output("recovery key: \(recovery)")
                    output(
                        "Write the recovery key down and keep it safe: it is shown only this once, and it is the way to set up a device when none of yours is at hand."
                    )
                }
            }
        }

        /// The key file this configuration uses, nil for a plain suite, and the recovery key to show
        /// when new keys were made. The server is asked first whether it holds the suite, plain or
        /// encrypted, when that decides whether the configuration can work; the keys are written
        /// before the suite records the file. A refusal or failure leaves everything as it was.
        private func prepareKeys(
            suite: String,
            server: URL,
            tokenFile: String,
            caFile: String?,
            previous: SyncSettings?
        ) async throws -> (path: String, newRecoveryKey: RecoveryKey?)? {
            // A file the user named, or the one this suite was configured with: never another's.
            let named = keyFile.map(Self.absolute) ?? previous?.keyFile
            if let text = try Self.secret(pairingCode, file: pairingCodeFile, what: "pairing code") {
                let path = try await pairedKeys(
                    code: try PairingCode(parsing: text),
                    suite: suite,
                    server: server,
                    tokenFile: tokenFile,
                    keyFile: named,
                    caFile: caFile
                )
                return (path, nil)
            }
            let defaultPath = { () throws -> String in
                KeyFileName.defaultPath(suite: suite, server: server, token: try TokenFile.read(tokenFile), beside: tokenFile)
            }
            if let text = try Self.secret(recoveryKey, file: recoveryKeyFile, what: "recovery key") {
                let path = try named ?? defaultPath()
                try await recoveredKeys(
                    try RecoveryKey(parsing: text),
                    suite: suite,
                    server: server,
                    tokenFile: tokenFile,
                    keyFile: path,
                    caFile: caFile
                )
                return (path, nil)
            }
            let joinsAnotherCopy = previous.map { $0.server != server } ?? true
            if encrypt || keyFile != nil, previous?.keyFile == nil {
                switch try await serverCopy(suite: suite, server: server, tokenFile: tokenFile, caFile: caFile) {
                case .plain:
                    throw CommandFailure(
                        """
                        the server holds \(suite) in plain, not end-to-end encrypted, and a suite is encrypted for every device or \
                        for none: configure it without --encrypt and --key-file (or encrypt a suite of another name); nothing was changed
                        """
                    )
                case .encrypted where !(named.map(FileManager.default.fileExists) ?? false):
                    throw CommandFailure(Self.joinEncrypted(suite))  // new keys would open none of its entries
                case .encrypted, .empty:
                    break
                }
            }
            if encrypt {
                if let named, FileManager.default.fileExists(atPath: named) {
                    _ = try SuiteKeys.read(from: named, suite: suite)  // named, or configured before: keep its keys
                    return (named, nil)
                }
                let path = try named ?? defaultPath()
                if FileManager.default.fileExists(atPath: path) {
                    throw CommandFailure(
                        """
                        the key file \(path) exists already and \(suite) is not configured with it: to use its keys, name it with \
                        --key-file; to make new keys, move it away first; nothing was changed
                        """
                    )
                }
                let recovery = RecoveryKey()
                try SuiteKeys(recoveryKey: recovery, suite: suite).write(to: path)
                return (path, recovery)
            }
            if let keyFile {
                let path = Self.absolute(keyFile)
                _ = try SuiteKeys.read(from: path, suite: suite)
                return (path, nil)
            }
            if let kept = previous?.keyFile { return (kept, nil) }
            if joinsAnotherCopy, try await serverCopy(suite: suite, server: server, tokenFile: tokenFile, caFile: caFile) == .encrypted {
                throw CommandFailure(Self.joinEncrypted(suite))
            }
            return nil
        }

        /// Why a suite the server holds encrypted cannot be configured without its keys, and how to get them.
        private static func joinEncrypted(_ suite: String) -> String {
            """
            the server holds \(suite) end-to-end encrypted: join it with a pairing code (groupdefaults-sync pair \(suite) on a \
            device that has it, then configure --pairing-code CODE here) or its recovery key (--recovery-key-file PATH); \
            nothing was changed
            """
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

        /// Asks the server (with the token in `tokenFile`) what it holds of `suite`: its key bags and
        /// the first entry of its snapshot.
        private func serverCopy(suite: String, server: URL, tokenFile: String, caFile: String?) async throws -> ServerCopy {
            do {
                return try await withHTTPClient(waiting, caFile: caFile) { http in
                    let client = waiting.applied(to: SyncClient(server: server, suite: suite, http: http) { try TokenFile.read(tokenFile) })
                    let bags = try await client.keyBags()
                    if bags.anchor != nil || !bags.epochs.isEmpty { return .encrypted }
                    guard let first = try await client.snapshot(after: nil, limit: 1).entries.first else { return .empty }
                    return first.sealed == nil ? .plain : .encrypted
                }
            } catch let error as SyncError where error.kind == .unavailable {
                // Asked before anything is written: say so rather than "nothing pending was lost".
                throw CommandFailure(
                    "\(error); configure asks the server how it holds \(suite), and nothing was changed: "
                        + (error.isLasting ? "check --server" : "try again later")
                )
            } catch let error as SyncError where error.kind == .authenticationNeeded {
                // The token this very command names: no advice to run configure again. Status 3 when
                // the server refused it; a token file that cannot be read is a mistake like any other.
                throw CommandFailure("\(error.detail); nothing was changed", status: error.status == nil ? 1 : 3)
            }
        }

        static func absolute(_ path: String) -> String {
            URL(fileURLWithPath: path).standardizedFileURL.path
        }

        /// Claims the pairing of `code` and writes the token and the keys it brings, together, once
        /// both are here: a pairing that fails, or is interrupted, leaves nothing behind. The keys go
        /// to `keyFile`, or by default to the file named for the suite, the server and the new token.
        private func pairedKeys(
            code: PairingCode,
            suite: String,
            server: URL,
            tokenFile: String,
            keyFile: String?,
            caFile: String?
        ) async throws -> String {
            // A key file named that exists must hold this suite's keys only.
            if let keyFile, FileManager.default.fileExists(atPath: keyFile) { _ = try SuiteKeys.read(from: keyFile, suite: suite) }
            guard !FileManager.default.fileExists(atPath: tokenFile) else {
                throw CommandFailure("the token file \(tokenFile) exists already: give another --token-file")
            }
            let (token, keys) = try await withHTTPClient(waiting, caFile: caFile) { http in
                let client = waiting.applied(
                    to: SyncClient(server: server, suite: suite, http: http) {
                        throw SyncError(.authenticationNeeded, "no token yet: the pairing makes one")
                    }
                )
                return try await DevicePairing.accept(code: code, client: client, deviceName: deviceName)
            }
            let path = keyFile ?? KeyFileName.defaultPath(suite: suite, server: server, token: token, beside: tokenFile)
            try FileManager.default.createDirectory(
                at: URL(fileURLWithPath: tokenFile).deletingLastPathComponent(),
                withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700]
            )
            try TokenFile.create(token, at: tokenFile)
            try keys.write(to: path)
            return path
        }

        /// The keys of every epoch from `recovery` (epoch 1 from the key itself, the later ones from
        /// the key bags the server keeps, sealed to it), written once they are known to open the
        /// suite's entries: another suite's recovery key passes the check characters but opens nothing.
        private func recoveredKeys(
            _ recovery: RecoveryKey,
            suite: String,
            server: URL,
            tokenFile: String,
            keyFile: String,
            caFile: String?
        ) async throws {
            let keys = try await withHTTPClient(waiting, caFile: caFile) { http in
                let client = waiting.applied(to: SyncClient(server: server, suite: suite, http: http) { try TokenFile.read(tokenFile) })
                let keys = SuiteKeys(recoveryKey: recovery, suite: suite, keyBags: try await client.keyBags())
                let sample = try await client.snapshot(after: nil, limit: 3).entries
                let sealer = EntrySealer(keys: keys)
                if !sample.isEmpty, !sample.contains(where: { (try? sealer.open($0)) != nil }) {
                    throw CommandFailure("this recovery key does not open the entries of \(suite) on the server: is it this suite's?")
                }
                return keys
            }
            if FileManager.default.fileExists(atPath: keyFile) { _ = try SuiteKeys.read(from: keyFile, suite: suite) }  // this suite's only
            try keys.write(to: keyFile)
        }

        /// Where a paired device's token goes when no --token-file is given.
        static func defaultTokenFile(suite: String) -> String {
            let environment = ProcessInfo.processInfo.environment
            let config =
                environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.config"
            return config + "/groupdefaults/\(suite).token"
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
                try defaults.disableSync()
                output("\(suite) no longer syncs")
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget the server cursor: the next sync reads the server's snapshot again.",
            discussion: """
                The snapshot is merged by last writer wins; keys the server no longer has are removed \
                unless they have changes not yet pushed, which are kept and pushed.

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
