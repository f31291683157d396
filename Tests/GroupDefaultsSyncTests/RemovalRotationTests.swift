import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsSync

/// Every removal removes (issue 47): a member of an end-to-end encrypted shared suite removed by
/// anything but `unshare` (the API, as the console does; a member leaving) holds the current key
/// until the owner's devices rotate. The server marks the rotation due, `status` on the owner's
/// device says so, and its next `sync` rotates, leaving the removed accounts out.
@Suite("A removal from an encrypted shared suite makes a rotation due", .timeLimit(.minutes(4)))
struct RemovalRotationTests {
    @Test(
        "removed through the API and by leaving: the server marks a rotation due, status says so, the owner's next sync rotates without them and the mark ends",
        arguments: StorageBackend.allCases
    )
    func removalMakesRotationDue(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let alice = ToolDevice("family")
            let bob = ToolDevice("family")
            let carol = ToolDevice("family")
            defer { for device in [alice, bob, carol] { device.remove() } }
            try await Self.ownEncrypted(alice, server)
            try await Self.join(bob, "bob", alice, server)
            try await Self.join(carol, "carol", alice, server)
            for device in [bob, carol] { try await expectOK(device.sync("sync")) }
            let bobsKeys = try SuiteKeys.read(from: try bob.keyFile(), suite: "family")
            let owner = server.client("family")

            // Removed through the API (the console's Remove takes the same path): no rotation yet.
            let removed = try await owner.removeMember("bob")
            #expect(removed.rotationDue?.removed == ["bob"] && removed.rotationDue?.epoch == 1)
            let status = try await alice.sync("status")
            #expect(status.status == 1, "\(status.stdout) \(status.stderr)")
            #expect(status.stdout.contains("state: key rotation due: bob held the suite's keys when removed"), "\(status.stdout)")
            #expect(status.stderr.contains("the next `groupdefaults-sync sync --directory \(alice.directory.path) family`"), "\(status.stderr)")
            try await StatusCheck.expect(alice, "rotation_due")
            // A member leaving holds the key too.
            try await expectOK(carol.sync("leave"))
            #expect(try await owner.keyBags().rotationDue?.removed == ["bob", "carol"])

            let synced = try await alice.sync("sync")
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(synced.stdout.contains("rotated family to key epoch 2"), "\(synced.stdout)")
            #expect(synced.stdout.contains("bob, carol held its keys when removed"), "\(synced.stdout)")
            let bags = try await owner.keyBags()
            #expect(bags.rotationDue == nil && bags.newestEpoch == 2)
            let sealedTo = bags.shared["2"]?.accounts ?? []
            #expect(!sealedTo.contains { $0.isSameName(as: "bob") || $0.isSameName(as: "carol") }, "sealed to nobody removed")
            let after = try await alice.sync("status")
            #expect(after.status == 0 && after.stdout.contains("state: ok"), "\(after.stdout) \(after.stderr)")

            // What is written now opens with nothing bob holds.
            try alice.open().set("after-removal-R7T1", forKey: "secret")
            try await expectOK(alice.sync("sync"))
            #expect(bobsKeys.adopting(bags) == nil)
            let sealer = EntrySealer(keys: bobsKeys)
            let sealed = try await owner.snapshot(after: nil, limit: 100).entries.filter { $0.sealed?.epoch == 2 }
            #expect(!sealed.isEmpty)
            for entry in sealed { #expect(throws: EntrySealer.Refusal.self) { try sealer.open(entry) } }
        }
    }

