import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// A key deleted on one device while the other is offline stays deleted when the other comes back:
/// while the server still keeps the tombstone, and after it purged it (the cursor then expires: 410,
/// and the device reads the snapshot again).
@Suite("Deletions are not resurrected", .timeLimit(.minutes(2)))
struct DeletionTests {
    /// Sets `keys` on `a` and brings `b` up to date.
    private func start(_ a: Device, _ b: Device, keys: [String]) async throws {
        for key in keys { try a.set(key, .string("first \(key)")) }
        try await a.engine.syncOnce()
        try await b.engine.syncOnce()
        #expect(try b.entries().count == keys.count)
    }

    /// Waits until this machine's clock is past `stamp` (at most a few milliseconds), so that the
    /// next write on another device is later by any clock.
    private func waitUntilPast(_ stamp: SyncEntry) async {
        _ = await eventually(within: .seconds(1), every: .milliseconds(1)) { HLC.wallClockMilliseconds() > stamp.hlc.milliseconds }
    }

    @Test(
        "a delete made while the other device is offline is not resurrected, not even by an older offline write",
        arguments: StorageBackend.allCases
    )
    func deleteWhileOffline(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.deletions"
            let a = try Device(suite, server: server)
            let b = try Device(suite, server: server)
            defer {
                a.remove()
                b.remove()
            }
            try await start(a, b, keys: ["sound", "volume", "draft", "theme"])

            // B is offline: it changes `draft` (before A deletes it) and `theme` (after).
            let olderDraft = try b.set("draft", .string("edited on B before the delete"))
            await waitUntilPast(olderDraft)
            let deletedSound = try #require(try a.write("sound", nil))
            let deletedDraft = try #require(try a.write("draft", nil))
            #expect(deletedDraft.stamp > olderDraft.stamp)
            try await a.engine.syncOnce()
            let newerTheme = try b.set("theme", .string("dark"))
            let head = try await server.snapshot(suite).head

            let report = try await b.engine.syncOnce()
            #expect(report.isInAgreement)
            #expect(b.defaults.value(forKey: "sound") == nil)
            #expect(b.defaults.value(forKey: "draft") == nil, "the older offline edit lost to the delete")
            #expect(sameEntry(try b.defaults.syncEntry(forKey: "sound"), deletedSound), "B keeps the tombstone")
            let onServer = try await server.snapshot(suite)
            #expect(onServer.entries["sound"] == nil && onServer.entries["draft"] == nil)
            #expect(sameEntry(onServer.entries["theme"], newerTheme))
            #expect(onServer.head == head + 1, "only B's newer change made a revision")

            try await a.engine.syncOnce()
            #expect(a.defaults.value(forKey: "sound") == nil && a.defaults.value(forKey: "draft") == nil)
            #expect(differences(try a.entries(), onServer.entries).isEmpty)
            #expect(differences(try b.entries(), onServer.entries).isEmpty)
        }
    }

    @Test(
        "after the server purged the tombstone (410), the returning device removes the key and pushes what it has pending",
        arguments: StorageBackend.allCases
    )
    func deleteAfterPurge(backend: StorageBackend) async throws {
        try await SyncServer.with(backend, tombstonesKept: .seconds(1), purgedEvery: .seconds(1)) { server in
            let suite = "group.deletions.purged"
            let a = try Device(suite, server: server)
            let b = try Device(suite, server: server)
            defer {
                a.remove()
                b.remove()
            }
            try await start(a, b, keys: ["sound", "volume", "theme"])
            let cursor = try #require(try b.defaults.syncState().cursor)

            // B is offline with a change of its own; A deletes `sound`.
            let tablet = try b.set("volume", .double(0.25))
            try a.write("sound", nil)
            try await a.engine.syncOnce()

            // Wait for the purge: B's cursor expires (410), as the server says itself.
            let client = server.client(suite)
            let expired = await eventually(within: .seconds(30), every: .milliseconds(100)) {
                do {
                    _ = try await client.changes(since: cursor)
                    return false
                } catch let error as SyncError {
                    return error.status == 410 && error.code == .cursorExpired
                } catch {
                    return false
                }
            }
            try #require(expired, "the server never purged the tombstone")
            #expect(try await server.snapshot(suite).entries["sound"] == nil)

            let report = try await b.engine.syncOnce()
            #expect(report.isInAgreement)
            #expect(report.pruned == 1, "B removed the key the server no longer has")
            #expect(b.defaults.value(forKey: "sound") == nil)
            #expect(sameEntry(try b.defaults.syncEntry(forKey: "volume"), tablet), "B's pending change survived the re-read")

            let onServer = try await server.snapshot(suite)
            #expect(onServer.entries["sound"] == nil, "B did not push the deleted key back")
            #expect(sameEntry(onServer.entries["volume"], tablet))
            #expect(onServer.entries["theme"] != nil)

            try await a.engine.syncOnce()
            #expect(differences(try a.entries(), onServer.entries).isEmpty)
            #expect(differences(try b.entries(), onServer.entries).isEmpty)
        }
    }
}
