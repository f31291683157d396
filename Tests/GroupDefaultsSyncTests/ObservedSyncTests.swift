import Foundation
import GroupDefaults
import GroupDefaultsSync
import TestSupport
import Testing

extension SharedDefaults.Keys {
    fileprivate static let chosenSound = Key<String>("sound", default: "default")
    fileprivate static let frame = Key<[Double]>("windowFrame", default: [0, 0, 800, 600], sync: .local)
}

/// What an app observing its settings sees of sync: another device's change arrives with that
/// device's id (and says when it replaced a local value), and a key declared `sync: .local` stays
/// on its device both ways.
@Suite("Observed settings through sync", .timeLimit(.minutes(2)))
struct ObservedSyncTests {
    @Test("another device's write arrives with its device id, a replaced local value as a conflict; .local keys stay home")
    func remoteChangesCarryTheirDevice() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.observed"
            let phone = try Device(suite, server: server)
            // The tablet's clock is behind: the phone's later write wins over the tablet's pending one.
            let tablet = try Device(suite, server: server, clockOffset: .seconds(-2))
            defer {
                phone.remove()
                tablet.remove()
            }

            // The tablet uses the local key before it syncs: its name becomes local-only there.
            tablet.defaults[.frame] = [1, 2, 3, 4]
            tablet.defaults[.chosenSound] = "tablet.caf"  // pending, not yet pushed
            var updates = tablet.defaults.changes(for: .chosenSound).makeAsyncIterator()
            #expect(try #require(await updates.next()).value == "tablet.caf")

            phone.defaults[.chosenSound] = "phone.caf"
            phone.defaults[.frame] = [9, 9, 9, 9]  // local on the phone too: never pushed
            _ = try await phone.engine.syncOnce()
            let onServer = try await server.snapshot(suite).entries
            #expect(onServer["sound"]?.value == .string("phone.caf"))
            #expect(onServer["windowFrame"] == nil, "a .local key was pushed")

            _ = try await tablet.engine.syncOnce()
            let remote = try #require(await updates.next())
            #expect(remote.value == "phone.caf")
            #expect(remote.source == .anotherDevice(deviceID: phone.defaults.origin))
            #expect(remote.isConflict, "the tablet's pending value was replaced: it is in the journal")
            #expect(try tablet.defaults.conflicts().contains { $0.key == "sound" })

            // A value for the tablet's local key from a device that never declared it (an older app)
            // is not applied there.
            let laptop = try Device(suite, server: server)
            defer { laptop.remove() }
            try laptop.set("windowFrame", .string("not a frame"))
            _ = try await laptop.engine.syncOnce()
            #expect(try await server.snapshot(suite).entries["windowFrame"] != nil)
            _ = try await tablet.engine.syncOnce()
            #expect(tablet.defaults[.frame] == [1, 2, 3, 4])
        }
    }
}
