import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// Pinned keys in shared suites, with the real tools and server on both backends, plain and
/// end-to-end encrypted: the owner pins; a member's writes of a pinned key are refused by the
/// server, its device puts the owner's value back and journals its own; members' devices see the
/// key as forced; a member without the role cannot unpin; unpinned, the key is everyone's again.
@Suite("Pinned keys", .timeLimit(.minutes(4)))
struct PinnedKeysTests {
    /// The promises, on a suite whose owner's devices are `owner` and `ownerTablet` and a write
    /// member's device `member` (all synced), on the server whose storage options are `storage`.
    static func checkPins(owner: ToolDevice, ownerTablet: ToolDevice, member: ToolDevice, storage: [String]) async throws {
        owner.openSet("22:00-07:00", "quietHours")
        try await expectOK(owner.sync("sync"))
        try await expectOK(member.sync("sync"))
        let memberDefaults = try member.open()
        let feed = try memberDefaults.changeFeed(forKeys: ["quietHours"])
        let pinned = try await owner.sync("pin", ["quietHours", "serverURL"])
        #expect(pinned.status == 0 && pinned.stdout == "pinned for the members: quietHours, serverURL\n", "\(pinned)")
        try await expectOK(member.sync("sync"))
        // Observers are told: the key's meaning changed (forced now), its value did not.
        let told = try feed.next(timeout: .seconds(10))
        #expect(told?.key == "quietHours" && told?.value == .string("22:00-07:00"), "\(String(describing: told))")
        #expect(memberDefaults.objectIsForced(forKey: "quietHours") && memberDefaults.objectIsForced(forKey: "serverURL"))
        #expect(!memberDefaults.objectIsForced(forKey: "doorbell"))
        #expect(memberDefaults.pinnedKeys == ["quietHours", "serverURL"])
        #expect(try !owner.open().objectIsForced(forKey: "quietHours"), "the owner's devices change pinned keys")

        // The member writes both pinned keys (one the owner never set) and one that is not pinned.
        memberDefaults.set("never", forKey: "quietHours")
        #expect(memberDefaults.lastError?.code == .pinnedKey)
        memberDefaults.set("https://evil.example", forKey: "serverURL")
        memberDefaults.set("bell.caf", forKey: "doorbell")
        let synced = try await member.sync("sync")
        #expect(synced.status == 0 && synced.stdout.contains("pushed 1,"), "only doorbell is pushed: \(synced)")
        #expect(synced.stdout.contains("2 local changes of pinned keys replaced by the owner's value"), "\(synced)")
        #expect(memberDefaults.string(forKey: "quietHours") == "22:00-07:00")
        #expect(memberDefaults.object(forKey: "serverURL") == nil)
        #expect(memberDefaults.string(forKey: "doorbell") == "bell.caf")
        let journaled = try memberDefaults.conflicts().map(\.key)
        #expect(journaled.contains("quietHours") && journaled.contains("serverURL"), "\(journaled)")
        for device in [owner, ownerTablet] {
            try await expectOK(device.sync("sync"))
            let defaults = try device.open()
            #expect(defaults.string(forKey: "quietHours") == "22:00-07:00" && defaults.object(forKey: "serverURL") == nil)
            #expect(defaults.string(forKey: "doorbell") == "bell.caf")
        }
        // Nothing is left pending: the next sync pushes nothing and changes nothing.
        try await expectOK(member.sync("sync"))
        #expect(memberDefaults.string(forKey: "quietHours") == "22:00-07:00")

        // The tool says so where a person looks.
        let written = try await member.defaultsTool(["write", member.suite, "quietHours", "23:00-06:00"])
        #expect(written.status == 0 && written.stderr.contains("quietHours is pinned by the suite's owner"), "\(written)")
        try await expectOK(member.sync("sync"))
        let read = try await member.defaultsTool(["read", member.suite, "quietHours"])
        #expect(read.stdout == "22:00-07:00\n" && read.stderr.contains("is pinned by the suite's owner"), "\(read)")

        // A write member may not unpin: 403 with its code, one line.
        let refused = try await member.sync("unpin", ["quietHours"])
        #expect(refused.status == 1 && refused.stderr.split(separator: "\n").count == 1, "\(refused)")
        #expect(refused.stderr.contains("only the owner and admins") && refused.stderr.contains("pin or unpin"), "\(refused)")

        // The owner's later value reaches the member; unpinned, the member's write wins again.
        owner.openSet("23:00-06:00", "quietHours")
        try await expectOK(owner.sync("sync"))
        try await expectOK(member.sync("sync"))
        #expect(memberDefaults.string(forKey: "quietHours") == "23:00-06:00")
        let unpinned = try await owner.sync("unpin", ["quietHours"])
        #expect(unpinned.status == 0 && unpinned.stdout == "pinned for the members: serverURL\n", "\(unpinned)")
        try await expectOK(member.sync("sync"))
        #expect(!memberDefaults.objectIsForced(forKey: "quietHours") && memberDefaults.objectIsForced(forKey: "serverURL"))
        memberDefaults.set("21:00-08:00", forKey: "quietHours")
        try await expectOK(member.sync("sync"))
        try await expectOK(owner.sync("sync"))
        #expect(try owner.open().string(forKey: "quietHours") == "21:00-08:00")

        let members = try await owner.sync("members")
        #expect(members.stdout.contains("pinned for the members: serverURL"), "\(members.stdout)")
        let audit = try await ServerTool.run(["audit", "--account", "alice"] + storage)
        #expect(audit.stdout.contains("key-pin") && audit.stdout.contains("key-unpin"), "\(audit.stdout)")
    }

