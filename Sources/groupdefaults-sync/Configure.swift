import ArgumentParser
import CommandLineSupport
import AsyncHTTPClient
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
                """)

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String
        @Option(help: ArgumentHelp("The server's base URL, http:// or https://.", valueName: "URL")) var server: String
        @Option(help: ArgumentHelp("A file holding the token (mode 0600).", valueName: "PATH")) var tokenFile: String
        @Option(help: ArgumentHelp("A PEM file of a private certificate authority to trust.", valueName: "PATH")) var caFile: String?
        @Option(name: .customLong("exclude"),
                help: ArgumentHelp("Keys that never leave this device (repeatable; '*' matches any run of characters).", valueName: "PATTERN"))
        var exclude: [String] = []
        @Flag(help: "Remove every --exclude pattern set before.") var noExclude = false
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
        }

        func run() async throws {
            try await perform {
                guard let url = URL(string: server), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
                      url.host?.isEmpty == false
                else { throw CommandFailure("--server must be an http:// or https:// URL, got \(server)") }
                let tokenPath = Self.absolute(tokenFile)
                let caPath = caFile.map(Self.absolute)
                if let caPath {
                    try await SyncClient.makeHTTPClient(caFile: caPath).shutdown()  // checks that it reads
                }
                let defaults = try options.openOrCreate(suite)
                // A different server is a different copy of the suite: forget the old cursor and marks.
                let previous = try SyncSettings.stored(in: defaults)
                if let previous, previous.server != url {
                    try defaults.disableSync()
                }
                let localOnly = noExclude ? [] : !exclude.isEmpty ? exclude : previous?.localOnlyKeys ?? []
                try SyncSettings(server: url, tokenFile: tokenPath, caFile: caPath, localOnlyKeys: localOnly).store(in: defaults)
                if journalEntries != nil || journalDays != nil {
                    var bounds = try defaults.conflictJournalBounds()
                    if let journalEntries { bounds.maximumCount = journalEntries }
                    if let journalDays { bounds.maximumAge = .seconds(journalDays * 86_400) }
                    try defaults.setConflictJournalBounds(bounds)
                }
                var line = "\(suite) syncs with \(url.absoluteString) (token from \(tokenPath))"
                if !localOnly.isEmpty { line += "; local-only keys: \(localOnly.joined(separator: " "))" }
                output(line)
            }
        }

        static func absolute(_ path: String) -> String {
            URL(fileURLWithPath: path).standardizedFileURL.path
        }
    }

    struct Unconfigure: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop syncing a suite: forget its server, cursor and pending marks (its values stay).")

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await perform {
                try options.open(suite).disableSync()
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
                """)

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
