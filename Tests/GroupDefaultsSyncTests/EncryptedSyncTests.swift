import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// End-to-end encrypted suites against the real server, on both backends: the server stores
/// nothing it can read, and entries changed behind its back (in its storage) are refused by the
/// devices that pull them, which keep what they had.
@Suite("End-to-end encrypted sync", .timeLimit(.minutes(3)))
struct EncryptedSyncTests {
    @Test(
        "the server's storage holds no key name or value; flipped, swapped, rolled-back, re-stamped and removed entries are refused and applied nowhere",
        arguments: StorageBackend.allCases
    )
    func serverLearnsNothingAndTamperingIsRefused(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.e2e.tamper"
            let keys = SuiteKeys(recoveryKey: RecoveryKey(), suite: suite)
            func id(_ key: String) -> String { keys.keyID(for: key) }
            let a = try Device(suite, server: server, keys: keys)
            defer { a.remove() }
            let written: [String: PropertyListValue] = [
                "marker-key-Q7Z": .string("marker-value-W3X"), "volume": .double(0.8), "badge": .integer(3),
                "draft": .string("draft-text-K9P"), "theme": .string("theme-dark-M2V"), "sound": .string("ring.caf"),
            ]
            for (key, value) in written { try a.set(key, value) }
            try await a.engine.syncOnce()
            try a.set("sound", .string("bell.aiff"))
            let first = try await a.engine.syncOnce()
            #expect(first.isInAgreement && first.pushed == 1)

            // Nothing the server stores names a key or holds a value.
            let dump = try await ServerStore.dump(server)
            for marker in ["marker-key-Q7Z", "marker-value-W3X", "draft-text-K9P", "theme-dark-M2V", "ring.caf", "bell.aiff", "volume", "sound"] {
                #expect(!dump.contains(marker), "\(marker) is readable in the \(backend.rawValue) store")
            }

            // Behind the server's back: a flipped byte, two keys' payloads swapped, an older version
            // of `sound` put back, `draft`'s HLC raised, `theme` removed.
            let held = try await server.snapshot(suite).entries
            #expect(Set(held.keys) == Set(written.keys.map(id)))
            let older = try await server.client(suite).history(key: id("sound")).versions[1].entry
            var flipped = held[id("marker-key-Q7Z")]!
            flipped.sealed!.box[20] ^= 1
            var volume = held[id("volume")]!
            var badge = held[id("badge")]!
            swap(&volume.sealed, &badge.sealed)
            var rolledBack = older
            rolledBack.rev = held[id("sound")]!.rev
            var restamped = held[id("draft")]!
            restamped.hlc = HLC(rawValue: restamped.hlc.rawValue + 1)
            try await server.killAndRestart {
                try await ServerStore.rewrite(
                    server,
                    suite: suite,
                    changed: [flipped, volume, badge, rolledBack, restamped],
                    removed: [id("theme")]
                )
            }

            // A new device: the four tampered entries (five boxes) refused, the rest applied; it
            // cannot know that `sound` was newer.
            let b = try Device(suite, server: server, keys: keys)
            defer { b.remove() }
            let joined = try await b.engine.syncOnce()
            let tampered = Set([id("marker-key-Q7Z"), id("volume"), id("badge"), id("draft")])
            #expect(Set(joined.refused.map(\.keyID)) == tampered)
            #expect(!joined.isInAgreement)
            #expect(try b.entries().mapValues(\.value) == ["sound": .string("ring.caf")])

            // The device that wrote them reads the snapshot again: the same refused, `sound` reported
            // as rolled back, `theme` as left out; it keeps every value it had and pushes nothing.
            try a.defaults.setSyncCursor(0)
            let again = try await a.engine.syncOnce()
            #expect(Set(again.refused.map(\.keyID)) == tampered.union([id("sound")]))
            #expect(again.refused.first { $0.keyID == id("sound") }?.key == "sound")
            #expect(again.omitted == ["theme"])
            #expect(again.pushed == 0)
            var expected = written
            expected["sound"] = .string("bell.aiff")
            #expect(try a.entries().mapValues(\.value) == expected)
            #expect(try a.defaults.pendingCount() == 0)
            let status = a.engine.status
            #expect(status.refused.count >= tampered.count + 1)
            // Each refusal is kept in the conflict journal, with nothing to restore.
            let journal = try a.defaults.conflicts().filter(\.isRefused)
            #expect(Set(journal.map(\.key)) == tampered.union(["sound"]), "\(journal)")
            #expect(journal.first { $0.key == "sound" }?.refusal?.contains("rolled back") == true)
            #expect(throws: SharedDefaultsError.self) { try a.defaults.restore("sound", conflict: journal.first { $0.key == "sound" }!.id) }
            #expect(try b.defaults.conflicts().filter(\.isRefused).count == 4)
        }
    }

    @Test(
        "a suite is encrypted for every device or for none: a device without the key is told so, and the server refuses mixed pushes",
        arguments: StorageBackend.allCases
    )
    func encryptedOrNot(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let sealedSuite = "group.e2e.sealed"
            let plainSuite = "group.e2e.plain"
            let keys = SuiteKeys(recoveryKey: RecoveryKey(), suite: sealedSuite)
            let a = try Device(sealedSuite, server: server, keys: keys)
            let keyless = try Device(sealedSuite, server: server)
            let plain = try Device(plainSuite, server: server)
            let sealedOnPlain = try Device(plainSuite, server: server, keys: SuiteKeys(recoveryKey: RecoveryKey(), suite: plainSuite))
            defer { for device in [a, keyless, plain, sealedOnPlain] { device.remove() } }
            try a.set("sound", .string("ring.caf"))
            try await a.engine.syncOnce()
            try plain.set("sound", .string("bell.aiff"))
            try await plain.engine.syncOnce()

            // Without the key: one clear error, nothing applied, its own value kept and pending.
            try keyless.set("sound", .string("mine.caf"))
            await #expect { try await keyless.engine.syncOnce() } throws: { error in
                // The remedy says how to get the key; the library names no tool's options (the tool does).
                (error as? SyncError)?.code == .suiteEncrypted && (error as? SyncError)?.remedy == .getSuiteKeys
                    && "\(error)".contains("pair this device") && !"\(error)".contains("--")
            }
            #expect(try keyless.entries()["sound"]?.value == .string("mine.caf"))
            #expect(try keyless.defaults.pendingCount() == 1)

            // A plain push to the encrypted suite and a sealed one to the plain suite: 409.
            let body = try JSONEncoder().encode(
                PushRequest(
                    deviceID: 7,
                    batchID: "plain-1",
                    ops: [
                        PushOp(key: "sound", value: .string("evil"), hlc: try keyless.defaults.clockReading())
                    ]
                )
            )
            await #expect { try await server.client(sealedSuite).push(body: Array(body)) } throws: { error in
                (error as? SyncError)?.code == .suiteEncrypted && (error as? SyncError)?.status == 409
            }
            try sealedOnPlain.set("volume", .double(0.5))
            await #expect { try await sealedOnPlain.engine.syncOnce() } throws: { error in
                (error as? SyncError)?.code == .suiteNotEncrypted && (error as? SyncError)?.status == 409
            }
            #expect(try await server.snapshot(plainSuite).entries.keys.sorted() == ["sound"])
        }
    }

    @Test("configure --encrypt prints a recovery key once; another device joins with it; a typo or a loose key file is refused and changes nothing")
    func recoveryKeyThroughTheTool() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.e2e.tool"
            let phone = ToolDevice(suite)
            let tablet = ToolDevice(suite)
            defer { for device in [phone, tablet] { try? FileManager.default.removeItem(at: device.directory) } }
            let token = try phone.tokenFile(server.token)
            let configured = try await phone.sync("configure", ["--server", server.url.absoluteString, "--token-file", token, "--encrypt"])
            #expect(configured.status == 0, "\(configured.stderr)")
            let lines = configured.stdout.split(separator: "\n").map(String.init)
            #expect(lines.first?.contains("end-to-end encrypted") == true)
            let recovery = try #require(lines.first { $0.hasPrefix("recovery key: ") }).dropFirst("recovery key: ".count)
            let keyFile = try phone.keyFile()
            #expect(keyFile == KeyFileName.defaultPath(suite: suite, server: server.url, token: server.token, beside: token))
            #expect(
                URL(fileURLWithPath: keyFile).lastPathComponent.hasPrefix("\(suite).127.0.0.1-\(server.port)."),
                "named for the suite and the server: \(keyFile)"
            )
            var info = stat()
            #expect(stat(keyFile, &info) == 0 && info.st_mode & 0o777 == 0o600)
            // Configuring again keeps the keys and shows no recovery key.
            let again = try await phone.sync("configure", ["--server", server.url.absoluteString, "--token-file", token, "--encrypt"])
            #expect(again.status == 0 && !again.stdout.contains("recovery key"))

            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)

            let tabletToken = try tablet.tokenFile(server.token)
            // A typo in a check character: always caught (one in the secret's 26 is caught but
            // for the 1 in 1,024 whose changed secret has the same 10 bits of check).
            var typo = Array(recovery)
            typo[typo.count - 1] = typo[typo.count - 1] == "A" ? "B" : "A"
            let refused = try await tablet.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", tabletToken,
                    "--recovery-key", String(typo),
                ]
            )
            #expect(refused.status == 1 && refused.stderr.contains("mistyped"), "\(refused.stderr)")
            #expect(tablet.keyFiles().isEmpty)

            // Read from a file (mode 0600), so that it shows neither in `ps` nor in the shell's history.
            let recoveryFile = try tablet.tokenFile(String(recovery), name: "recovery")
            let empty = try tablet.tokenFile("", name: "empty")
            let nothing = try await tablet.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", tabletToken,
                    "--recovery-key-file", empty,
                ]
            )
            #expect(nothing.status == 1 && nothing.stderr.contains("holds no recovery key"), "\(nothing.stderr)")
            let joined = try await tablet.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", tabletToken,
                    "--recovery-key-file", recoveryFile,
                ]
            )
            #expect(joined.status == 0, "\(joined.stderr)")
            let synced = try await tablet.sync("sync")
            #expect(synced.status == 0, "\(synced.stderr)")
            let read = try await tablet.defaultsTool(["read", suite, "sound"])
            #expect(read.stdout.trimmingCharacters(in: .newlines) == "ring.caf", "\(read)")
            let status = try await tablet.sync("status")
            #expect(status.stdout.contains("encryption: end to end"))

            let tabletKeys = try tablet.keyFile()
            chmod(tabletKeys, 0o644)
            let loose = try await tablet.sync("sync")
            #expect(loose.status == 1 && loose.stderr.contains("chmod 600"), "\(loose.stderr)")
        }
    }

    @Test(
        "a batch stored under an epoch the device has since left behind (it took the new key meanwhile) is sealed again, not a reason to pair again"
    )
    func batchStoredUnderAnOlderEpoch() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.e2e.stale-batch"
            let device = try Device(suite, server: server)
            defer { device.remove() }
            let keys = SuiteKeys(recoveryKey: RecoveryKey(), suite: suite)
            _ = try device.set("sound", .string("ring.caf"))
            _ = try await SyncEngine(defaults: device.defaults, client: server.client(suite), logger: Device.logger, keys: keys).syncOnce()
            // The suite moves to epoch 2 (a rotation elsewhere, whose key this device now holds)...
            let rotated = try keys.rotated(after: 1)
            try await server.client(suite).putKeyBag(epoch: 2, bag: try rotated.signedKeyBag(epoch: 2))
            // ... after an engine with the old keys stored a batch it did not get to send.
            let change = try device.set("pin", .string("stale-batch-Q4"))
            let op = try EntrySealer(keys: keys).seal(key: "pin", value: change.value, hlc: change.hlc, origin: device.defaults.origin)
            let body = try JSONEncoder().encode(PushRequest(deviceID: device.defaults.origin, batchID: "old-epoch-batch", ops: [op]))
            try device.defaults.setInFlightBatch(InFlightBatch(id: "old-epoch-batch", body: Array(body)))

            let report = try await SyncEngine(defaults: device.defaults, client: server.client(suite), logger: Device.logger, keys: rotated)
                .syncOnce()
            #expect(report.pushed == 1 && report.pendingCount == 0)
            #expect(try device.defaults.syncState().inFlight == nil)
            let epochs = Set(try await server.snapshot(suite).entries.values.compactMap { $0.sealed?.epoch })
            #expect(epochs.contains(2))
            #expect(try await server.snapshot(suite, keys: rotated).entries["pin"]?.value == .string("stale-batch-Q4"))
        }
    }

    @Test("a plain batch stored before the suite was encrypted is dropped, never sent: its changes go sealed")
    func plainBatchStoredBeforeEncryption() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.e2e.switch"
            let plain = try Device(suite, server: server)
            defer { plain.remove() }
            let change = try plain.set("pin", .string("plain-secret-Z8Q"))
            // The batch a plain engine stored and did not get to send.
            let body = try JSONEncoder().encode(
                PushRequest(
                    deviceID: plain.defaults.origin,
                    batchID: "plain-batch",
                    ops: [
                        PushOp(key: "pin", value: change.value, hlc: change.hlc)
                    ]
                )
            )
            try plain.defaults.setInFlightBatch(InFlightBatch(id: "plain-batch", body: Array(body)))
            let keys = SuiteKeys(recoveryKey: RecoveryKey(), suite: suite)
            let sealed = SyncEngine(defaults: plain.defaults, client: server.client(suite), logger: Device.logger, keys: keys)
            let report = try await sealed.syncOnce()
            #expect(report.isInAgreement && report.pushed == 1)
            #expect(try plain.defaults.syncState().inFlight == nil)
            #expect(!(try await ServerStore.dump(server)).contains("plain-secret-Z8Q"))
            #expect(try await server.snapshot(suite, keys: keys).entries["pin"]?.value == .string("plain-secret-Z8Q"))
        }
    }
}