    @Test("a plain shared suite: pinned keys are the owner's, on both backends", arguments: StorageBackend.allCases)
    func plain(backend: StorageBackend) async throws {
        try await SharingTests.Family.with(backend) { family in
            let joined = try await family.join(try await family.invite("write"))
            #expect(joined.status == 0, "\(joined.stderr)")
            try await expectOK(family.bobPhone.sync("sync"))
            try await Self.checkPins(
                owner: family.alicePhone,
                ownerTablet: family.aliceTablet,
                member: family.bobPhone,
                storage: family.server.storage
            )
            // Sealed names go with key ids only; look-alike keys are audited apart.
            let client = family.server.client("family")
            await #expect(throws: SyncError.self) {
                _ = try await client.changePins(PinChange(pin: ["Kelvin"], names: ["Kelvin": SealedPayload(epoch: 1, box: [1, 2, 3])]))
            }
            _ = try await client.changePins(PinChange(pin: ["Kelvin", "\u{212A}elvin"]))
            let audit = try await ServerTool.run(["audit", "--account", "alice"] + family.server.storage)
            #expect(
                audit.stdout.contains(#"key "Kelvin" of suite family"#) && audit.stdout.contains(#"key "\u{212A}elvin" of suite family"#),
                "\(audit.stdout)"
            )
        }
    }

    @Test("an end-to-end encrypted shared suite: the server enforces pins by key id, on both backends", arguments: StorageBackend.allCases)
    func encrypted(backend: StorageBackend) async throws {
        try await EncryptedSharingTests.Family.with(backend) { family in
            try await Self.checkPins(owner: family.alicePhone, ownerTablet: family.aliceTablet, member: family.bob, storage: family.server.storage)
            // The server holds key ids, never the names.
            let listed = try await family.server.client("family").pinnedKeys()
            #expect(listed.keys.count == 1 && listed.keys[0] != "serverURL", "\(listed)")
        }
    }
}

extension ToolDevice {
    /// Sets `key` to `value` in the device's suite.
    func openSet(_ value: String, _ key: String) {
        (try? open())?.set(value, forKey: key)
    }
}
