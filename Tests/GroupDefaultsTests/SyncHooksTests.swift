import Foundation
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaults

// The core's hooks for sync: pending marks, applyRemote, cursor, in-flight batch, HLC receive rule,
// wire types, origin per file.

private let serverURL = "https://sync.example.com"

/// A stamp from another device, `offset` milliseconds from now.
private func remoteStamp(_ offset: Int64 = 0, counter: UInt16 = 0, origin: UInt64 = 0xD0D0) -> (HLC, UInt64) {
    let now = Int64(HLC.wallClockMilliseconds())
    return (HLC(milliseconds: UInt64(now + offset), counter: counter), origin)
}

private func entry(_ key: String, _ value: PropertyListValue?, offset: Int64 = 0, counter: UInt16 = 0, origin: UInt64 = 0xD0D0) -> SyncEntry {
    let (hlc, origin) = remoteStamp(offset, counter: counter, origin: origin)
    return SyncEntry(key: key, value: value, hlc: hlc, origin: origin)
}

@Suite("Sync hooks: pending marks, applying remote entries, the cursor")
struct SyncHooksTests {
    @Test("an unsynced suite records no pending marks; a synced one records each local change with its stamp")
    func pendingMarks() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("a", forKey: "before")
            #expect(try defaults.syncState() == SyncState(server: nil, cursor: nil, inFlight: nil))

            try defaults.enableSync(server: serverURL)
            #expect(try defaults.syncState().server == serverURL)
            #expect(try defaults.pendingChanges().isEmpty, "values stored before sync was configured are not marked")

            defaults.set("ring.caf", forKey: "sound")
            defaults.set(3, forKey: "badge")
            defaults.removeObject(forKey: "before")
            try defaults.update("unread") { _ in .integer(1) }
            try defaults.write { tx in
                try tx.set(.bool(true), forKey: "flag")
                try tx.removeValue(forKey: "missing")  // removing nothing marks nothing
            }
            let pending = try defaults.pendingChanges()
            #expect(pending.map(\.key) == ["sound", "badge", "before", "unread", "flag"], "in stamp order")
            #expect(pending.map(\.value) == [.string("ring.caf"), .integer(3), nil, .integer(1), .bool(true)])
            for change in pending {
                #expect(try defaults.syncEntry(forKey: change.key)?.stamp == change.stamp, "\(change.key): the mark carries the change's stamp")
                #expect(change.stamp.origin == defaults.origin)
            }
            #expect(try defaults.pendingCount() == 5)

