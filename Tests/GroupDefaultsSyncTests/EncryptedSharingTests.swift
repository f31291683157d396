import Crypto
import Foundation
import GroupDefaults
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsSync

/// End-to-end encrypted suites shared between accounts, through the real tools, processes and
/// server: alice's suite `family` on her phone (set up with `--encrypt`) and tablet (paired), and
/// the devices of bob and carol, each joined with an invitation code.
@Suite("Encrypted shared suites", .timeLimit(.minutes(4)))
struct EncryptedSharingTests {
    struct Family {
        let server: SyncServer
        let alicePhone: ToolDevice
        let aliceTablet: ToolDevice
        let bob: ToolDevice
        let carol: ToolDevice
        /// The member accounts' names: bob's and carol's devices' (two accounts, compared as bytes).
        let names: (bob: String, carol: String)
        let tokens: [ExactName: String]

        var all: [ToolDevice] { [alicePhone, aliceTablet, bob, carol] }

        /// The four devices set up, each holding `doorbell`, synced.
        static func with(
            _ backend: StorageBackend,
            names: (bob: String, carol: String) = ("bob", "carol"),
            _ body: (Family) async throws -> Void
        ) async throws {
            try await SyncServer.with(backend) { server in
                var tokens: [ExactName: String] = [:]
                for account in [names.bob, names.carol] {
                    tokens[account.exact] =
                        account.isSameName(as: account.precomposedStringWithCanonicalMapping)
                        ? try await ServerTool.createToken(storage: server.storage, account: account)
                        : try await legacyToken(server, account: account)
                }
                let family = Family(
                    server: server,
                    alicePhone: ToolDevice("family"),
                    aliceTablet: ToolDevice("family"),
                    bob: ToolDevice("home"),
                    carol: ToolDevice("family"),
                    names: names,
                    tokens: tokens
                )
                defer { for device in family.all { device.remove() } }
                let configured = try await family.alicePhone.sync(
                    "configure",
                    ["--server", server.url.absoluteString, "--token-file", try family.alicePhone.tokenFile(server.token), "--encrypt"]
                )
                #expect(configured.status == 0, "\(configured.stderr)")
                try family.alicePhone.open().set("ding.caf", forKey: "doorbell")
                try await expectOK(family.alicePhone.sync("sync"))
                try await family.pairTablet()
                try await family.join(family.bob, as: "home")
                try await family.join(family.carol)
                for device in family.all { try await expectOK(device.sync("sync")) }
                try await body(family)
            }
        }

        /// A token for `account`, a name the server no longer takes (not NFC: KELVIN SIGN `\u{212A}im`),
        /// made as a store of an earlier version would hold it (`GroupDefaultsLegacyStore`).
        static func legacyToken(_ server: SyncServer, account: String) async throws -> String {
            let made = try await BuiltExecutable.run(BuiltExecutable.url("GroupDefaultsLegacyStore"), ["token"] + server.storage + [account])
            #expect(made.status == 0, "\(made.stderr)")
            return made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func pairTablet() async throws {
            let pair = try RunningProcess(ToolDevice.syncExecutable, ["pair", "family", "--directory", alicePhone.directory.path])
            let line = try #require(await pair.firstLine(timeout: .seconds(30)) { $0.hasPrefix("pairing code: ") })
            let token = aliceTablet.directory.appendingPathComponent("paired.token").path
            try await expectOK(
                aliceTablet.sync(
                    "configure",
                    ["--server", server.url.absoluteString, "--pairing-code", String(line.dropFirst("pairing code: ".count)), "--token-file", token]
                )
            )
            #expect(await pair.finish().status == 0)
        }

        /// `share family --role write` on alice's phone, kept running, and `configure --invitation`
        /// on `device` with its account's token.
        func join(_ device: ToolDevice, as name: String? = nil) async throws {
            let account = device.directory == bob.directory ? names.bob : names.carol
            let share = try RunningProcess(
                ToolDevice.syncExecutable,
                ["share", "family", "--role", "write", "--directory", alicePhone.directory.path]
            )
            let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }, "share printed no code")
            let file = try device.tokenFile(tokens[account.exact]!, name: "\(device.directory == bob.directory ? "bob" : "carol").token")
            let joined = try await device.syncTool(
                ["configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString, "--token-file", file]
                    + (name.map { ["--as", $0] } ?? [])
            )
            #expect(joined.status == 0, "\(joined.stderr)")
            let shared = await share.finish()
            #expect(shared.status == 0, "\(shared.stderr)")
            #expect(shared.stdout.contains("handed the keys of family to \(account)'s device"), "\(shared.stdout)")
        }

