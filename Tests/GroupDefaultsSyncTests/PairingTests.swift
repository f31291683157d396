import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// Pairing through the tools, real processes and the real server: `pair` on a device that has the
/// keys prints a code; `configure --pairing-code` on another makes its token and gets the keys,
/// relayed by a server that can read neither.
@Suite("Pairing devices of an encrypted suite", .timeLimit(.minutes(3)))
struct PairingTests {
    /// Starts `pair` on `device` and returns it with the code it printed.
    func startPairing(_ device: ToolDevice) async throws -> (RunningProcess, String) {
        let pair = try RunningProcess(ToolDevice.syncExecutable, ["pair", device.suite, "--directory", device.directory.path])
        let line = try #require(await pair.firstLine(timeout: .seconds(30)) { $0.hasPrefix("pairing code: ") }, "pair printed no code")
        return (pair, String(line.dropFirst("pairing code: ".count)))
    }

    func join(
        _ device: ToolDevice,
        _ server: SyncServer,
        code: String,
        name: String? = nil
    ) async throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        let token = device.directory.appendingPathComponent("paired.token").path
        return try await device.sync(
            "configure",
            ["--server", server.url.absoluteString, "--pairing-code", code, "--token-file", token]
                + (name.map { ["--device", $0] } ?? [])
        )
    }

    @Test(
        "a claim without the code's proof gets a token that never works: the offering device cancels the pairing and it is revoked",
        arguments: StorageBackend.allCases
    )
    func claimWithoutProof(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.e2e.claim"
            let phone = ToolDevice(suite)
            let tablet = ToolDevice(suite)
            defer {
                phone.remove()
                tablet.remove()
            }
            let configured = try await phone.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", try phone.tokenFile(server.token),
                    "--encrypt",
                ]
            )
            #expect(configured.status == 0, "\(configured.stderr)")
            let (pair, code) = try await startPairing(phone)

            // Someone who learned the pairing id (the server, or whoever saw it) but not the code.
            let id = try PairingCode(parsing: code).pairingID
            let random = { Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() }
            let anonymous = SyncClient(server: server.url, suite: suite, http: server.http) { throw SyncError(.authenticationNeeded, "none") }
            let claimed = try await anonymous.claimPairing(pairingID: id, PairingClaim(publicKey: random(), proof: random()))
            let stolen = server.client(suite, token: claimed.token)
            do {
                _ = try await stolen.snapshot(after: nil)
                Issue.record("the claim's token worked before the keys were handed over")
            } catch {
                #expect((error as? SyncError)?.kind == .authenticationNeeded, "\(error)")
            }

            // The phone checks the proof, refuses it and cancels: `pair` fails, the token is revoked.
            let refused = await pair.finish()
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("does not know the code") && refused.stderr.contains("cancelled"), "\(refused.stderr)")
            do {
                _ = try await stolen.snapshot(after: nil)
                Issue.record("the refused claim's token works")
            } catch {
                #expect((error as? SyncError)?.detail.contains("revoked") == true, "\(error)")
            }
            #expect(try await join(tablet, server, code: code).status != 0, "a cancelled pairing cannot be used")

            // A new code, used by the device that has it: its token works once the keys are here.
            let (again, fresh) = try await startPairing(phone)
            let codeFile = try tablet.tokenFile(fresh, name: "code")
            let joined = try await tablet.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--pairing-code-file", codeFile,
                    "--token-file", tablet.directory.appendingPathComponent("paired.token").path,
                ]
            )
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(await again.finish().status == 0)
            #expect(try await tablet.sync("sync").status == 0)
        }
    }

    @Test(
        "a second and a third device join by code and sync; a reused code and a wrong one are refused and write nothing",
        arguments: StorageBackend.allCases
    )
    func pairing(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.e2e.pairing"
            let phone = ToolDevice(suite)
            let tablet = ToolDevice(suite)
            let laptop = ToolDevice(suite)
            let stranger = ToolDevice(suite)
            defer { for device in [phone, tablet, laptop, stranger] { try? FileManager.default.removeItem(at: device.directory) } }
            let phoneToken = try phone.tokenFile(server.token)
            let configured = try await phone.sync("configure", ["--server", server.url.absoluteString, "--token-file", phoneToken, "--encrypt"])
            #expect(configured.status == 0, "\(configured.stderr)")
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)

            // The tablet joins with a code; `pair` ends once the keys are handed over.
            let (pair, code) = try await startPairing(phone)
            #expect((try? PairingCode(parsing: code)) != nil, "\(code)")
            let joined = try await join(tablet, server, code: code)
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(await pair.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("paired: ") })
            #expect(await pair.finish().status == 0)
            let tabletToken = tablet.directory.appendingPathComponent("paired.token").path
            var info = stat()
            #expect(stat(tabletToken, &info) == 0 && info.st_mode & 0o777 == 0o600)
            #expect(try String(contentsOfFile: tabletToken, encoding: .utf8) != server.token + "\n", "the tablet has a token of its own")
            #expect(stat(try tablet.keyFile(), &info) == 0 && info.st_mode & 0o777 == 0o600)
            let synced = try await tablet.sync("sync")
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(try await tablet.defaultsTool(["read", suite, "sound"]).stdout.trimmingCharacters(in: .newlines) == "ring.caf")

            // The same code again: refused, nothing written.
            let reused = try await join(stranger, server, code: code)
            #expect(
                reused.status == 1 && reused.stderr == "groupdefaults-sync: the pairing code was already used: each code pairs one device\n",
                "\(reused.stderr)"
            )
            #expect(!FileManager.default.fileExists(atPath: stranger.directory.appendingPathComponent("paired.token").path))
            #expect(stranger.keyFiles().isEmpty)

            // A wrong code (well formed): not found, and nothing said about any pairing.
            let wrong = try await join(stranger, server, code: PairingCode().description)
            #expect(wrong.status == 1 && wrong.stderr.contains("no pairing has this code"), "\(wrong.stderr)")
            #expect(!FileManager.default.fileExists(atPath: stranger.directory.appendingPathComponent("paired.token").path))
            // Into a folder that does not exist yet: made for the pairing, gone again when it fails.
            let newFolder = stranger.directory.appendingPathComponent("new-folder")
            let elsewhere = try await stranger.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--pairing-code", PairingCode().description, "--token-file",
                    newFolder.path + "/paired.token",
                ]
            )
            #expect(elsewhere.status == 1 && elsewhere.stderr.contains("no pairing has this code"), "\(elsewhere.stderr)")
            #expect(!FileManager.default.fileExists(atPath: newFolder.path), "a pairing that fails leaves nothing behind")
            // A typo is caught before anything is sent.
            var typo = Array(code)
            typo[1] = typo[1] == "A" ? "B" : "A"
            let mistyped = try await join(stranger, server, code: String(typo))
            #expect(mistyped.status == 1 && mistyped.stderr.contains("mistyped"), "\(mistyped.stderr)")

            // A third device, with a new code; a write on it reaches the phone.
            let (second, secondCode) = try await startPairing(phone)
            #expect(secondCode != code)
            // A token file in the way is refused before the code is used; the code still works.
            let taken = try laptop.tokenFile("another suite's token", name: "paired.token")
            let refusedFile = try await join(laptop, server, code: secondCode)
            #expect(refusedFile.status == 1 && refusedFile.stderr.contains("exists already"), "\(refusedFile.stderr)")
            #expect(try String(contentsOfFile: taken, encoding: .utf8) == "another suite's token\n")
            try FileManager.default.removeItem(atPath: taken)
            let third = try await join(laptop, server, code: secondCode, name: "laptop")
            #expect(third.status == 0, "\(third.stderr)")
            #expect(await second.finish().status == 0)
            #expect(try await laptop.defaultsTool(["write", suite, "volume", "-float", "0.5"]).status == 0)
            #expect(try await laptop.sync("sync").status == 0)
            #expect(try await phone.sync("sync").status == 0)
            #expect(try await phone.defaultsTool(["read", suite, "volume"]).stdout.trimmingCharacters(in: .newlines) == "0.5")
            // The laptop's token is its own, bound to the name it gave.
            let laptopOrigin = try laptop.open().origin
            #expect(try await HistoryAndDevicesTests.listDevices(server).first { $0.deviceID == laptopOrigin }?.name == "laptop")
        }
    }
}