            // A second change to a key moves its mark to the new stamp (one mark per key).
            defaults.set("bell.aiff", forKey: "sound")
            let marks = try defaults.pendingChanges()
            #expect(marks.count == 5 && marks.last?.key == "sound" && marks.last?.value == .string("bell.aiff"))
        }
    }

    @Test("removeAll in a synced suite marks every removed key; registered defaults are never pending")
    func removeAllAndRegistered() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.enableSync(server: serverURL)
            defaults.register(defaults: ["volume": 0.8, "sound": "default.caf"])
            #expect(try defaults.pendingChanges().isEmpty)
            defaults.set("x", forKey: "a")
            defaults.set("y", forKey: "b")
            try defaults.clearPending(try defaults.pendingChanges().map { ($0.key, $0.stamp) })
            #expect(try defaults.pendingChanges().isEmpty)
            try defaults.write { try $0.removeAll() }
            let pending = try defaults.pendingChanges()
            #expect(Set(pending.map(\.key)) == ["a", "b"] && pending.allSatisfy { $0.value == nil })
            #expect(defaults.double(forKey: "volume") == 0.8, "registered defaults still read")
        }
    }

    @Test("writes by other processes of a synced suite are marked pending in their own transactions")
    func otherProcessesMark() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try openSuite(dir, "shared")
            try defaults.enableSync(server: serverURL)
            let set = try await HelperProcess.run("set", directory: dir, suite: "shared", ["sound", "ring.caf"])
            #expect(set.status == 0, "\(set.stderr)")
            let increments = try await HelperProcess.run("increment", directory: dir, suite: "shared", ["unread", "5"])
            #expect(increments.status == 0, "\(increments.stderr)")
            let pending = try defaults.pendingChanges()
            #expect(pending.map(\.key) == ["sound", "unread"])
            #expect(pending.map(\.value) == [.string("ring.caf"), .integer(5)])
            #expect(pending.allSatisfy { $0.stamp.origin == defaults.origin }, "every process of the store writes under its origin")
        }
    }

    @Test("clearPending clears a mark only if the key was not changed again after it was pushed")
    func clearOnlyUnchanged() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.enableSync(server: serverURL)
            defaults.set("ring.caf", forKey: "sound")
            defaults.set(1, forKey: "badge")
            let pushed = try defaults.pendingChanges()
            try defaults.setInFlightBatch(InFlightBatch(id: "b-1", body: Array("{\"ops\":[]}".utf8)))
            #expect(try defaults.syncState().inFlight == InFlightBatch(id: "b-1", body: Array("{\"ops\":[]}".utf8)))

            defaults.set(2, forKey: "badge")  // changed while the push was in flight
            let cleared = try defaults.clearPending(pushed.map { ($0.key, $0.stamp) })
            #expect(cleared == 1)
            let left = try defaults.pendingChanges()
            #expect(left.map(\.key) == ["badge"] && left.first?.value == .integer(2))
            #expect(try defaults.syncState().inFlight == nil, "an acknowledged push drops the in-flight batch")
        }
    }

    @Test("applyRemote: the larger (HLC, origin) wins against the stored value and the tombstone")
    func lastWriterWins() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.enableSync(server: serverURL)
            defaults.set("local", forKey: "newer-here")
            defaults.set("local", forKey: "older-here")
            defaults.set("local", forKey: "removed-here")
            defaults.removeObject(forKey: "removed-here")
            let localStamp = try #require(try defaults.syncEntry(forKey: "newer-here")).stamp

            let result = try defaults.applyRemote(
                [
                    entry("newer-here", .string("remote"), offset: -60_000),  // older than the local write
                    entry("older-here", .string("remote"), offset: 1_000),
                    entry("removed-here", .string("remote"), offset: -60_000),  // older than the tombstone
                    entry("new", .integer(7)),
                ],
                cursor: 12
            )
            #expect(Set(result.applied) == ["older-here", "new"])
            #expect(Set(result.superseded) == ["newer-here", "removed-here"])
            #expect(defaults.string(forKey: "newer-here") == "local")
            #expect(defaults.string(forKey: "older-here") == "remote")
            #expect(defaults.object(forKey: "removed-here") == nil, "a newer local deletion beats an older remote value")
            #expect(defaults.integer(forKey: "new") == 7)
            #expect(try defaults.syncState().cursor == 12)
            #expect(try defaults.syncEntry(forKey: "newer-here")?.stamp == localStamp)

            // Applied entries keep their own stamps and are not pending; a beaten pending change is dropped.
            #expect(try defaults.syncEntry(forKey: "older-here")?.origin == 0xD0D0)
            #expect(Set(try defaults.pendingChanges().map(\.key)) == ["newer-here", "removed-here"])

            // Ties in HLC are broken by origin, as unsigned numbers.
            let tie = try #require(try defaults.syncEntry(forKey: "older-here"))
            try defaults.applyRemote([SyncEntry(key: "older-here", value: .string("smaller origin"), hlc: tie.hlc, origin: 0xD0CF)], cursor: nil)
            #expect(defaults.string(forKey: "older-here") == "remote")
            try defaults.applyRemote([SyncEntry(key: "older-here", value: .string("larger origin"), hlc: tie.hlc, origin: UInt64.max)], cursor: nil)
            #expect(defaults.string(forKey: "older-here") == "larger origin")
            #expect(try defaults.syncState().cursor == 12, "no cursor given: unchanged")
        }
    }

    @Test("a remote deletion removes the value and leaves a tombstone, even for a key this store never had")
    func remoteDeletions() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("draft text", forKey: "draft")
            try defaults.applyRemote([entry("draft", nil, offset: 1_000), entry("never-here", nil)], cursor: 3)
            #expect(defaults.object(forKey: "draft") == nil)
            #expect(try defaults.syncEntry(forKey: "draft")?.isDeleted == true)
            let tombstone = try #require(try defaults.syncEntry(forKey: "never-here"))
            #expect(tombstone.isDeleted && tombstone.origin == 0xD0D0)
            // The tombstone orders a later, older remote write of the key: it stays deleted.
            try defaults.applyRemote([entry("never-here", .string("stale"), offset: -10_000)], cursor: 4)
            #expect(defaults.object(forKey: "never-here") == nil)
            // A local set after the removal replaces the tombstone.
            defaults.set("again", forKey: "draft")
            #expect(try defaults.syncEntry(forKey: "draft")?.value == .string("again"))
        }
    }

    @Test("remote changes are logged: observers see them as remote, with the writer's origin")
    func observersSeeRemote() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            var iterator = defaults.changes().makeAsyncIterator()
            defaults.set("mine", forKey: "local")
            try defaults.applyRemote([entry("sound", .string("bell.aiff")), entry("gone", nil)], cursor: 1)
            let local = try #require(await iterator.next())
            let remote = try #require(await iterator.next())
            #expect(!local.isRemote && local.origin == defaults.origin)
            #expect(remote.isRemote && remote.key == "sound" && remote.origin == 0xD0D0 && remote.value == .string("bell.aiff"))
            #expect(remote.hlc > local.hlc, "the log's clock only grows")
            // Another process reads the applied value at once.
            let get = try await HelperProcess.run("get", directory: dir, suite: "group.com.example.test", ["sound"])
            #expect(get.stdout == "bell.aiff")
        }
    }

    @Test("the local clock moves past a remote HLC, so the next local write wins over what was pulled")
    func clockMovesPastRemote() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            // A device whose clock is 4 minutes ahead: accepted, and local writes order after it.
            let ahead = entry("sound", .string("ahead"), offset: 4 * 60_000, counter: 9)
            try defaults.applyRemote([ahead], cursor: 1)
            defaults.set("mine", forKey: "sound")
            let mine = try #require(try defaults.syncEntry(forKey: "sound"))
            #expect(mine.value == .string("mine"))
            #expect(mine.hlc > ahead.hlc)
        }
    }

    @Test("a remote HLC more than 5 minutes ahead is refused on its own and journaled once; the rest is applied and the cursor moves")
    func clockSkewRefused() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            let future = entry("future", .integer(2), offset: 6 * 60_000)
            let result = try defaults.applyRemote([entry("fine", .integer(1)), future], cursor: 9)
            #expect(result.applied == ["fine"])
            #expect(result.refused.map(\.key) == ["future"])
            #expect(result.refused.first?.reason.contains("ahead of this machine's clock") == true)
            #expect(defaults.integer(forKey: "fine") == 1)
            #expect(defaults.object(forKey: "future") == nil)
            #expect(try defaults.syncState().cursor == 9)
            #expect(try defaults.clockReading().milliseconds < HLC.wallClockMilliseconds() + 60_000, "the store's clock did not follow it")
            // The same entry again (a snapshot read twice) is not journaled twice.
            let again = try defaults.applyRemote([future], cursor: 10)
            #expect(again.refused.isEmpty)
            #expect(try defaults.conflicts().filter(\.isRefused).map(\.key) == ["future"])
        }
    }

    @Test(
        "the joining rule keeps the server's value over what the store held before the join, whatever the stamps; not over a change made during the join"
    )
    func joiningPolicy() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.enableSync(server: serverURL)
            defaults.set("joining device's", forKey: "sound")
            let joinStarted = try defaults.clockReading()
            defaults.set("changed while joining", forKey: "volume")
            try defaults.applyRemote(
                [entry("sound", .string("server's"), offset: -3_600_000), entry("volume", .string("server's"), offset: -3_600_000)],
                cursor: 5,
                policy: .joining(JoiningRule(configuredAt: joinStarted))
            )
            #expect(defaults.string(forKey: "sound") == "server's")
            #expect(defaults.string(forKey: "volume") == "changed while joining")
            #expect(try defaults.pendingChanges().map(\.key) == ["volume"])
        }
    }

    @Test("pruning after an expired cursor removes clean keys the server lacks, keeps pending ones")
    func pruning() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.applyRemote([entry("kept", .integer(1)), entry("gone-on-server", .integer(2))], cursor: 2)
            try defaults.enableSync(server: serverURL)
            defaults.set("unpushed", forKey: "local-edit")
            let result = try defaults.applyRemote([entry("kept", .integer(1), counter: 1)], cursor: 40, pruning: true)
            #expect(result.pruned == ["gone-on-server"])
            #expect(defaults.object(forKey: "gone-on-server") == nil)
            #expect(try defaults.syncEntry(forKey: "gone-on-server") == nil, "no tombstone: the server has none")
            #expect(defaults.string(forKey: "local-edit") == "unpushed")
            #expect(try defaults.pendingChanges().map(\.key) == ["local-edit"])
            #expect(try defaults.syncState().cursor == 40)
        }
    }

    @Test("markPending marks what keys hold now, for uploading keys the server lacks")
    func markExisting() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("a", forKey: "one")
            defaults.set("b", forKey: "two")
            defaults.removeObject(forKey: "two")
            try defaults.enableSync(server: serverURL)
            #expect(try defaults.markPending(["one", "two", "never"]) == 2)
            let pending = try defaults.pendingChanges()
            #expect(pending.map(\.key) == ["one", "two"] && pending.map(\.value) == [.string("a"), nil])
        }
    }

    @Test("disableSync forgets the server, cursor, in-flight batch and marks; later writes are not marked")
    func disable() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.enableSync(server: serverURL)
            defaults.set("x", forKey: "k")
            try defaults.setSyncCursor(7)
            try defaults.setInFlightBatch(InFlightBatch(id: "id", body: [1, 2, 3]))
            try defaults.disableSync()
            #expect(try defaults.syncState() == SyncState(server: nil, cursor: nil, inFlight: nil))
            defaults.set("y", forKey: "k")
            #expect(try defaults.pendingChanges().isEmpty)
        }
    }

    @Test("a store copied to another file takes a new origin at its first write; moving keeps it")
    func originPerFile() throws {
        try withTemporaryDirectory { dir in
            let original = try openSuite(dir, "phone")
            original.set("x", forKey: "k")
            let origin = original.origin
            // A copy (as `cp` makes it), opened as another suite.
            let copyURL = dir.appendingPathComponent("tablet.lmdb")
            try Data(contentsOf: original.fileURL).write(to: copyURL)
            let copy = try openSuite(dir, "tablet")
            #expect(copy.string(forKey: "k") == "x")
            copy.set("y", forKey: "k")
            #expect(copy.origin != origin && copy.origin != 0)
            #expect(try copy.syncEntry(forKey: "k")?.origin == copy.origin)
            #expect(original.origin == origin)

            // A backup opened and written as a suite is a copy too.
            let backupURL = dir.appendingPathComponent("backup.lmdb")
            try original.backup(to: backupURL)
            let backup = try openSuite(dir, "backup")
            backup.set("z", forKey: "k")
            #expect(backup.origin != origin)

            // Moving the file keeps its origin (same inode).
            let moved = try openSuite(dir, "mover")
            moved.set("m", forKey: "k")
            let movedOrigin = moved.origin
            let movedPath = moved.fileURL.path
            _ = consume moved
            #expect(rename(movedPath, dir.appendingPathComponent("moved.lmdb").path) == 0)
            let reopened = try openSuite(dir, "moved")
            reopened.set("n", forKey: "k")
            #expect(reopened.origin == movedOrigin)
        }
    }

    @Test("the async write, read and update run off the cooperative pool and return their results")
    func asyncOverloads() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            let onDispatchThread = try await defaults.write { tx -> Bool in
                try tx.set(.integer(1), forKey: "n")
                return BlockingWork.isCurrent
            }
            #expect(onDispatchThread)
            let new = try await defaults.update("n") { old in .integer((old?.intValue ?? 0) + 41) }
            #expect(new == .integer(42))
            let read = try await defaults.read { tx in try tx.value(forKey: "n") }
            #expect(read == .integer(42))
            // Many at once: none lost, none blocking the pool.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<50 { group.addTask { _ = try await defaults.update("n") { .integer(($0?.intValue ?? 0) + 1) } } }
                try await group.waitForAll()
            }
            #expect(defaults.integer(forKey: "n") == 92)
        }
    }
}

