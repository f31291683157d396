import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

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
                --pairing-code there). The new key is signed with the current one (the server takes \
                no other); a device that lacks the current key signs with --recovery-key-file.

                In a suite shared with other accounts (on a device of its owner), the new key is \
                also sealed for the owner's devices and to each member's key, and those devices take \
                it without pairing; --without ACCOUNT leaves an account out even if the server still \
                lists it (a member that left, when the server is not trusted to have dropped it).

                Example: groupdefaults-sync rotate-key group.com.example.chat
                Example: groupdefaults-sync rotate-key group.com.example.chat --recovery-key-file recovery.txt
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Option(
            help: ArgumentHelp(
                "A file holding the suite's recovery key (mode 600, or - for standard input): it signs the new key when this device lacks the suite's current one.",
                valueName: "PATH"
            )
        ) var recoveryKeyFile: String?
        @Option(help: ArgumentHelp("In a shared suite, an account the new key is not sealed to (repeatable).", valueName: "ACCOUNT"))
        var without: [String] = []

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { defaults, engine in
                let (_, keyFile, keys) = try encryption(of: defaults, or: "it has no key to rotate")
                let recovery = try Configure.secret(nil, file: recoveryKeyFile, what: "recovery key").map { try RecoveryKey(parsing: $0) }
                let outcome = try await KeyRotation.rotate(engine, keys: keys, keyFile: keyFile, recoveryKey: recovery, excluding: without)
                output(
                    "\(suite): keys rotated to epoch \(outcome.keys.currentEpoch); \(outcome.resealed) \(outcome.resealed == 1 ? "entry" : "entries") sealed again"
                )
                for entry in outcome.refused { printError("not sealed again: \(entry) (left as it was)") }
                if let members = outcome.sharedWith {
                    output(
                        "Your other devices\(members.isEmpty ? "" : " and those of \(members.map(printable).joined(separator: ", "))") take the new key from its key bag, without pairing."
                    )
                } else {
                    groupdefaultsSync.outputHint(
                        "Each device that keeps the suite pairs again: `groupdefaults-sync pair \(suite)` here, configure --pairing-code there."
                    )
                }
                if !outcome.refused.isEmpty { throw ExitCode(1) }
            }
        }
    }
}
