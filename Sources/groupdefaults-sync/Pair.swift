import ArgumentParser
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

                Example: groupdefaults-sync pair group.com.example.chat
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { defaults, engine in
                let (settings, _, keys) = try encryption(of: defaults, or: "a device joins it with a token alone")
                try await DevicePairing.offer(keys: keys, client: engine.client) { code, expires in
                    output("pairing code: \(code)")
                    output("valid until \(expires), for one device: on it, run")
                    // A member's other device joins the owner's suite: it says whose.
                    let from = settings.shared.map { " --shared-from \($0.owner)/\($0.suite) --token-file NEW.token" } ?? ""
                    output("  groupdefaults-sync configure \(suite) --server \(settings.server.absoluteString) --pairing-code \(code)\(from)")
                }
                output("paired: the new device has the keys of \(suite)")
            }
        }
    }
}

/// The sync settings, key file and keys of an end-to-end encrypted suite; a one-line failure, ending
/// with `plainSuite`, for a plain one.
func encryption(of defaults: SharedDefaults, or plainSuite: String) throws -> (settings: SyncSettings, keyFile: String, keys: SuiteKeys) {
    guard let settings = try SyncSettings.stored(in: defaults), let keyFile = settings.keyFile else {
        throw CommandFailure("\(defaults.suiteName) is not end-to-end encrypted: \(plainSuite)")
    }
    return (settings, keyFile, try SuiteKeys.read(from: keyFile, suite: settings.keysSuite(of: defaults)))
}