@Suite("HLC receive rule")
struct HLCTests {
    let wall: UInt64 = 1_795_255_200_000

    @Test("the wall clock wins when it is ahead of both")
    func wallAhead() throws {
        let local = HLC(milliseconds: wall - 10, counter: 5)
        #expect(try local.received(HLC(milliseconds: wall - 5, counter: 7), wallClock: wall) == HLC(milliseconds: wall, counter: 0))
    }

    @Test("a clock that went backwards: the later HLC ticks on")
    func clockBackwards() throws {
        let local = HLC(milliseconds: wall + 1_000, counter: 3)
        #expect(try local.received(HLC(milliseconds: wall - 50, counter: 0), wallClock: wall) == HLC(milliseconds: wall + 1_000, counter: 4))
        let remote = HLC(milliseconds: wall + 2_000, counter: 8)
        #expect(try local.received(remote, wallClock: wall) == HLC(milliseconds: wall + 2_000, counter: 9))
    }

    @Test("a counter overflow carries into the milliseconds")
    func counterCarry() throws {
        let remote = HLC(milliseconds: wall + 10, counter: .max)
        #expect(try HLC.zero.received(remote, wallClock: wall) == HLC(milliseconds: wall + 11, counter: 0))
        #expect(HLC(milliseconds: wall + 10, counter: .max).advanced(toWallClock: wall) == HLC(milliseconds: wall + 11, counter: 0))
    }