    @Test(
        "a running `run` hears of a removal through the API on its event stream and rotates at once: what is written next is sealed under the new epoch, which the removed member cannot open",
        arguments: StorageBackend.allCases
    )
    func runRotatesAtOnce(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let alice = ToolDevice("family")
            let bob = ToolDevice("family")
            defer { for device in [alice, bob] { device.remove() } }
            try await Self.ownEncrypted(alice, server)
            try await Self.join(bob, "bob", alice, server)
            try await expectOK(bob.sync("sync"))
            let bobsKeys = try SuiteKeys.read(from: try bob.keyFile(), suite: "family")
            let owner = server.client("family")
            let run = try alice.start("run", ["--log-level", "info"])
            defer { run.signal(SIGKILL) }
            // Its event stream open (the removal must reach it there, not at a new connection).
            #expect(await eventually { (try? await server.metricsText())?.contains("groupdefaults_event_streams_open 1") == true })

            _ = try await owner.removeMember("bob")
            #expect(await eventually(within: .seconds(20)) { run.stderr.contains("rotated the suite's keys to epoch 2") }, "\(run.stderr)")
            #expect(run.stderr.contains("the server says a key rotation is due: bob held the suite's keys when removed"), "\(run.stderr)")
            let bags = try await owner.keyBags()
            #expect(bags.rotationDue == nil && bags.newestEpoch == 2)
            let status = try await alice.sync("status")
            #expect(status.status == 0 && status.stdout.contains("state: ok"), "\(status.stdout) \(status.stderr)")

            // Written after the removal, pushed by the run: under epoch 2, which nothing bob holds opens.
            try alice.open().set("after-removal-K4Q2", forKey: "secret")
            let alicesKeys = try SuiteKeys.read(from: try alice.keyFile(), suite: "family")
            #expect(await eventually { (try? await server.snapshot("family", keys: alicesKeys))?.entries["secret"] != nil })
            let entries = try await owner.snapshot(after: nil, limit: 100).entries
            #expect(entries.count == 2 && entries.allSatisfy { $0.sealed?.epoch == 2 }, "\(entries)")
            #expect(bobsKeys.adopting(bags) == nil)
            let sealer = EntrySealer(keys: bobsKeys)
            for entry in entries { #expect(throws: EntrySealer.Refusal.self) { try sealer.open(entry) } }
            #expect(await run.terminate().status == 0, "\(run.stderr)")
        }
    }

