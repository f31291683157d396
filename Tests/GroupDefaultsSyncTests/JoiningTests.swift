import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// A device that joins a suite the server already has (sync configured on a suite that has been in
/// use) keeps the server's value for every key the server has, however recent its own copy, and
/// uploads the keys the server lacks; registered defaults are never uploaded.
@Suite("Joining a suite", .timeLimit(.minutes(2)))
struct JoiningTests {
    @Test(
        "a new device never overwrites the server's values, neither with registered defaults nor with values it stored before joining; its other keys are uploaded (plain and end-to-end encrypted)",
        arguments: StorageBackend.allCases,
        [false, true]
    )
    func joiningKeepsTheServersValues(backend: StorageBackend, encrypted: Bool) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.joining"
            let keys = encrypted ? SuiteKeys(recoveryKey: RecoveryKey(), suite: suite) : nil
            let phone = try Device(suite, server: server, keys: keys)
            defer { phone.remove() }
            let sound = try phone.set("sound", .string("ring.caf"))
            let volume = try phone.set("volume", .double(0.8))
            try phone.set("draft", .string("to be deleted"))
            try await phone.engine.syncOnce()
            let deleted = try #require(try phone.write("draft", nil))
            try await phone.engine.syncOnce()
            let before = try await server.snapshot(suite, keys: keys)

            // The tablet has been used without sync for a while: registered defaults, and values
            // stored after the phone's (newer stamps), some for keys the server has.
            let tablet = try Device(suite, server: server, synced: false, keys: keys)
            defer { tablet.remove() }
            tablet.defaults.register(defaults: ["sound": "default.caf", "badge": true, "theme": "light"])
            let newerVolume = try tablet.set("volume", .double(0.2))
            let newerDraft = try tablet.set("draft", .string("written on the tablet"))
            let layout = try tablet.set("layout", .string("grid"))
            #expect(newerVolume.stamp > volume.stamp && newerDraft.stamp > deleted.stamp)
            try tablet.enableSync(server)
            let report = try await tablet.engine.syncOnce()
            #expect(report.isInAgreement)

            // The tablet now holds the server's values, stamps included; its own key is kept.
            #expect(sameEntry(try tablet.defaults.syncEntry(forKey: "sound"), sound))
            #expect(sameEntry(try tablet.defaults.syncEntry(forKey: "volume"), volume))
            #expect(tablet.defaults.value(forKey: "draft") == nil, "the server's deletion wins over the tablet's newer value")
            #expect(sameEntry(try tablet.defaults.syncEntry(forKey: "layout"), layout))
            #expect(tablet.defaults.string(forKey: "theme") == "light", "registered defaults still read locally")
            // What the join replaced is kept: the tablet's own values, not the registered defaults.
            let kept = try tablet.defaults.conflicts()
            #expect(Set(kept.map(\.key)) == ["volume", "draft"], "\(kept)")
            #expect(kept.first { $0.key == "volume" }?.value == .double(0.2))
            #expect(kept.first { $0.key == "draft" }.map { $0.value == .string("written on the tablet") && $0.replacedBy == deleted.stamp } == true)
            #expect(report.replaced == 2 && report.replacedOnJoining == 2, "the server's older entries won by the joining rule")

            // The server: its values untouched (not even a new revision for them), the tablet's
            // own key added, no registered default uploaded.
            let after = try await server.snapshot(suite, keys: keys)
            for key in ["sound", "volume"] {
                #expect(sameEntry(after.entries[key], before.entries[key]) && after.entries[key]?.rev == before.entries[key]?.rev, "\(key)")
            }
            #expect(after.entries["draft"] == nil)
            #expect(sameEntry(after.entries["layout"], layout))
            #expect(Set(after.entries.keys) == ["sound", "volume", "layout"], "registered defaults are never pushed")
            #expect(after.head == before.head + 1, "one revision: the uploaded key")

            // The phone receives the tablet's key and keeps its own values.
            try await phone.engine.syncOnce()
            #expect(differences(try phone.entries(), after.entries).isEmpty)

            // From then on, last writer wins: the tablet's next change reaches the phone.
            let changed = try tablet.set("volume", .double(0.3))
            try await tablet.engine.syncOnce()
            try await phone.engine.syncOnce()
            #expect(sameEntry(try phone.defaults.syncEntry(forKey: "volume"), changed))
        }
    }

    @Test("a device joining an empty suite uploads every stored key, and no registered default", arguments: StorageBackend.allCases)
    func joiningAnEmptySuiteUploadsEverything(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.joining.empty"
            let device = try Device(suite, server: server, synced: false)
            defer { device.remove() }
            device.defaults.register(defaults: ["theme": "light"])
            var stored: [String: SyncEntry] = [:]
            for index in 0..<30 { stored["key\(index)"] = try device.set("key\(index)", .integer(index)) }
            try device.write("key0", nil)
            stored["key0"] = nil
            try device.enableSync(server)
            #expect(try await device.engine.syncOnce().isInAgreement)
            let onServer = try await server.snapshot(suite)
            #expect(differences(onServer.entries, stored).isEmpty)
            #expect(onServer.entries["theme"] == nil)

            // A second device joins with nothing: it gets everything.
            let other = try Device(suite, server: server)
            defer { other.remove() }
            try await other.engine.syncOnce()
            #expect(differences(try other.entries(), stored).isEmpty)
        }
    }

    @Test(
        "the tool's first sync after joining says the server's value replaced the newer local one on joining, not that a newer one did; conflicts keeps the local one"
    )
    func joiningSaysWhatReplacedWhat() async throws {
        try await SyncServer.with { server in
            try await withToolPair("group.joining.words") { phone, tablet in
                try await phone.configure(server)
                #expect(try await phone.defaultsTool(["write", phone.suite, "sound", "ring.caf"]).status == 0)
                #expect(try await phone.sync("sync").status == 0)
                // The tablet chose later, before sync was turned on.
                #expect(try await tablet.defaultsTool(["write", tablet.suite, "sound", "chime.caf"]).status == 0)
                try await tablet.configure(server)
                let joined = try await tablet.sync("sync")
                #expect(joined.status == 0, "\(joined.stderr)")
                #expect(joined.stdout.contains("1 local value replaced by the server's on joining"), "\(joined.stdout)")
                #expect(!joined.stdout.contains("newer"), "\(joined.stdout)")
                #expect(try tablet.open().string(forKey: "sound") == "ring.caf")
                let conflicts = try await tablet.sync("conflicts")
                #expect(conflicts.stdout.contains("sound = {\"string\":\"chime.caf\"}"), "\(conflicts.stdout)")

                // A newer write elsewhere is still called that.
                #expect(try await tablet.defaultsTool(["write", tablet.suite, "sound", "horn.aiff"]).status == 0)
                #expect(try await phone.defaultsTool(["write", phone.suite, "sound", "bell.aiff"]).status == 0)
                #expect(try await phone.sync("sync").status == 0)
                let replaced = try await tablet.sync("sync")
                #expect(replaced.stdout.contains("1 local value replaced by a newer one from device"), "\(replaced.stdout)")
            }
        }
    }
}
