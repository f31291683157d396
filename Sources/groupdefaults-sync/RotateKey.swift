import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync

extension SyncCommand {
    struct RotateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-key",
            abstract: "Start a new key epoch for an end-to-end encrypted suite, after a device was revoked.",
            discussion: """
                Syncs, then makes a new key (kept in the key file with every older one, so history \
                stays readable), stores it on the server sealed to the recovery key (which keeps \
                working), and seals every entry again under it, keeping each write's stamp. From \
                then on the server refuses what is sealed under an older key, and a device that \
                does not get the new key cannot read what is written after the rotation: revoke the \
                lost device first (groupdefaults-server devices revoke ID), rotate, then pair each \
                device that keeps the suite again (groupdefaults-sync pair SUITE here, configure \
                --pairing-code there).
                """)

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await perform {
                let defaults = try options.open(suite)
                guard let settings = try SyncSettings.stored(in: defaults) else {
                    throw CommandFailure("\(suite) is not configured for sync")
                }
                guard let keyFile = settings.keyFile else { throw CommandFailure("\(suite) is not end-to-end encrypted: it has no key to rotate") }
                let keys = try SuiteKeys.read(from: keyFile, suite: suite)
                let http = try SyncClient.makeHTTPClient(caFile: settings.caFile)
                let outcome: KeyRotation.Outcome
                do {
                    let engine = try SyncEngine(configured: defaults, http: http)
                    outcome = try await KeyRotation.rotate(engine, keys: keys, keyFile: keyFile)
                } catch {
                    try? await http.shutdown()
                    throw error
                }
                try await http.shutdown()
                output("\(suite): keys rotated to epoch \(outcome.keys.currentEpoch); \(outcome.resealed) entries sealed again")
                for entry in outcome.refused { printError("tampered: \(entry) (left as it was)") }
                output("Each device that keeps the suite pairs again: groupdefaults-sync pair \(suite) here, configure --pairing-code there.")
                if !outcome.refused.isEmpty { throw ExitCode(1) }
            }
        }
    }
}
