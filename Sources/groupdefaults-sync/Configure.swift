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
                From then on every process's writes to the suite are recorded for sync; the values \
                it already holds join the server's suite at the first sync (the server's values win \
                for keys it has; the others are uploaded). The token file must not be readable by \
                group or others; the token is read from it at each request and never copied into \
                the suite. Configuring again with a new token file resumes a paused sync.
                """)

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String
        @Option(help: ArgumentHelp("The server's base URL, http:// or https://.", valueName: "URL")) var server: String
        @Option(help: ArgumentHelp("A file holding the token (mode 0600).", valueName: "PATH")) var tokenFile: String
        @Option(help: ArgumentHelp("A PEM file of a private certificate authority to trust.", valueName: "PATH")) var caFile: String?

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
                if let previous = try SyncSettings.stored(in: defaults), previous.server != url {
                    try defaults.disableSync()
                }
                try SyncSettings(server: url, tokenFile: tokenPath, caFile: caPath).store(in: defaults)
                output("\(suite) syncs with \(url.absoluteString) (token from \(tokenPath))")
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
