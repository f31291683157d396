import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

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
                let (settings, keyFile, keys) = try encryption(of: defaults, or: "a device joins it with a token alone")
                let code = PairingCode()
                let client = engine.client
                let suite = suite
                // A pairing an interrupted run left is cancelled first: its code pairs nothing.
                let left = Self.leftPairing(keyFile: keyFile)
                if let id = try? String(contentsOfFile: left, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines), !id.isEmpty {
                    if try await Self.cancelLeft(pairingID: id, client: client) {
                        output("cancelled the pairing an interrupted pair left: its code pairs no device")
                    }
                    unlink(left)
                }
                try NewPrivateFile.create(Data((code.pairingID + "\n").utf8), at: left)
                do {
                    try await interruptible {
                        try await DevicePairing.offer(keys: keys, client: client, code: code) { code, expires in
                            output("pairing code: \(code)")
                            output("valid until \(expires), for one device: on it, run")
                            // A member's other device joins the owner's suite: it says whose.
                            let from = settings.shared.map { " --shared-from \($0.owner)/\($0.suite) --token-file NEW.token" } ?? ""
                            output(
                                "  groupdefaults-sync configure \(suite) --server \(settings.server.absoluteString) --pairing-code \(code)\(from)"
                            )
                        }
                    }
                } catch let interrupted as Interrupted {
                    let (outcome, over) = await Self.cancel(code, client: client, suite: suite)
                    if over { unlink(left) }
                    throw interrupted.failure(outcome)
                } catch let error as SyncError where error.kind == .unavailable {
                    throw error  // the pairing may still wait: the next run cancels it
                } catch {
                    unlink(left)
                    throw error
                }
                unlink(left)
                output("paired: the new device has the keys of \(suite)")
            }
        }

        /// Cancels the pairing of `code` after a Ctrl-C or a `kill`, so that its code pairs nothing
        /// (a claim made meanwhile gets no keys, and its token is revoked): what was left, in words,
        /// and whether the pairing is over (else the next run cancels it).
        static func cancel(_ code: PairingCode, client: SyncClient, suite: String) async -> (String, over: Bool) {
            do {
                _ = try await client.cancelPairing(pairingID: code.pairingID)
                return ("the pairing was cancelled: its code pairs no device; run `groupdefaults-sync pair \(suite)` again for a new one", true)
            } catch {
                switch error.code {
                case .pairingUsed?: return ("the keys had been handed over: the new device has them", true)
                case .pairingNotFound?: return ("no pairing was made: run `groupdefaults-sync pair \(suite)` again", true)
                default:
                    return (
                        "the pairing could not be cancelled (\(error)): no keys are handed over to whoever uses its code, and the next `groupdefaults-sync pair \(suite)` cancels it",
                        false
                    )
                }
            }
        }

        /// Cancels the pairing an interrupted run left; whether it was still waiting. One done or gone,
        /// or made with another token (it expires within 10 minutes), is left alone; a failure to
        /// reach the server is the command's.
        static func cancelLeft(pairingID: String, client: SyncClient) async throws -> Bool {
            do {
                _ = try await client.cancelPairing(pairingID: pairingID)
                return true
            } catch {
                let code = error.code
                // Done, gone, or made with a token this device no longer uses (it expires by itself).
                guard code == .pairingUsed || code == .pairingNotFound || code == .forbidden else { throw error }
                return false
            }
        }

        /// Where `pair` keeps the id of the pairing it waits on (beside the key file, mode 0600),
        /// so that the next run cancels a pairing a crash left behind.
        static func leftPairing(keyFile: String) -> String { keyFile + ".pairing" }
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
