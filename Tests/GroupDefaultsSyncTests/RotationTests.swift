import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// `rotate-key` after a device is revoked, through the tools: the revoked device cannot open what
/// is written after the rotation, even given the server's whole store; the devices that pair again
/// and the recovery key open everything, history included.
@Suite("Key rotation", .timeLimit(.minutes(3)))
struct RotationTests {
    /// Rounds of the concurrent-push test (`GROUPDEFAULTS_ROTATION_ROUNDS`, 3 by default).
    static let rounds = ProcessInfo.processInfo.environment["GROUPDEFAULTS_ROTATION_ROUNDS"].flatMap(Int.init) ?? 3

    @Test(
        "a rotation never drops a write another device pushed meanwhile: each one the server acknowledged ends under the new epoch",
        arguments: StorageBackend.allCases
    )
    func rotationWithConcurrentPush(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            for round in 1...Self.rounds {
                let suite = "group.e2e.race.\(round)"
                let keys = SuiteKeys(recoveryKey: RecoveryKey(), suite: suite)
                let phone = try Device(suite, server: server, keys: keys)
                let tablet = try Device(suite, server: server, keys: keys)
                defer {
                    phone.remove()
                    tablet.remove()
                }
                try phone.set("sound", .string("ring.caf"))
                try await phone.engine.syncOnce()
                try await tablet.engine.syncOnce()
                let keyFile = phone.directory.appendingPathComponent("\(suite).keys").path
                try keys.write(to: keyFile)

                // The tablet pushes one write after another while the phone rotates; each that the
                // server acknowledges is recorded, until the server refuses the old epoch.
                async let acknowledged: [String: PropertyListValue] = {
                    var acknowledged: [String: PropertyListValue] = [:]
                    for index in 0..<200 {
                        let key = "tablet-\(index % 20)"
                        let value = PropertyListValue.integer(index)
                        try tablet.set(key, value)
                        do throws(SyncError) { try await tablet.engine.push() } catch { break }
                        acknowledged[key] = value
                    }
                    return acknowledged
                }()
                try await Task.sleep(for: .milliseconds(Int.random(in: 0...20)))
                let outcome = try await KeyRotation.rotate(phone.engine, keys: keys, keyFile: keyFile)
                let written = try await acknowledged

                let sealed = try await server.snapshot(suite).entries
                let opened = try await server.snapshot(suite, keys: outcome.keys).entries
                for (key, value) in written {
                    #expect(
                        opened[key]?.value == value,
                        "round \(round): \(key) acknowledged as \(value), the server holds \(String(describing: opened[key]?.value))"
                    )
                    #expect(
                        sealed[keys.keyID(for: key)]?.sealed?.epoch == outcome.keys.currentEpoch,
                        "round \(round): \(key) left under a retired epoch"
                    )
                }
            }
        }
    }

    @Test(
        "a write token cannot spend a suite's epochs: a key bag is taken for the next epoch only, and rotate-key still works",
        arguments: StorageBackend.allCases
    )
    func epochAttack(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.e2e.epochs"
            let phone = ToolDevice(suite)
            defer { phone.remove() }
            let configured = try await phone.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", try phone.tokenFile(server.token),
                    "--encrypt",
                ]
            )
            #expect(configured.status == 0, "\(configured.stderr)")
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)

            // Any write token of the account, with bytes of its own: for the last epoch, one ahead,
            // and the next, unsigned and signed by a key of its own. Each is refused.
            let random = Data((0..<64).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            let ownKeys = try SuiteKeys(recoveryKey: RecoveryKey(), suite: suite).rotated()
            let signed = try ownKeys.signedKeyBag(epoch: 2)
            let attempts: [(UInt32, SignedKeyBag, SyncErrorCode)] = [
                (.max, signed, .staleKeyEpoch), (3, signed, .staleKeyEpoch),
                (2, SignedKeyBag(bundle: random, verifyKey: signed.verifyKey, signature: nil), .keyBagUnsigned), (2, signed, .keyBagUnsigned),
            ]
            for (epoch, bag, code) in attempts {
                do {
                    try await server.client(suite).putKeyBag(epoch: epoch, bag: bag)
                    Issue.record("a key bag for epoch \(epoch) was taken")
                } catch {
                    #expect((error as? SyncError)?.code == code, "\(error)")
                }
            }
            // Nor can it anchor the suite again to its own keys.
            do {
                _ = try await server.client(suite).anchorKeyBags(try ownKeys.anchor(serverBags: KeyBags(epochs: [:])))
                Issue.record("the suite was anchored again")
            } catch {
                #expect((error as? SyncError)?.code == .keyAnchorMismatch, "\(error)")
            }
            #expect(try await phone.sync("sync").status == 0, "the suite is unharmed")
            let rotated = try await phone.sync("rotate-key")
            #expect(rotated.status == 0, "\(rotated.stderr)")
            #expect(rotated.stdout.contains("keys rotated to epoch 2"), "\(rotated.stdout)")
            #expect(try await phone.defaultsTool(["write", suite, "sound", "bell.aiff"]).status == 0)
            #expect(try await phone.defaultsTool(["write", suite, "volume", "-int", "4"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)
            #expect(try await server.snapshot(suite).entries.values.allSatisfy { $0.sealed?.epoch == 2 })
            let recovery = try #require(configured.stdout.split(separator: "\n").first { $0.hasPrefix("recovery key: ") })
                .dropFirst("recovery key: ".count)
            let laptop = ToolDevice(suite)
            defer { laptop.remove() }
            let recovered = try await laptop.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", try laptop.tokenFile(server.token),
                    "--recovery-key-file", try laptop.tokenFile(String(recovery), name: "recovery"),
                ]
            )
            #expect(recovered.status == 0, "\(recovered.stderr)")
            #expect(try await laptop.sync("sync").status == 0)
            #expect(try laptop.open().string(forKey: "sound") == "bell.aiff")
            #expect(try laptop.open().integer(forKey: "volume") == 4)
        }
    }

    @Test(
        "a device that missed rotations rotates with the recovery key: it opens every epoch first and seals everything again",
        arguments: StorageBackend.allCases
    )
    func rotateAfterMissedRotations(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.e2e.missed"
            let phone = ToolDevice(suite)
            let tablet = ToolDevice(suite)
            let laptop = ToolDevice(suite)
            defer { for device in [phone, tablet, laptop] { device.remove() } }
            let configured = try await phone.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", try phone.tokenFile(server.token),
                    "--encrypt",
                ]
            )
            #expect(configured.status == 0, "\(configured.stderr)")
            let recovery = try #require(configured.stdout.split(separator: "\n").first { $0.hasPrefix("recovery key: ") }).dropFirst(
                "recovery key: ".count
            )
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)
            let recoveryFile = try tablet.tokenFile(String(recovery), name: "recovery")
            #expect(
                try await tablet.sync(
                    "configure",
                    [
                        "--server", server.url.absoluteString, "--token-file", try tablet.tokenFile(server.token),
                        "--recovery-key-file", recoveryFile,
                    ]
                ).status == 0
            )
            #expect(try await tablet.sync("sync").status == 0)
            // The phone rotates twice and writes; the tablet, at epoch 1, hears nothing of it.
            for _ in 0..<2 { #expect(try await phone.sync("rotate-key").status == 0) }
            #expect(try await phone.defaultsTool(["write", suite, "volume", "-int", "4"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)

            let refused = try await tablet.sync("rotate-key")
            #expect(refused.status != 0 && refused.stderr.contains("--recovery-key-file"), "\(refused.stderr)")
            let rotated = try await tablet.sync("rotate-key", ["--recovery-key-file", recoveryFile])
            #expect(rotated.status == 0, "\(rotated.stderr)")
            #expect(rotated.stdout.contains("keys rotated to epoch 4"), "\(rotated.stdout)")
            #expect(try await server.snapshot(suite).entries.values.allSatisfy { $0.sealed?.epoch == 4 })
            #expect(
                try await laptop.sync(
                    "configure",
                    [
                        "--server", server.url.absoluteString, "--token-file", try laptop.tokenFile(server.token),
                        "--recovery-key-file", try laptop.tokenFile(String(recovery), name: "recovery"),
                    ]
                ).status == 0
            )
            #expect(try await laptop.sync("sync").status == 0)
            #expect(try laptop.open().string(forKey: "sound") == "ring.caf" && laptop.open().integer(forKey: "volume") == 4)
        }
    }

    /// What the joining device holds of the key the unfinished rotation has not sealed again.
    enum OwnCopy: String, CustomStringConvertible, CaseIterable {
        /// A value of its own, written before it was configured, after the server's.
        case value
        /// A deletion of its own, made before it was configured, after the server's write.
        case deletion
        /// Nothing before; a value written after the join, on a clock a minute behind.
        case laterWrite

        var description: String { rawValue }
    }

    @Test(
        "a device that joins while a rotation is unfinished uploads nothing over the entries still under the retired epoch: the rotation's seal wins over its own copy (kept in its journal), a later write of its own over the seal",
        arguments: OwnCopy.allCases
    )
    func joinDuringUnfinishedRotation(copy: OwnCopy) async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.e2e.retired.join"
            let phone = ToolDevice(suite)
            let laptop = ToolDevice(suite)
            defer { for device in [phone, laptop] { try? FileManager.default.removeItem(at: device.directory) } }
            let recovery = try await phone.configureEncrypted(server)
            #expect(try await phone.defaultsTool(["write", suite, "color", "blue"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)
            // The laptop's own copy, made later, before it syncs.
            switch copy {
            case .value:
                #expect(try await laptop.defaultsTool(["write", suite, "color", "red"]).status == 0)
            case .deletion:
                #expect(try await laptop.defaultsTool(["write", suite, "color", "red"]).status == 0)
                #expect(try await laptop.defaultsTool(["delete", suite, "color"]).status == 0)
            case .laterWrite:
                #expect(try await laptop.defaultsTool(["write", suite, "other", "x"]).status == 0)
            }

            // The phone's rotation stops once the new epoch's bag is stored: the server's entries
            // are still under epoch 1, which a device holding only the new key does not apply.
            let stopped = try await InterruptionTests.run(phone, "rotate-key", [], InterruptionTests.environment(at: "rotate-key.bag-stored"))
            InterruptionTests.expectStopped(stopped, by: SIGKILL, "rotate-key stopped once its bag was stored")

            // The laptop joins meanwhile: the server's 'color' is the server's all the same.
            let joined = try await laptop.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", try laptop.tokenFile(server.token),
                    "--recovery-key-file", try laptop.tokenFile(recovery, name: "recovery"),
                ]
            )
            #expect(joined.status == 0, "\(joined.stderr)")
            _ = try await laptop.sync("sync")  // says that it refused the entry under the retired epoch
            #expect(try await laptop.sync("status").stdout.contains("pending: 0"), "nothing to upload over the server's value")
            let keys = try SuiteKeys.read(from: try phone.keyFile(), suite: suite)
            #expect(try await server.snapshot(suite, keys: keys).entries["color"]?.value == .string("blue"))
            if copy == .laterWrite {
                // Stamped after the server's entry although its clock is a minute behind: the join
                // moved the store's clock past it.
                let minuteBehind = ["/usr/bin/faketime", "-f", "-60s"]
                #expect(try await laptop.defaultsTool(["write", suite, "color", "green"], launcher: minuteBehind).status == 0)
                #expect(try await laptop.sync("sync", launcher: minuteBehind).status == 0)
            }

            // The phone finishes its rotation; the laptop judges its seal by the joining rule.
            let finished = try await phone.sync("sync")
            #expect(finished.status == 0 && finished.stdout.contains("finished rotating"), "\(finished)")
            let synced = try await laptop.sync("sync")
            #expect(synced.status == 0, "\(synced)")
            let expected = copy == .laterWrite ? "green" : "blue"
            #expect(try laptop.open().string(forKey: "color") == expected)
            #expect(try phone.open().string(forKey: "color") == expected)
            let journal = try await laptop.sync("conflicts").stdout
            switch copy {
            case .value: #expect(journal.contains("red"), "the laptop's own copy is kept in its journal: \(journal)")
            case .deletion: #expect(journal.contains("deleted"), "the laptop's deletion is kept in its journal: \(journal)")
            case .laterWrite: #expect(!journal.contains("green"), "\(journal)")
            }
        }
    }

    @Test(
        "after revoke and rotate-key, the revoked device's keys open nothing written since; a paired device and the recovery key read it all",
        arguments: StorageBackend.allCases
    )
    func rotation(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.e2e.rotation"
            let phone = ToolDevice(suite)
            let tablet = ToolDevice(suite)
            let laptop = ToolDevice(suite)
            defer { for device in [phone, tablet, laptop] { try? FileManager.default.removeItem(at: device.directory) } }
            let phoneToken = try phone.tokenFile(server.token)
            let configured = try await phone.sync("configure", ["--server", server.url.absoluteString, "--token-file", phoneToken, "--encrypt"])
            #expect(configured.status == 0, "\(configured.stderr)")
            let recovery = try #require(configured.stdout.split(separator: "\n").first { $0.hasPrefix("recovery key: ") })
                .dropFirst("recovery key: ".count)
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)

            // The tablet pairs, syncs, and is then lost: revoked on the server.
            let pair = try RunningProcess(ToolDevice.syncExecutable, ["pair", suite, "--directory", phone.directory.path])
            let code = try #require(await pair.firstLine(timeout: .seconds(30)) { $0.hasPrefix("pairing code: ") }).dropFirst("pairing code: ".count)
            let tabletToken = tablet.directory.appendingPathComponent("token").path
            let joined = try await tablet.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--pairing-code", String(code),
                    "--token-file", tabletToken,
                ]
            )
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(await pair.finish().status == 0)
            #expect(try await tablet.sync("sync").status == 0)
            let tabletKeys = try SuiteKeys.read(from: try tablet.keyFile(), suite: suite)
            let tabletOrigin = try tablet.open().origin
            let lost = try #require(try await HistoryAndDevicesTests.listDevices(server).first { $0.deviceID == tabletOrigin })
            #expect(try await ServerTool.run(["devices", "revoke", lost.id] + server.storage).status == 0)

            // The phone rotates, then writes.
            let rotated = try await phone.sync("rotate-key")
            #expect(rotated.status == 0, "\(rotated.stderr)")
            #expect(rotated.stdout.contains("keys rotated to epoch 2; 1 entry sealed again"), "\(rotated.stdout)")
            #expect(try await phone.defaultsTool(["write", suite, "sound", "bell.aiff"]).status == 0)
            #expect(try await phone.defaultsTool(["write", suite, "pin", "secret-after-rotation"]).status == 0)
            let synced = try await phone.sync("sync")
            #expect(synced.status == 0, "\(synced.stderr)")

            // The revoked tablet: its token no longer works, and even the server's whole store opens
            // nothing for its keys.
            #expect(try await tablet.sync("sync").status == 3)
            let stored = try await server.snapshot(suite).entries.values
            #expect(stored.count == 2 && stored.allSatisfy { $0.sealed?.epoch == 2 })
            let old = EntrySealer(keys: tabletKeys)
            for entry in stored {
                #expect(throws: EntrySealer.Refusal.unknownEpoch(2)) { try old.open(entry) }
            }
            // An entry sealed under epoch 1 is refused by the server from now on.
            let stale = try old.seal(key: "sound", value: .string("evil"), hlc: try phone.open().clockReading(), origin: tabletOrigin)
            let body = try JSONEncoder().encode(PushRequest(deviceID: tabletOrigin, batchID: "stale", ops: [stale]))
            await #expect { try await server.client(suite).push(body: Array(body)) } throws: { ($0 as? SyncError)?.code == .staleKeyEpoch }

            // An entry forged with the old key and put into the store behind the server's back (a
            // revoked device with the server's help) is applied nowhere: epoch 1 is history now.
            let forged = try old.seal(
                key: "sound",
                value: .string("forged.caf"),
                hlc: HLC(rawValue: stale.hlc.rawValue + 1 << 16),
                origin: tabletOrigin
            )
            let soundID = tabletKeys.keyID(for: "sound")
            let current = try #require(try await server.snapshot(suite).entries[soundID])
            try await server.killAndRestart {
                try await ServerStore.rewrite(
                    server,
                    suite: suite,
                    changed: [
                        SyncEntry(keyID: soundID, sealed: forged.sealed!, deleted: false, hlc: forged.hlc, origin: tabletOrigin, rev: current.rev)
                    ]
                )
            }
            #expect(try await phone.sync("reset").status == 0)
            let refusedForgery = try await phone.sync("sync")
            #expect(refusedForgery.status == 1 && refusedForgery.stderr.contains("retired"), "\(refusedForgery.stderr)")
            #expect(try await phone.defaultsTool(["read", suite, "sound"]).stdout.trimmingCharacters(in: .newlines) == "bell.aiff")

            // The history keeps the epoch-1 version, which the phone still opens.
            let history = try await phone.sync("history", ["sound"])
            #expect(history.status == 0 && history.stdout.contains("ring.caf") && history.stdout.contains("bell.aiff"), "\(history)")

            // The recovery key opens every epoch (epoch 2 through its key bag).
            let laptopToken = try laptop.tokenFile(server.token)
            let recovered = try await laptop.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", laptopToken,
                    "--recovery-key", String(recovery),
                ]
            )
            #expect(recovered.status == 0, "\(recovered.stderr)")
            let laptopSync = try await laptop.sync("sync")
            #expect(laptopSync.status == 1 && laptopSync.stderr.contains("retired"), "the forged entry, refused: \(laptopSync.stderr)")
            #expect(try await laptop.defaultsTool(["read", suite, "pin"]).stdout.trimmingCharacters(in: .newlines) == "secret-after-rotation")
            // Another suite's recovery key passes its check but is refused.
            let wrong = try await laptop.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", laptopToken,
                    "--recovery-key", RecoveryKey().description,
                ]
            )
            #expect(wrong.status == 1 && wrong.stderr.contains("does not open"), "\(wrong.stderr)")
        }
    }
}