        func keys(_ device: ToolDevice) throws -> SuiteKeys { try SuiteKeys.read(from: try device.keyFile(), suite: "family") }
    }

    @Test(
        "a member invited from the owner's other device takes the next epoch's key from the key bag when the first device rotates (a plain name, and KELVIN SIGN's `\u{212A}im` stored before the name rules)",
        arguments: StorageBackend.allCases,
        ["dave", "\u{212A}im"]
    )
    func memberInvitedFromTheOtherOwnerDevice(backend: StorageBackend, name: String) async throws {
        try await Family.with(backend) { family in
            let dave = ToolDevice("family")
            defer { dave.remove() }
            let token =
                name == "dave"
                ? try await ServerTool.createToken(storage: family.server.storage, account: name)
                : try await Family.legacyToken(family.server, account: name)
            let share = try RunningProcess(
                ToolDevice.syncExecutable,
                ["share", "family", "--role", "write", "--directory", family.aliceTablet.directory.path]
            )
            let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }, "share printed no code")
            let joined = try await dave.syncTool(
                [
                    "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", family.server.url.absoluteString,
                    "--token-file", try dave.tokenFile(token, name: "dave.token"),
                ]
            )
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(await share.finish().status == 0)
            try await expectOK(dave.sync("sync"))

            let rotated = try await family.alicePhone.sync("rotate-key")
            #expect(rotated.status == 0 && rotated.stdout.contains("epoch 2"), "\(rotated)")
            let sealedTo = try await family.server.client("family").keyBags().shared["2"]?.accounts ?? []
            #expect(sealedTo.contains { $0.isSameName(as: name) }, "\(sealedTo)")
            try family.alicePhone.open().set("after-rotation", forKey: "note")
            try await expectOK(family.alicePhone.sync("sync"))
            try await expectOK(dave.sync("sync"))
            #expect(try dave.open().string(forKey: "note") == "after-rotation")
        }
    }

    @Test(
        "keys reach each member through its invitation; removing a member rotates the suite: the removed account's devices and the server's store open nothing written after, and the other three devices go on without pairing",
        arguments: StorageBackend.allCases
    )
    func removalRotates(backend: StorageBackend) async throws {
        try await Family.with(backend) { family in
            for device in family.all { #expect(try device.open().string(forKey: "doorbell") == "ding.caf") }
            // A member's writes reach everyone; a member's key file holds no owner key.
            try family.bob.open().set("22:00", forKey: "quiet")
            try await expectOK(family.bob.sync("sync"))
            for device in [family.alicePhone, family.aliceTablet, family.carol] { try await expectOK(device.sync("sync")) }
            #expect(try family.carol.open().string(forKey: "quiet") == "22:00")
            #expect(try family.keys(family.bob).sharing?.isOwner == false && family.keys(family.aliceTablet).sharing?.isOwner == true)
            let carolsKeys = try family.keys(family.carol)

            let removed = try await family.alicePhone.sync("unshare", ["--account", "carol"])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(removed.stdout.contains("rotated family to key epoch 2"), "\(removed.stdout)")
            try family.alicePhone.open().set("after-removal-X4K2", forKey: "secret")
            try await expectOK(family.alicePhone.sync("sync"))

            // The three others take epoch 2 from its key bag and keep syncing, both ways.
            for device in [family.aliceTablet, family.bob] {
                try await expectOK(device.sync("sync"))
                #expect(try device.open().string(forKey: "secret") == "after-removal-X4K2")
                #expect(try family.keys(device).currentEpoch == 2)
            }
            try family.bob.open().set("wake-value-Q9Z7", forKey: "wake")
            try await expectOK(family.bob.sync("sync"))
            for device in [family.alicePhone, family.aliceTablet] {
                try await expectOK(device.sync("sync"))
                #expect(try device.open().string(forKey: "wake") == "wake-value-Q9Z7")
            }

            // Carol's devices: refused, and what they hold opens nothing written since.
            let refused = try await family.carol.sync("sync")
            #expect(refused.status == 3 && refused.stderr.contains("not shared with this account"), "\(refused.stderr)")
            #expect(try family.carol.open().string(forKey: "secret") == nil)
            let owner = family.server.client("family")
            #expect(carolsKeys.adopting(try await owner.keyBags()) == nil)
            let sealer = EntrySealer(keys: carolsKeys)
            let after = try await owner.snapshot(after: nil, limit: 1000).entries.filter { $0.sealed?.epoch == 2 }
            #expect(after.count == 4)  // doorbell and quiet sealed again by the rotation; secret and wake written after
            for entry in after {
                #expect(throws: EntrySealer.Refusal.self) { try sealer.open(entry) }
            }
            let stored = try await ServerStore.dump(family.server)
            #expect(!stored.contains("after-removal-X4K2") && !stored.contains("wake-value-Q9Z7"))
        }
    }

    @Test(
        "a shared key bag keeps one copy for each of two accounts whose names are one Swift string (Kim, KELVIN SIGN \u{212A}im) through JSON, signed; one stored by an earlier version (an object by account) still reads"
    )
    func sharedBagKeepsLookAlikeAccounts() async throws {
        let keys = SuiteKeys(recoveryKey: RecoveryKey(), suite: "family")
        let members: [ExactName: Curve25519.KeyAgreement.PublicKey] = [
            "Kim": Curve25519.KeyAgreement.PrivateKey().publicKey, "\u{212A}im": Curve25519.KeyAgreement.PrivateKey().publicKey,
        ]
        let bag = try keys.sharedKeyBag(epoch: 1, members: members)
        let decoded = try JSONDecoder().decode(SharedKeyBag.self, from: try JSONEncoder().encode(bag))
        #expect(decoded.members.count == 2)
        #expect(Set(decoded.accounts.map(\.exact)) == Set(members.keys))
        let roster = keys.sharedRoster(KeyBags(epochs: [:], signatures: [:], shared: ["1": decoded]))
        #expect(roster?.accounts == Set(members.keys), "the signature covers both copies")

        // Accounts that are not one Swift string go as an object by account, which every version reads.
        let plain = try keys.sharedKeyBag(epoch: 1, members: ["bob": Curve25519.KeyAgreement.PrivateKey().publicKey])
        #expect(String(decoding: try JSONEncoder().encode(plain), as: UTF8.self).contains(#""members":{"bob":"#))
        #expect(String(decoding: try JSONEncoder().encode(bag), as: UTF8.self).contains(#""members":[{"#))

        let stored = #"{"owner":"c2VhbGVk","members":{"bob":"Ym9i"},"signature":"c2ln"}"#
        let legacy = try JSONDecoder().decode(SharedKeyBag.self, from: Data(stored.utf8))
        #expect(legacy.members == [SharedKeyBag.SealedCopy(account: "bob", sealed: "Ym9i")])
    }

    @Test(
        "removing KELVIN SIGN \u{212A}im from an encrypted suite leaves Kim in: Kim's device takes the new epoch without pairing, \u{212A}im's opens nothing written after",
        arguments: StorageBackend.allCases
    )
    func removalOfALookAlikeLeavesTheOtherIn(backend: StorageBackend) async throws {
        try await Family.with(backend, names: (bob: "Kim", carol: "\u{212A}im")) { family in
            let removed = try await family.alicePhone.sync("unshare", ["--account", "\u{212A}im"])
            #expect(removed.status == 0, "\(removed.stderr)")
            #expect(removed.stdout.contains("rotated family to key epoch 2"), "\(removed.stdout)")
            try family.alicePhone.open().set("after-removal-K7W3", forKey: "secret")
            try await expectOK(family.alicePhone.sync("sync"))

            // Kim is still a member: its device takes epoch 2 from the key bag, no pairing.
            try await expectOK(family.bob.sync("sync"))
            #expect(try family.bob.open().string(forKey: "secret") == "after-removal-K7W3")
            #expect(try family.keys(family.bob).currentEpoch == 2)
            let bag = try #require(try await family.server.client("family").keyBags().shared["2"])
            #expect(bag.accounts.map(\.exact) == [ExactName("Kim")], "sealed to Kim alone: \(bag.accounts)")

            // \u{212A}im's device is refused and opens nothing of epoch 2.
            let refused = try await family.carol.sync("sync")
            #expect(refused.status == 3, "\(refused.stderr)")
            #expect(try family.carol.open().string(forKey: "secret") == nil)
        }
    }

    @Test(
        "a member's other device pairs from its first and takes rotations too; a removed member invited again gets the new epoch's key and joins with the copy it kept"
    )
    func memberDevicesAndRejoining() async throws {
        try await Family.with(.lmdb) { family in
            // Bob's tablet: his member key and the suite's keys come by pairing with his phone.
            let tablet = ToolDevice("home")
            defer { tablet.remove() }
            // Configured without naming the owner (under the owner's name for the suite), a member's
            // keys are refused: they would sync a suite of bob's own account of that name.
            let wrong = ToolDevice("family")
            defer { wrong.remove() }
            let first = try RunningProcess(ToolDevice.syncExecutable, ["pair", "home", "--directory", family.bob.directory.path])
            let firstCode = try #require(await first.firstLine(timeout: .seconds(30)) { $0.hasPrefix("pairing code: ") })
            let hint = try #require(await first.firstLine(timeout: .seconds(30)) { $0.contains("--pairing-code") })
            #expect(hint.hasSuffix("--shared-from alice/family --token-file NEW.token"), "\(hint)")
            let refused = try await wrong.sync(
                "configure",
                [
                    "--server", family.server.url.absoluteString, "--pairing-code", String(firstCode.dropFirst("pairing code: ".count)),
                    "--token-file", wrong.directory.appendingPathComponent("bob.token").path,
                ]
            )
            #expect(refused.status == 1 && refused.stderr.contains("--shared-from OWNER/SUITE"), "\(refused.stdout) \(refused.stderr)")
            _ = await first.finish()

            let pair = try RunningProcess(ToolDevice.syncExecutable, ["pair", "home", "--directory", family.bob.directory.path])
            let line = try #require(await pair.firstLine(timeout: .seconds(30)) { $0.hasPrefix("pairing code: ") })
            let configured = try await tablet.sync(
                "configure",
                [
                    "--server", family.server.url.absoluteString, "--shared-from", "alice/family", "--pairing-code",
                    String(line.dropFirst("pairing code: ".count)), "--token-file", tablet.directory.appendingPathComponent("bob.token").path,
                ]
            )
            #expect(configured.status == 0, "\(configured.stderr)")
            #expect(configured.stdout.contains("alice's suite family, as a write member; end-to-end encrypted"), "\(configured.stdout)")
            #expect(await pair.finish().status == 0)
            try await expectOK(tablet.sync("sync"))
            #expect(try tablet.open().string(forKey: "doorbell") == "ding.caf")

            try await expectOK(family.alicePhone.sync("unshare", ["--account", "carol"]))
            try family.alicePhone.open().set("after", forKey: "secret")
            try await expectOK(family.alicePhone.sync("sync"))
            try await expectOK(tablet.sync("sync"))
            #expect(try tablet.open().string(forKey: "secret") == "after")

            // Carol, invited again, joins with the copy she kept and its key file.
            try await family.join(family.carol)
            try await expectOK(family.carol.sync("sync"))
            #expect(try family.carol.open().string(forKey: "secret") == "after")
            #expect(try family.keys(family.carol).currentEpoch == 2)

            // `rotate-key --without bob`: bob is still listed (as after a leave the server hid), and
            // the new key is not sealed to him.
            let rotated = try await family.alicePhone.sync("rotate-key", ["--without", "bob"])
            #expect(rotated.status == 0, "\(rotated.stderr)")
            #expect(rotated.stdout.contains("Your other devices and those of carol take the new key"), "\(rotated.stdout)")
            try await expectOK(family.carol.sync("sync"))
            #expect(try family.keys(family.carol).currentEpoch == 3)
            #expect(try await family.bob.sync("sync").status != 0)
            #expect(try family.keys(family.bob).currentEpoch == 2)
        }
    }

    @Test(
        "a hostile server hands a key bag of its own (with the removed member): the remaining devices refuse it and keep their keys"
    )
    func substitutedKeyBagIsRefused() async throws {
        try await Family.with(.lmdb) { family in
            let bobsKey = try #require(try family.keys(family.bob).sharing?.member?.publicKey)
            let carolsKeys = try family.keys(family.carol)
            try await expectOK(family.alicePhone.sync("unshare", ["--account", "carol"]))
            // The server and carol make epoch 2 a key of theirs, sealed to bob's member key and to
            // the owner's devices, signed by a key of theirs (the owner key is on alice's devices only).
            let forger = try carolsKeys.rotated().with(
                sharing: SharingKeys(owner: Curve25519.Signing.PrivateKey(), ownerSeal: SymmetricKey(size: .bits256))
            )
            var forged = try forger.sharedKeyBag(epoch: 2, members: ["bob": bobsKey])
            // Also the true bag with bob's copy swapped for one of the forged key: its signature breaks.
            let stolenSignature = try await family.server.client("family").keyBags().shared["2"]?.signature
            try await family.server.killAndRestart {
                try await ServerStore.editKeyBag(family.server, suite: "family", epoch: 2) { $0.shared = forged }
            }
            for device in [family.bob, family.aliceTablet] {
                let result = try await device.sync("sync")
                #expect(result.status != 0, "\(device.directory.lastPathComponent) took a forged key bag")
                #expect(result.stderr.contains("signed by the suite's owner key"), "\(result.stderr)")
                #expect(try family.keys(device).currentEpoch == 1)
            }
            forged.signature = try #require(stolenSignature)
            try await family.server.killAndRestart {
                try await ServerStore.editKeyBag(family.server, suite: "family", epoch: 2) { $0.shared = forged }
            }
            #expect(try await family.bob.sync("sync").status != 0)
            #expect(try family.keys(family.bob).currentEpoch == 1)
        }
    }

    @Test("an invitation accepted with a key that lacks the code's proof: the owner's device hands nothing over and removes the account")
    func claimWithoutProof() async throws {
        try await SyncServer.with(.lmdb) { server in
            let phone = ToolDevice("family")
            defer { phone.remove() }
            let configured = try await phone.sync(
                "configure",
                ["--server", server.url.absoluteString, "--token-file", try phone.tokenFile(server.token), "--encrypt"]
            )
            #expect(configured.status == 0, "\(configured.stderr)")
            try phone.open().set("ding.caf", forKey: "doorbell")
            try await expectOK(phone.sync("sync"))
            let share = try RunningProcess(ToolDevice.syncExecutable, ["share", "family", "--role", "read", "--directory", phone.directory.path])
            let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") })
            let code = try InvitationCode(parsing: String(line.dropFirst("code: ".count)))
            // Whoever learned the invitation id (the server) but not the code accepts with a key of its own.
            let mallory = try await ServerTool.createToken(storage: server.storage, account: "mallory")
            var client = server.client("-", token: mallory)
            client.owner = "alice"
            let random = { Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() }
            _ = try await client.acceptInvitation(invitationID: code.invitationID, claim: InvitationClaim(memberKey: random(), proof: random()))
            let result = await share.finish()
            #expect(result.status != 0)
            #expect(result.stderr.contains("does not come with the code's proof"), "\(result.stderr)")
            // Nothing was handed over; removed, mallory reads nothing of the invitation it used.
            let listed = try await server.client("family").invitations().invitations
            #expect(listed.count == 1 && listed.allSatisfy { $0.keys == nil && $0.state == .accepted }, "\(listed)")
            await #expect {
                _ = try await server.client("-", token: mallory).invitation(invitationID: code.invitationID)
            } throws: { error in
                (error as? SyncError)?.code == .invitationNotFound
            }
            let members = try await server.client("family").members()
            #expect(members.members.map(\.account) == ["alice"])

            // What the server says an invitation offers must be what the inviting device made: one
            // whose description differs (here: made as a plain suite's, served as the encrypted
            // one it is) joins nothing.
            let other = InvitationCode()
            _ = try await server.client("family").createInvitation(
                invitationID: other.invitationID,
                role: .write,
                expiresIn: nil,
                offerMAC: other.offerMAC(suite: "family", role: .write, encrypted: false)
            )
            let joiner = ToolDevice("family")
            defer { joiner.remove() }
            let file = try joiner.tokenFile(mallory, name: "mallory.token")
            let refused = try await joiner.syncTool(
                ["configure", "--invitation", "\(other)", "--server", server.url.absoluteString, "--token-file", file]
            )
            #expect(refused.status == 1 && refused.stderr.contains("is not what the inviting device made"), "\(refused.stderr)")
            #expect(try await server.client("-", token: mallory).invitation(invitationID: other.invitationID).state == .pending)
        }
    }
}