    @Test(
        "an owner device that has not synced since the other one rotated shares: it takes the newest key first, so the new member opens what was written under it and is in the next rotation",
        arguments: StorageBackend.allCases
    )
    func shareFromADeviceBehind(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let phone = ToolDevice("family")
            let tablet = ToolDevice("family")
            let bob = ToolDevice("family")
            let carol = ToolDevice("family")
            defer { for device in [phone, tablet, bob, carol] { device.remove() } }
            try await Self.ownEncrypted(phone, server)
            let pair = try RunningProcess(ToolDevice.syncExecutable, ["pair", "family", "--directory", phone.directory.path])
            let line = try #require(await pair.firstLine(timeout: .seconds(30)) { $0.hasPrefix("pairing code: ") })
            try await expectOK(
                tablet.sync(
                    "configure",
                    [
                        "--server", server.url.absoluteString, "--pairing-code", String(line.dropFirst("pairing code: ".count)),
                        "--token-file", tablet.directory.appendingPathComponent("paired.token").path,
                    ]
                )
            )
            #expect(await pair.finish().status == 0)
            try await Self.join(bob, "bob", phone, server)
            let owner = server.client("family")
            _ = try await owner.removeMember("bob")
            try phone.open().set("epoch-two-Q4K8", forKey: "secret")
            let rotated = try await phone.sync("sync")
            #expect(rotated.stdout.contains("rotated family to key epoch 2"), "\(rotated.stdout) \(rotated.stderr)")

            // The tablet still holds epoch 1 only, and invites carol.
            try await Self.join(carol, "carol", tablet, server)
            let carolListed = try await owner.members().members.first { $0.account == "carol" }
            #expect(carolListed?.admission?.epoch == 2, "vouched for at the newest epoch: \(String(describing: carolListed))")
            try await expectOK(carol.sync("sync"))
            #expect(try carol.open().string(forKey: "secret") == "epoch-two-Q4K8")

            // The next rotation (another removal) seals the new key to carol too.
            let dave = ToolDevice("family")
            defer { dave.remove() }
            try await Self.join(dave, "dave", phone, server)
            _ = try await owner.removeMember("dave")
            try phone.open().set("epoch-three-Z2M5", forKey: "secret")
            let again = try await phone.sync("sync")
            #expect(again.stdout.contains("rotated family to key epoch 3"), "\(again.stdout) \(again.stderr)")
            try await expectOK(carol.sync("sync"))
            #expect(try carol.open().string(forKey: "secret") == "epoch-three-Z2M5")
        }
    }

    @Test(
        "a rotation stopped after its bag was signed, then a member joins: the next sync finishes it with the members as they are then, and the new member reads what is written next",
        arguments: StorageBackend.allCases
    )
    func stoppedRotationThenAJoin(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let alice = ToolDevice("family")
            let bob = ToolDevice("family")
            let carol = ToolDevice("family")
            defer { for device in [alice, bob, carol] { device.remove() } }
            try await Self.ownEncrypted(alice, server)
            // First with no member when the bag was signed (it had no members' part, which the
            // server then requires), then with bob in it and carol joining after.
            for (index, (joiner, account)) in [(bob, "bob"), (carol, "carol")].enumerated() {
                let epoch = try await server.client("family").keyBags().newestEpoch
                let stopped = try await InterruptionTests.run(alice, "rotate-key", [], InterruptionTests.environment(at: "rotate-key.bag-signed"))
                InterruptionTests.expectStopped(stopped, by: SIGKILL, "rotate-key stopped at its signed bag")
                try await Self.join(joiner, account, alice, server)

                let synced = try await alice.sync("sync")
                #expect(synced.status == 0, "\(synced.stderr)")
                #expect(synced.stdout.contains("finished rotating"), "\(synced.stdout)")
                let bags = try await server.client("family").keyBags()
                #expect(bags.newestEpoch == max(epoch, 1) + 1)
                let sealedTo = bags.shared[String(bags.newestEpoch)]?.accounts ?? []
                #expect(sealedTo.contains { $0.isSameName(as: account) }, "the new epoch is sealed to \(account): \(sealedTo)")

                let secret = "after-join-\(index)"
                try alice.open().set(secret, forKey: "secret")
                try await expectOK(alice.sync("sync"))
                try await expectOK(joiner.sync("sync"))
                #expect(try joiner.open().string(forKey: "secret") == secret)
            }
        }
    }

    @Test(
        "a rotation stopped after its bag was signed, then another device of the owner writes under the old epoch: the next sync takes that write in and seals it again, refusing nothing",
        arguments: StorageBackend.allCases
    )
    func stoppedRotationThenAWriteUnderTheOldEpoch(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let phone = ToolDevice("family")
            let tablet = ToolDevice("family")
            defer { for device in [phone, tablet] { device.remove() } }
            try await Self.ownEncrypted(phone, server)
            let pair = try RunningProcess(ToolDevice.syncExecutable, ["pair", "family", "--directory", phone.directory.path])
            let line = try #require(await pair.firstLine(timeout: .seconds(30)) { $0.hasPrefix("pairing code: ") })
            try await expectOK(
                tablet.sync(
                    "configure",
                    [
                        "--server", server.url.absoluteString, "--pairing-code", String(line.dropFirst("pairing code: ".count)),
                        "--token-file", tablet.directory.appendingPathComponent("paired.token").path,
                    ]
                )
            )
            #expect(await pair.finish().status == 0)

            let stopped = try await InterruptionTests.run(phone, "rotate-key", [], InterruptionTests.environment(at: "rotate-key.bag-signed"))
            InterruptionTests.expectStopped(stopped, by: SIGKILL, "rotate-key stopped at its signed bag")
            // The server is still at epoch 1: the tablet's push is taken under it.
            try tablet.open().set("chime.caf", forKey: "ringtone")
            try await expectOK(tablet.sync("sync"))

            let synced = try await phone.sync("sync")
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            #expect(synced.stdout.contains("finished rotating"), "\(synced.stdout)")
            #expect(!synced.stdout.contains("refused") && !synced.stderr.contains("refused"), "\(synced.stdout) \(synced.stderr)")
            #expect(try phone.open().string(forKey: "ringtone") == "chime.caf")
            let epochs = Set(try await server.snapshot("family").entries.values.compactMap { $0.sealed?.epoch })
            #expect(epochs == [2], "every entry sealed again under the new epoch: \(epochs)")
        }
    }

    @Test(
        "a rotation stopped after its bag was signed to a member who is removed before it is finished: it is finished with a new key, which no bag sealed to that member holds",
        arguments: StorageBackend.allCases
    )
    func stoppedRotationThenARemoval(backend: StorageBackend) async throws {
        try await EncryptedSharingTests.Family.with(backend) { family in
            let phone = family.alicePhone
            let stopped = try await InterruptionTests.run(phone, "rotate-key", [], InterruptionTests.environment(at: "rotate-key.bag-signed"))
            InterruptionTests.expectStopped(stopped, by: SIGKILL, "rotate-key stopped at its signed bag")
            let signed = try #require(try family.keys(phone).pendingBag)
            #expect(signed.bag.shared?.accounts.contains { $0.isSameName(as: "carol") } == true)
            // carol is removed (through the API: a rotation due) before the rotation is finished.
            _ = try await family.server.client("family").removeMember("carol")

            let synced = try await phone.sync("sync")
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            let bags = try await family.server.client("family").keyBags()
            #expect(bags.newestEpoch == signed.epoch && bags.rotationDue == nil)
            #expect(!(bags.shared[String(signed.epoch)]?.accounts ?? []).contains { $0.isSameName(as: "carol") })
            let stored = try #require(try family.keys(phone).epochs[signed.epoch])
            #expect(stored != signed.key, "the key the first bag sealed to carol is not the epoch's")
            try phone.open().set("after-removal", forKey: "note")
            try await expectOK(phone.sync("sync"))
            try await expectOK(family.bob.sync("sync"))
            #expect(try family.bob.open().string(forKey: "note") == "after-removal")
        }
    }

    @Test(
        "a rotation stopped after its bag was signed while another owner device rotates first: the stopped one's key for that epoch is dropped, the bags' taken, and every device reads the others' writes",
        arguments: StorageBackend.allCases
    )
    func stoppedRotationBeatenByAnotherOwnerDevice(backend: StorageBackend) async throws {
        try await EncryptedSharingTests.Family.with(backend) { family in
            let (phone, tablet) = (family.alicePhone, family.aliceTablet)
            let stopped = try await InterruptionTests.run(phone, "rotate-key", [], InterruptionTests.environment(at: "rotate-key.bag-signed"))
            InterruptionTests.expectStopped(stopped, by: SIGKILL, "rotate-key stopped at its signed bag")
            let signed = try #require(try family.keys(phone).pendingBag)
            // Written while the phone's key for the new epoch is its guess only.
            try phone.open().set("written-before-its-bag-was-stored", forKey: "early")

            let rotated = try await tablet.sync("rotate-key")
            #expect(rotated.status == 0, "\(rotated.stdout) \(rotated.stderr)")
            let bags = try await family.server.client("family").keyBags()
            #expect(bags.newestEpoch == signed.epoch, "the tablet's bag took the epoch the phone's was signed for")
            try tablet.open().set("from-the-tablet", forKey: "note")
            try await expectOK(tablet.sync("sync"))

            try phone.open().set("from-the-phone", forKey: "ringtone")
            let synced = try await phone.sync("sync")
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            #expect(!synced.stdout.contains("refused") && !synced.stderr.contains("refused"), "\(synced.stdout) \(synced.stderr)")
            let keys = try family.keys(phone)
            #expect(keys.pendingBag == nil)
            #expect(
                keys.epochs[signed.epoch] == (try family.keys(tablet)).epochs[signed.epoch],
                "the phone holds the epoch's key the tablet's bag holds"
            )
            #expect(try phone.open().string(forKey: "note") == "from-the-tablet")
            for device in [tablet, family.carol] {
                try await expectOK(device.sync("sync"))
                #expect(try device.open().string(forKey: "ringtone") == "from-the-phone")
                #expect(try device.open().string(forKey: "early") == "written-before-its-bag-was-stored")
            }
        }
    }

    /// `configure --encrypt` on `device` with the server's token (alice's), one key written and synced.
    static func ownEncrypted(_ device: ToolDevice, _ server: SyncServer) async throws {
        let configured = try await device.sync(
            "configure",
            ["--server", server.url.absoluteString, "--token-file", try device.tokenFile(server.token), "--encrypt"]
        )
        #expect(configured.status == 0, "\(configured.stderr)")
        try device.open().set("ding.caf", forKey: "doorbell")
        try await expectOK(device.sync("sync"))
    }

    /// `share family --role write` on `owner`, kept running, and `configure --invitation` on
    /// `device` with a new token of `account`.
    static func join(_ device: ToolDevice, _ account: String, _ owner: ToolDevice, _ server: SyncServer) async throws {
        let token = try await ServerTool.createToken(storage: server.storage, account: account)
        let share = try RunningProcess(ToolDevice.syncExecutable, ["share", "family", "--role", "write", "--directory", owner.directory.path])
        let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }, "share printed no code")
        let joined = try await device.syncTool(
            [
                "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString, "--token-file",
                try device.tokenFile(token, name: "\(account).token"),
            ]
        )
        #expect(joined.status == 0, "\(joined.stderr)")
        let shared = await share.finish()
        #expect(shared.status == 0, "\(shared.stderr)")
    }
}
