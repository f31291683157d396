import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync

extension SyncCommand {
    struct Pair: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a one-time code with which another device joins this end-to-end encrypted suite.",
            discussion: """
                Prints `pairing code: CODE` at once and waits (at most 10 minutes) until a device \
                runs `groupdefaults-sync configure SUITE --server URL --pairing-code CODE`; that \
                device then gets a token of its own (for this suite) and the suite's keys, sealed \
                to it through the server, which can read neither. The code works once. Exit status \
                0 once the keys are handed over, 1 if the code expired unclaimed or was claimed by \
                someone who does not know it.
                """)

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await perform {
                let defaults = try options.open(suite)
                guard let settings = try SyncSettings.stored(in: defaults) else {
                    throw CommandFailure("\(suite) is not configured for sync")
                }
                guard let keyFile = settings.keyFile else {
                    throw CommandFailure("\(suite) is not end-to-end encrypted: a device joins it with a token alone")
                }
                let keys = try SuiteKeys.read(from: keyFile, suite: suite)
                let http = try SyncClient.makeHTTPClient(caFile: settings.caFile)
                do {
                    let engine = try SyncEngine(configured: defaults, http: http)
                    try await DevicePairing.offer(keys: keys, client: engine.client) { code, expires in
                        output("pairing code: \(code)")
                        output("valid until \(expires), for one device: on it, run")
                        output("  groupdefaults-sync configure \(suite) --server \(settings.server.absoluteString) --pairing-code \(code)")
                    }
                } catch {
                    try? await http.shutdown()
                    throw error
                }
                try await http.shutdown()
                output("paired: the new device has the keys of \(suite)")
            }
        }
    }
}
