import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import TestSupport
import Testing

/// `configure` cannot set a device up in a way that cannot work: it asks the server how it holds the
/// suite before writing anything, and never takes another suite's or account's key file unasked.
@Suite("Encryption set-up", .timeLimit(.minutes(2)))
struct EncryptionSetupTests {
    /// What the device's directory holds besides its token files: nothing after a refusal.
    private func written(_ device: ToolDevice) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: device.directory.path)) ?? []).filter { !$0.hasSuffix("token") }.sorted()
    }

    @Test("a key file others can read stops sync, and status says so (not `state: ok`); a token file that is a folder is named as one")
    func unusableKeyFile() async throws {
        try await SyncServer.with { server in
            try await withToolPair("group.setup.keyfile") { phone, tablet in
                let token = try phone.tokenFile(server.token)
                let configured = try await phone.sync("configure", ["--server", server.url.absoluteString, "--token-file", token, "--encrypt"])
                #expect(configured.status == 0, "\(configured.stderr)")
                #expect(try await phone.sync("sync").status == 0)
                let keyFile = try #require(written(phone).first { $0.hasSuffix(".keys") })
                let keyPath = phone.directory.appendingPathComponent(keyFile).path
                #expect(chmod(keyPath, 0o644) == 0)

                let failed = try await phone.sync("sync")
                #expect(failed.status == 1 && failed.stderr.contains("can be read by its group or others"), "\(failed)")
                let status = try await phone.sync("status")
                #expect(status.status == 1, "the failing sync needs attention: \(status)")
                #expect(status.stdout.contains("state: failing: the key file \(keyPath) can be read by its group or others"), "\(status.stdout)")
                #expect(chmod(keyPath, 0o600) == 0)
                #expect(try await phone.sync("sync").status == 0)
                let healed = try await phone.sync("status")
                #expect(healed.status == 0 && healed.stdout.contains("state: ok"), "\(healed)")

                // A folder where the token file goes: never "run chmod 600 FOLDER".
                let folder = tablet.directory.path
                let refused = try await tablet.sync("configure", ["--server", server.url.absoluteString, "--token-file", folder])
                #expect(
                    refused.status != 0 && refused.stderr == "groupdefaults-sync: the token file \(folder) is a folder: name the file itself\n",
                    "\(refused)"
                )
                // A token file that is not there: a mistake (exit 1), not "authentication needed … run configure".
                let missing = tablet.directory.appendingPathComponent("nope.token").path
                let absent = try await tablet.sync("configure", ["--server", server.url.absoluteString, "--token-file", missing])
                #expect(
                    absent.status == 1
                        && absent.stderr.hasPrefix("groupdefaults-sync: cannot read the token file \(missing): no such file or directory")
                        && !absent.stderr.contains("give it a new token"),
                    "\(absent)"
                )
            }
        }
    }

    @Test("--encrypt of a suite the server holds in plain is refused before any key or file is made")
    func encryptOnPlain() async throws {
        try await SyncServer.with { server in
            try await withToolPair("group.setup.plain") { phone, tablet in
                try await phone.configure(server)
                #expect(try await phone.defaultsTool(["write", phone.suite, "sound", "ring.caf"]).status == 0)
                #expect(try await phone.sync("sync").status == 0)

                let token = try tablet.tokenFile(server.token)
                let refused = try await tablet.sync("configure", ["--server", server.url.absoluteString, "--token-file", token, "--encrypt"])
                #expect(refused.status == 1, "\(refused)")
                #expect(
                    refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("holds group.setup.plain in plain")
                        && refused.stderr.contains("without --encrypt"),
                    "\(refused.stderr)"
                )
                #expect(refused.stdout.isEmpty && !refused.stdout.contains("recovery key"))
                #expect(written(tablet).isEmpty, "nothing written: \(written(tablet))")

                // Plain, it joins.
                let plain = try await tablet.sync("configure", ["--server", server.url.absoluteString, "--token-file", token])
                #expect(plain.status == 0, "\(plain.stderr)")
                #expect(try await tablet.sync("sync").status == 0)
                #expect(try tablet.open().string(forKey: "sound") == "ring.caf")
            }
        }
    }

    @Test("a plain configure, or new keys, for a suite the server holds encrypted is refused, saying to pair or use the recovery key")
    func plainOnEncrypted() async throws {
        try await SyncServer.with { server in
            try await withToolPair("group.setup.encrypted") { phone, tablet in
                let phoneToken = try phone.tokenFile(server.token)
                let encrypted = try await phone.sync("configure", ["--server", server.url.absoluteString, "--token-file", phoneToken, "--encrypt"])
                #expect(encrypted.status == 0, "\(encrypted.stderr)")
                #expect(try await phone.defaultsTool(["write", phone.suite, "sound", "ring.caf"]).status == 0)
                #expect(try await phone.sync("sync").status == 0)

                let token = try tablet.tokenFile(server.token)
                for extra in [[], ["--encrypt"]] {
                    let refused = try await tablet.sync("configure", ["--server", server.url.absoluteString, "--token-file", token] + extra)
                    #expect(refused.status == 1, "\(extra): \(refused)")
                    #expect(
                        refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("end-to-end encrypted")
                            && refused.stderr.contains("--pairing-code") && refused.stderr.contains("recovery key"),
                        "\(refused.stderr)"
                    )
                    #expect(written(tablet).isEmpty, "\(extra): nothing written: \(written(tablet))")
                }
            }
        }
    }

    @Test(
        "the default key file is named for the suite, the server and the token: two accounts' suites of one name get two files and two recovery keys; an existing key file is used only when --key-file names it"
    )
    func keyFileNames() async throws {
        try await SyncServer.with { server in
            let suite = "group.setup.names"
            let shared = ToolDevice(suite)  // one folder of token files, as ~/.config/groupdefaults is
            defer { shared.remove() }
            let bob = try await ServerTool.run(["token", "create"] + server.storage + ["--account", "bob"])
            #expect(bob.status == 0, "\(bob.stderr)")
            let aliceToken = try shared.tokenFile(server.token, name: "alice.token")
            let bobToken = try shared.tokenFile(bob.stdout.trimmingCharacters(in: .newlines), name: "bob.token")
            let alice = ToolDevice(suite)
            let bobsDevice = ToolDevice(suite)
            defer {
                alice.remove()
                bobsDevice.remove()
            }
            var keyFiles: [String] = []
            for (device, token) in [(alice, aliceToken), (bobsDevice, bobToken)] {
                let configured = try await device.sync("configure", ["--server", server.url.absoluteString, "--token-file", token, "--encrypt"])
                #expect(configured.status == 0, "\(configured.stderr)")
                #expect(configured.stdout.contains("recovery key: "), "new keys, shown once: \(configured.stdout)")
                let keyFile = try #require(configured.stdout.split(separator: "\n").first?.components(separatedBy: "keys in ").last?.dropLast())
                keyFiles.append(String(keyFile))
            }
            #expect(Set(keyFiles).count == 2, "\(keyFiles)")
            #expect(keyFiles.allSatisfy { URL(fileURLWithPath: $0).lastPathComponent.hasPrefix("\(suite).127.0.0.1-\(server.port).") }, "\(keyFiles)")

            // A third folder, Alice's token again (the suite not yet on the server): the file exists
            // and this suite is not configured with it, so it is not taken unasked.
            let again = ToolDevice(suite)
            defer { again.remove() }
            let refused = try await again.sync("configure", ["--server", server.url.absoluteString, "--token-file", aliceToken, "--encrypt"])
            #expect(refused.status == 1 && refused.stderr.contains("exists already") && refused.stderr.contains("--key-file"), "\(refused)")
            #expect(written(again).isEmpty, "\(written(again))")
            let named = try await again.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", aliceToken, "--encrypt",
                    "--key-file", keyFiles[0],
                ]
            )
            #expect(named.status == 0 && !named.stdout.contains("recovery key"), "\(named)")
        }
    }
}