    @Test("a remote HLC more than 5 minutes ahead is refused; exactly 5 minutes is accepted")
    func farFuture() throws {
        #expect(throws: ClockSkew.self) { try HLC.zero.received(HLC(milliseconds: wall + HLC.maximumDrift + 1, counter: 0), wallClock: wall) }
        let edge = HLC(milliseconds: wall + HLC.maximumDrift, counter: 0)
        #expect(try HLC.zero.received(edge, wallClock: wall) == HLC(rawValue: edge.rawValue + 1))
    }

    @Test("equal HLCs: one tick after")
    func equal() throws {
        let same = HLC(milliseconds: wall, counter: 2)
        #expect(try same.received(same, wallClock: wall) == HLC(milliseconds: wall, counter: 3))
    }
}

@Suite("Sync wire types")
struct WireTypesTests {
    private func roundTrip<T: Codable & Equatable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = try encoder.encode(value)
        #expect(try JSONDecoder().decode(T.self, from: data) == value)
        return String(decoding: data, as: UTF8.self)
    }

    @Test("entries: typed JSON values, deletions as deleted: true, HLC and origin as decimal strings")
    func entries() throws {
        let value = SyncEntry(key: "sound", value: .string("ring.caf"), hlc: HLC(rawValue: 117_655_898_112_000_001), origin: UInt64.max, rev: 42)
        #expect(
            try roundTrip(value)
                == #"{"hlc":"117655898112000001","key":"sound","origin":"18446744073709551615","rev":42,"value":{"string":"ring.caf"}}"#
        )
        let deletion = SyncEntry(key: "draft", value: nil, hlc: HLC(rawValue: 5), origin: 7)
        #expect(try roundTrip(deletion) == #"{"deleted":true,"hlc":"5","key":"draft","origin":"7"}"#)
    }

    @Test("a push request and its response in the protocol's field names")
    func push() throws {
        let request = PushRequest(
            deviceID: 99,
            batchID: "b-1",
            ops: [
                PushOp(key: "sound", value: .string("ring.caf"), hlc: HLC(rawValue: 10)),
                PushOp(key: "draft", value: nil, hlc: HLC(rawValue: 11)),
            ]
        )
        #expect(
            try roundTrip(request)
                == #"{"batch_id":"b-1","device_id":"99","ops":[{"hlc":"10","key":"sound","value":{"string":"ring.caf"}},{"deleted":true,"hlc":"11","key":"draft"}]}"#
        )
        let response = PushResponse(
            headRev: 3,
            results: [
                PushResult(
                    key: "sound",
                    status: .applied,
                    winner: SyncEntry(key: "sound", value: .string("ring.caf"), hlc: HLC(rawValue: 10), origin: 99, rev: 3)
                )
            ],
            serverTime: "2026-11-22T10:00:00.000Z"
        )
        #expect(try roundTrip(response).contains(#""head_rev":3"#))
        #expect(try roundTrip(ChangesPage(entries: [], lastRev: 9, hasMore: false)) == #"{"entries":[],"has_more":false,"last_rev":9}"#)
        #expect(try roundTrip(SnapshotPage(entries: [], headRev: 0, next: nil)) == #"{"entries":[],"head_rev":0,"next":null}"#)
        #expect(try roundTrip(SyncLimits()).contains(#""max_key_bytes":511"#))
        #expect(try roundTrip(SyncErrorBody(error: .keyTooLong, detail: "…", key: "k", limit: 511)).contains(#""error":"key_too_long""#))
        #expect(
            try roundTrip(SuiteList(suites: [.init(name: "group.a", headRev: 2, keys: 1)]))
                == #"{"suites":[{"head_rev":2,"keys":1,"name":"group.a"}]}"#
        )
    }

    @Test("malformed entries are decoding errors: both value and deleted, neither, a non-decimal origin or HLC")
    func malformed() throws {
        for text in [
            #"{"key":"k","value":{"integer":1},"deleted":true,"hlc":"1","origin":"1"}"#,
            #"{"key":"k","hlc":"1","origin":"1"}"#,
            #"{"key":"k","value":{"integer":1},"hlc":"1","origin":"-1"}"#,
            #"{"key":"k","value":{"integer":1},"hlc":1,"origin":"1"}"#,
            #"{"key":"k","value":{"integer":1},"hlc":"x","origin":"1"}"#,
        ] {
            #expect(throws: DecodingError.self, "\(text)") { try JSONDecoder().decode(SyncEntry.self, from: Data(text.utf8)) }
        }
    }
}
