import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `SyncStore` (pushes, reads, waits, the purge, key history and sealed entries), over every backend.
    @Suite("SyncStore")
    struct SyncStoreConformance: StorageConformance {
        @Test("push, changes, snapshot and suites round-trip every kind of value", arguments: StorageBackend.allCases)
        func roundTrip(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let values: [(String, PropertyListValue)] = [
                    ("sound", .string("ring.caf")), ("volume", .double(0.5)), ("count", .integer(-3)), ("on", .bool(true)),
                    ("when", .date(Date(timeIntervalSince1970: 1_700_000_000.25))), ("blob", .data(Data([0, 1, 255]))),
                    ("list", .array([.string("a"), .integer(1)])), ("map", .dictionary(["k": .string("v"), "n": .integer(2)])),
                ]
                let response = try await push(storage, device: 7, values.enumerated().map { op($1.0, $1.1, hlc: 100 + UInt64($0)) })
                #expect(response.headRev == UInt64(values.count))
                #expect(response.serverTime == Self.now)
                #expect(response.results.map(\.status) == Array(repeating: .applied, count: values.count))
                #expect(response.results.map(\.winner?.rev) == (1...values.count).map { UInt64($0) })
                #expect(response.results.allSatisfy { $0.winner?.origin == 7 })

                let changes = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 100).page()
                #expect(changes.entries.map(\.key) == values.map(\.0))
                #expect(changes.entries.map(\.value) == values.map(\.1))
                #expect(changes.entries.map(\.rev) == (1...values.count).map { UInt64($0) })
                #expect(changes.entries.map(\.hlc.rawValue) == (0..<values.count).map { 100 + UInt64($0) })
                #expect(changes.lastRev == UInt64(values.count))
                #expect(!changes.hasMore)

                let snapshot = try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 100).page()
                #expect(snapshot.entries.map(\.key) == values.map(\.0).sorted())
                #expect(
                    Dictionary(uniqueKeysWithValues: snapshot.entries.map { ($0.key, $0.value) })
                        == Dictionary(uniqueKeysWithValues: values.map { ($0.0, Optional($0.1)) })
                )
                #expect(snapshot.headRev == UInt64(values.count))
                #expect(snapshot.next == nil)

                #expect(try await storage.headRevision(account: "alice", suite: "s") == UInt64(values.count))
                #expect(
                    try await storage.suites(account: "alice").suites
                        == [SuiteList.Suite(name: "s", headRev: UInt64(values.count), keys: values.count)]
                )
            }
        }

        @Test("last writer wins by (HLC, origin); stamps over the full unsigned range survive storage", arguments: StorageBackend.allCases)
        func lastWriterWins(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await push(storage, device: 5, [op("k", .string("five"), hlc: 100)])
                let lowerOrigin = try await push(storage, device: 4, [op("k", .string("four"), hlc: 100)])
                #expect(lowerOrigin.results.first?.status == .superseded)
                #expect(lowerOrigin.results.first?.winner?.value == .string("five"))
                #expect(lowerOrigin.results.first?.winner?.origin == 5)
                #expect(lowerOrigin.headRev == 1)
                let olderClock = try await push(storage, device: .max, [op("k", .string("old"), hlc: 99)])
                #expect(olderClock.results.first?.status == .superseded)
                let higherOrigin = try await push(storage, device: 6, [op("k", .string("six"), hlc: 100)])
                #expect(higherOrigin.results.first?.status == .applied)
                #expect(higherOrigin.headRev == 2)

                // Stamps above 2^63 survive storage exactly. Held, a stamp millennia ahead of the
                // server's clock is one from a wrong clock: any op replaces it (`PushStep`); their
                // unsigned order is `SyncMerge`'s, tested on its own.
                let high: UInt64 = (1 << 63) + 5
                try await push(storage, device: .max, [op("big", .integer(1), hlc: high)])
                let below = try await push(storage, device: .max, [op("big", .integer(2), hlc: (1 << 63) - 1)])
                #expect(below.results.first?.status == .applied)
                let above = try await push(storage, device: 1, [op("big", .integer(3), hlc: .max)])
                #expect(above.results.first?.status == .applied)
                let entries = try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 10).page().entries
                #expect(entries.first { $0.key == "big" }?.hlc == HLC(rawValue: .max))
                #expect(entries.first { $0.key == "k" }?.value == .string("six"))
                #expect(entries.first { $0.key == "k" }?.origin == 6)
            }
        }

        @Test("deletions are tombstones that take part in the same order", arguments: StorageBackend.allCases)
        func deletions(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await push(storage, [op("k", .string("v"), hlc: 10), op("other", .integer(1), hlc: 10)])
                let deletion = try await push(storage, [op("k", nil, hlc: 20)])
                #expect(deletion.results.first?.status == .applied)
                #expect(deletion.results.first?.winner?.isDeleted == true)
                #expect(deletion.headRev == 3)

                let late = try await push(storage, device: 9, [op("k", .string("late"), hlc: 15)])
                #expect(late.results.first?.status == .superseded)
                #expect(late.results.first?.winner?.isDeleted == true)

                let changes = try await storage.changes(account: "alice", suite: "s", since: 1, limit: 10).page()
                #expect(changes.entries.map(\.key) == ["other", "k"])
                #expect(changes.entries.last?.isDeleted == true)
                #expect(changes.entries.last?.rev == 3)
                let snapshot = try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 10).page()
                #expect(snapshot.entries.map(\.key) == ["k", "other"])
                #expect(snapshot.entries.first?.isDeleted == true)
                #expect(try await storage.suites(account: "alice").suites.first?.keys == 1)

                let rewrite = try await push(storage, [op("k", .string("again"), hlc: 30)])
                #expect(rewrite.results.first?.status == .applied)
                #expect(try await storage.suites(account: "alice").suites.first?.keys == 2)
            }
        }

        @Test(
            "each applied op gets one revision, in order; superseded ops get none; changes shows each key's latest",
            arguments: StorageBackend.allCases
        )
        func revisions(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let first = try await push(
                    storage,
                    [
                        op("a", .integer(1), hlc: 10), op("b", .integer(1), hlc: 10), op("a", .integer(2), hlc: 11),
                        op("b", .integer(0), hlc: 9),
                    ]
                )
                #expect(first.results.map(\.status) == [.applied, .applied, .applied, .superseded])
                #expect(first.headRev == 3)
                #expect(first.results.first?.winner?.value == .integer(2))
                #expect(first.results.first?.winner?.rev == 3)

                let second = try await push(storage, [op("c", .integer(1), hlc: 12), op("a", .integer(0), hlc: 1)])
                #expect(second.results.map(\.status) == [.applied, .superseded])
                #expect(second.headRev == 4)

                let changes = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 10).page()
                #expect(changes.entries.map(\.key) == ["b", "a", "c"])
                #expect(changes.entries.map(\.rev) == [2, 3, 4])
                #expect(changes.lastRev == 4)

                let page = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 2).page()
                #expect(page.entries.map(\.key) == ["b", "a"])
                #expect(page.hasMore)
                #expect(page.lastRev == 3)
                let rest = try await storage.changes(account: "alice", suite: "s", since: page.lastRev, limit: 2).page()
                #expect(rest.entries.map(\.key) == ["c"])
                #expect(!rest.hasMore)
                let none = try await storage.changes(account: "alice", suite: "s", since: 4, limit: 2).page()
                #expect(none.entries.isEmpty)
                #expect(none.lastRev == 4)
            }
        }

        @Test("concurrent pushes to one suite get distinct, gapless revisions and lose nothing", arguments: StorageBackend.allCases)
        func concurrentPushes(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let clients = 8
                let opsEach = 5
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for client in 0..<clients {
                        group.addTask {
                            try await push(
                                storage,
                                device: UInt64(client + 1),
                                (0..<opsEach).map { op("c\(client)-\($0)", .integer($0), hlc: 10) }
                            )
                        }
                    }
                    try await group.waitForAll()
                }
                let total = clients * opsEach
                #expect(try await storage.headRevision(account: "alice", suite: "s") == UInt64(total))
                let changes = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 1000).page()
                #expect(changes.entries.map(\.rev) == (1...total).map { UInt64($0) })
                // Each push's ops are contiguous: one push commits at a time.
                for client in 0..<clients {
                    let revs = changes.entries.filter { $0.key.hasPrefix("c\(client)-") }.compactMap(\.rev)
                    #expect(revs == Array(revs.first!..<(revs.first! + UInt64(opsEach))))
                }
                #expect(try await storage.suites(account: "alice").suites.first?.keys == total)
            }
        }

        @Test(
            "a retried batch returns the stored response and changes nothing; other ops under its id are refused",
            arguments: StorageBackend.allCases
        )
        func idempotency(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let ops = [op("a", .integer(1), hlc: 10)]
                let first = try await push(storage, device: 3, batch: "batch-1", ops)
                try await push(storage, device: 4, [op("b", .integer(1), hlc: 11)])
                let retry = try await storage.push(
                    account: "alice",
                    suite: "s",
                    request: PushRequest(deviceID: 3, batchID: "batch-1", ops: ops),
                    quota: Self.roomy,
                    serverTime: "later"
                )
                #expect(retry == first)
                #expect(try await storage.headRevision(account: "alice", suite: "s") == 2)

                await expectStorageError(.idempotencyMismatch) {
                    try await push(storage, device: 3, batch: "batch-1", [op("a", .integer(2), hlc: 12)])
                }
                #expect(try await storage.headRevision(account: "alice", suite: "s") == 2)

                // The id is scoped to the device (and the suite, and the account).
                let otherDevice = try await push(storage, device: 5, batch: "batch-1", [op("c", .integer(1), hlc: 13)])
                #expect(otherDevice.headRev == 3)
                let otherSuite = try await push(storage, suite: "t", device: 3, batch: "batch-1", [op("a", .integer(9), hlc: 10)])
                #expect(otherSuite.headRev == 1)
            }
        }

        @Test("a push over a quota throws quotaExceeded and changes nothing", arguments: StorageBackend.allCases)
        func quotas(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let twoKeys = SuiteQuota(maxKeys: 2, maxBytes: 1 << 20)
                try await push(storage, quota: twoKeys, [op("a", .integer(1), hlc: 10)])
                do {
                    try await push(storage, quota: twoKeys, [op("b", .integer(1), hlc: 11), op("c", .integer(1), hlc: 12)])
                    Issue.record("a third key was accepted")
                } catch let error as SyncStorageError {
                    #expect(error.code == .quotaExceeded)
                    #expect(error.limit == 2)
                }
                #expect(try await storage.headRevision(account: "alice", suite: "s") == 1)
                #expect(try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 10).page().entries.map(\.key) == ["a"])

                // Deleting one makes room: tombstones do not count.
                try await push(storage, quota: twoKeys, [op("a", nil, hlc: 20), op("b", .integer(1), hlc: 21), op("c", .integer(1), hlc: 22)])
                #expect(try await storage.suites(account: "alice").suites.first?.keys == 2)

                // Bytes: key UTF-8 plus the value's typed JSON.
                let bytes = SyncLimits.quotaBytes(key: "x", valueJSONByteCount: try PropertyListValue.string("0123456789").typedJSON().count)
                let tight = SuiteQuota(maxKeys: 100, maxBytes: bytes)
                try await push(storage, suite: "bytes", quota: tight, [op("x", .string("0123456789"), hlc: 10)])
                do {
                    try await push(storage, suite: "bytes", quota: tight, [op("x", .string("01234567890"), hlc: 11)])
                    Issue.record("a value over the byte quota was accepted")
                } catch let error as SyncStorageError {
                    #expect(error.code == .quotaExceeded)
                    #expect(error.limit == bytes)
                }
                let kept = try await storage.snapshot(account: "alice", suite: "bytes", after: nil, limit: 10).page()
                #expect(kept.entries.map(\.value) == [.string("0123456789")])
                #expect(kept.headRev == 1)
                // Replacing with a value of the same size fits.
                try await push(storage, suite: "bytes", quota: tight, [op("x", .string("abcdefghij"), hlc: 12)])
            }
        }

        @Test("a suite over a lowered quota may shrink (or stay) but not grow, on each count", arguments: StorageBackend.allCases)
        func loweredQuota(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await push(
                    storage,
                    [
                        op("a", .string("12345"), hlc: 10), op("b", .string("12345"), hlc: 11),
                        op("c", .string("12345"), hlc: 12),
                    ]
                )
                let held = try await storage.suites(account: "alice").suites[0]
                #expect(held.keys == 3)
                // Two keys allowed now: a new key is refused, replacing a value keeps the count and is accepted,
                // a deletion shrinks the suite and is accepted.
                let twoKeys = SuiteQuota(maxKeys: 2, maxBytes: 1 << 20)
                await expectStorageError(.quotaExceeded) { try await push(storage, quota: twoKeys, [op("d", .integer(1), hlc: 13)]) }
                try await push(storage, quota: twoKeys, [op("a", .string("67890"), hlc: 14)])
                try await push(storage, quota: twoKeys, [op("b", nil, hlc: 15)])
                await expectStorageError(.quotaExceeded) { try await push(storage, quota: twoKeys, [op("b", .integer(1), hlc: 16)]) }

                // Bytes: a suite of two keys, each "x" + 17 bytes of typed JSON, under a quota of 30 bytes.
                let bytes = SyncLimits.quotaBytes(key: "a", valueJSONByteCount: try PropertyListValue.string("12345").typedJSON().count)
                let tight = SuiteQuota(maxKeys: 100, maxBytes: bytes + 1)
                await expectStorageError(.quotaExceeded) { try await push(storage, quota: tight, [op("a", .string("123456"), hlc: 17)]) }
                try await push(storage, quota: tight, [op("a", .string("1234"), hlc: 18)])  // smaller: accepted
                try await push(storage, quota: tight, [op("c", .string("abcd"), hlc: 19)])  // smaller again
                await expectStorageError(.quotaExceeded) { try await push(storage, quota: tight, [op("c", .string("abcdef"), hlc: 20)]) }
                let snapshot = try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 10).page()
                #expect(snapshot.entries.map(\.value) == [.string("1234"), nil, .string("abcd")])
                #expect(snapshot.headRev == 7)
            }
        }

        @Test("after tombstones are purged, an older cursor throws cursorExpired", arguments: StorageBackend.allCases)
        func cursorExpiry(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await push(storage, [op("gone", .integer(1), hlc: HLC(milliseconds: 1000, counter: 0).rawValue)])
                try await push(storage, [op("gone", nil, hlc: HLC(milliseconds: 2000, counter: 0).rawValue)])  // rev 2
                try await push(storage, [op("kept", nil, hlc: HLC(milliseconds: 9000, counter: 0).rawValue)])  // rev 3
                try await push(storage, account: "bob", [op("old", nil, hlc: HLC(milliseconds: 1000, counter: 0).rawValue)])

                let removed = try await storage.purgeTombstones(olderThan: HLC(milliseconds: 5000, counter: 0))
                #expect(removed == 2)
                await expectStorageError(.cursorExpired) {
                    _ = try await storage.changes(account: "alice", suite: "s", since: 1, limit: 10).page()
                }
                let fromPurged = try await storage.changes(account: "alice", suite: "s", since: 2, limit: 10).page()
                #expect(fromPurged.entries.map(\.key) == ["kept"])
                let snapshot = try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 10).page()
                #expect(snapshot.entries.map(\.key) == ["kept"])
                #expect(snapshot.headRev == 3)
                await expectStorageError(.cursorExpired) {
                    _ = try await storage.changes(account: "bob", suite: "s", since: 0, limit: 10).page()
                }
                #expect(try await storage.purgeTombstones(olderThan: HLC(milliseconds: 5000, counter: 0)) == 0)
            }
        }

        @Test("snapshot pages through every entry in UTF-8 byte order", arguments: StorageBackend.allCases)
        func snapshotPaging(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let keys = ["b", "B", "a", "é", "z", "ä", "a.b", "a-b", "Z", "日本", "10", "9", "~"]
                try await push(storage, keys.enumerated().map { op($1, .integer($0), hlc: 10) })
                try await push(storage, [op("z", nil, hlc: 11)])
                var collected: [String] = []
                var after: String? = nil
                var pages = 0
                repeat {
                    let page = try await storage.snapshot(account: "alice", suite: "s", after: after, limit: 3).page()
                    #expect(page.entries.count <= 3)
                    #expect(page.headRev == UInt64(keys.count + 1))
                    collected += page.entries.map(\.key)
                    after = page.next
                    pages += 1
                } while after != nil && pages < 20
                #expect(collected == keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
                #expect(pages == 5)
                let last = try await storage.snapshot(account: "alice", suite: "s", after: "é", limit: 3).page()
                #expect(last.entries.map(\.key) == ["日本"])
                #expect(last.next == nil)
            }
        }

        @Test("a suite nobody has written is empty and not listed", arguments: StorageBackend.allCases)
        func emptySuite(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                #expect(try await storage.headRevision(account: "alice", suite: "never") == 0)
                let changes = try await storage.changes(account: "alice", suite: "never", since: 0, limit: 10).page()
                #expect(changes == ChangesPage(entries: [], lastRev: 0, hasMore: false))
                let snapshot = try await storage.snapshot(account: "alice", suite: "never", after: nil, limit: 10).page()
                #expect(snapshot == SnapshotPage(entries: [], headRev: 0, next: nil))
                #expect(try await storage.suites(account: "alice").suites.isEmpty)
                // A refused push (here: over the quota) does not make the suite appear.
                _ = try? await push(storage, suite: "refused", quota: SuiteQuota(maxKeys: 0, maxBytes: 0), [op("a", .integer(1), hlc: 1)])
                #expect(try await storage.suites(account: "alice").suites.isEmpty)
            }
        }

        @Test("accounts are isolated, even under the same suite name and batch id", arguments: StorageBackend.allCases)
        func accountIsolation(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await push(storage, account: "alice", batch: "same", [op("secret", .string("alice's"), hlc: 10)])
                #expect(try await storage.headRevision(account: "bob", suite: "s") == 0)
                #expect(try await storage.changes(account: "bob", suite: "s", since: 0, limit: 10).page().entries.isEmpty)
                #expect(try await storage.snapshot(account: "bob", suite: "s", after: nil, limit: 10).page().entries.isEmpty)
                #expect(try await storage.suites(account: "bob").suites.isEmpty)
                let bobs = try await push(storage, account: "bob", batch: "same", [op("secret", .string("bob's"), hlc: 5)])
                #expect(bobs.results.first?.status == .applied)
                #expect(bobs.headRev == 1)
                let alices = try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 10).page()
                #expect(alices.entries.map(\.value) == [.string("alice's")])
            }
        }

        @Test(
            "waitForChange returns on a push, at once when the head already passed, on timeout and on cancellation",
            arguments: StorageBackend.allCases
        )
        func waitForChange(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let clock = ContinuousClock()
                // Bounds far below the timeouts, loose enough for every test running at once on two cores.
                // Woken by a push.
                let waiter = Task {
                    let start = clock.now
                    await storage.waitForChange(account: "alice", suite: "s", after: 0, timeout: .seconds(120))
                    return clock.now - start
                }
                if let postgres = storage as? PostgresSyncStorage { await postgres.waitUntilWaiting() }
                try await push(storage, [op("a", .integer(1), hlc: 10)])
                #expect(await waiter.value < .seconds(60))

                // Already past: at once.
                let past = await clock.measure {
                    await storage.waitForChange(account: "alice", suite: "s", after: 0, timeout: .seconds(120))
                }
                #expect(past < .seconds(60))

                // A push to another suite or account does not end the wait; the timeout does. Nor
                // does a push to a name that is the same text in other bytes (KELVIN SIGN, é in NFD).
                let timedOut = Task {
                    await clock.measure {
                        await storage.waitForChange(account: "alice", suite: "s", after: 1, timeout: .milliseconds(300))
                    }
                }
                let lookAlikes = Task {
                    await clock.measure {
                        await storage.waitForChange(account: "K", suite: "caf\u{E9}", after: 0, timeout: .milliseconds(300))
                    }
                }
                try await push(storage, suite: "other", [op("a", .integer(1), hlc: 10)])
                try await push(storage, account: "bob", [op("a", .integer(1), hlc: 10)])
                try await push(storage, account: "\u{212A}", suite: "caf\u{E9}", [op("a", .integer(1), hlc: 10)])
                try await push(storage, account: "K", suite: "cafe\u{301}", [op("a", .integer(1), hlc: 10)])
                for waited in [await timedOut.value, await lookAlikes.value] {
                    #expect(waited >= .milliseconds(300))
                    #expect(waited < .seconds(60))
                }
                #expect(try await storage.headRevision(account: "alice", suite: "s") == 1)

                // Cancellation.
                let cancelled = Task {
                    await clock.measure {
                        await storage.waitForChange(account: "alice", suite: "s", after: 1, timeout: .seconds(120))
                    }
                }
                if let postgres = storage as? PostgresSyncStorage { await postgres.waitUntilWaiting() }
                cancelled.cancel()
                #expect(await cancelled.value < .seconds(60))
            }
        }

        @Test(
            "concurrent pushes share commits yet stay all or nothing: exactly the quota's worth succeed, revisions 1…n",
            arguments: StorageBackend.allCases
        )
        func groupCommitKeepsEachPushAtomic(backend: StorageBackend) async throws {
            let (storage, cleanup) = try await backend.make()
            defer { cleanup() }
            let quota = SuiteQuota(maxKeys: 10, maxBytes: 1 << 20)
            let outcomes = await withTaskGroup(of: UInt64?.self) { group in
                for i in 0..<40 {
                    group.addTask {
                        let request = PushRequest(deviceID: UInt64(i + 1), batchID: "b", ops: [API.set("k\(i)", "v"), API.set("k\(i)-2", "w")])
                        return try? await storage.push(account: "a", suite: "s", request: request, quota: quota, serverTime: "t").headRev
                    }
                }
                return await group.reduce(into: [UInt64?]()) { $0.append($1) }
            }
            let heads = outcomes.compactMap { $0 }.sorted()
            #expect(heads == [2, 4, 6, 8, 10])
            let snapshot = try await storage.snapshot(account: "a", suite: "s", after: nil, limit: 100).page()
            #expect(snapshot.entries.count == 10 && snapshot.headRev == 10)
            // Each successful push kept both its ops.
            for entry in snapshot.entries where !entry.key.hasSuffix("-2") {
                #expect(snapshot.entries.contains { $0.key == entry.key + "-2" })
            }
            try await storage.shutdown()
        }

        @Test("snapshot pages follow exact UTF-8 key order, long keys sharing their first 503 bytes included", arguments: StorageBackend.allCases)
        func longKeyOrder(backend: StorageBackend) async throws {
            let (storage, cleanup) = try await backend.make()
            defer { cleanup() }
            let prefix = String(repeating: "a", count: 503)
            let keys = [prefix + "b", prefix + "a" + "z", prefix, prefix + "a", String(repeating: "a", count: 502) + "b", "é", "z", "Z", "ab"]
            let old = API.hlc(offsetMilliseconds: -86_400_000)
            let ops = keys.map { API.set($0, "v") } + [API.delete(prefix + "c", hlc: old)]
            _ = try await storage.push(
                account: "a",
                suite: "s",
                request: PushRequest(deviceID: 1, batchID: "b", ops: ops),
                quota: SuiteQuota(maxKeys: 100, maxBytes: 1 << 20),
                serverTime: ""
            )
            let expected = (keys + [prefix + "c"]).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            var seen: [String] = []
            var after: String?
            repeat {
                let page = try await storage.snapshot(account: "a", suite: "s", after: after, limit: 3).page()
                seen += page.entries.map(\.key)
                after = page.next
            } while after != nil
            #expect(seen == expected)
            let changes = try await storage.changes(account: "a", suite: "s", since: 0, limit: 100).page()
            #expect(changes.entries.map(\.key) == keys + [prefix + "c"])
            // Purging the tombstone in a shared bucket keeps its neighbours.
            #expect(try await storage.purgeTombstones(olderThan: API.hlc(offsetMilliseconds: -3_600_000)) == 1)
            let after2 = try await storage.snapshot(account: "a", suite: "s", after: nil, limit: 100).page()
            #expect(after2.entries.map(\.key) == expected.filter { $0 != prefix + "c" })
            try await storage.shutdown()
        }

        @Test("batch records are kept until the purge horizon passes them, then dropped", arguments: StorageBackend.allCases)
        func batchRetention(backend: StorageBackend) async throws {
            let (storage, cleanup) = try await backend.make()
            defer { cleanup() }
            let quota = SuiteQuota(maxKeys: 10, maxBytes: 1000)
            let first = PushRequest(deviceID: 1, batchID: "b", ops: [API.set("k", "v")])
            let other = PushRequest(deviceID: 1, batchID: "b", ops: [API.set("k", "w", hlc: API.hlc(offsetMilliseconds: 5))])
            _ = try await storage.push(account: "a", suite: "s", request: first, quota: quota, serverTime: "")
            _ = try await storage.purgeTombstones(olderThan: API.hlc(offsetMilliseconds: -60_000))
            await #expect(throws: SyncStorageError.self) {
                try await storage.push(account: "a", suite: "s", request: other, quota: quota, serverTime: "")
            }
            _ = try await storage.purgeTombstones(olderThan: API.hlc(offsetMilliseconds: 60_000))
            let response = try await storage.push(account: "a", suite: "s", request: other, quota: quota, serverTime: "")
            #expect(response.results.first?.status == .applied)
            try await storage.shutdown()
        }

        @Test(
            "changes: the latest entry per key in revision order; last_rev; accounts apart; unwritten suites empty",
            arguments: StorageBackend.allCases
        )
        func changesSemantics(backend: StorageBackend) async throws {
            let (storage, cleanup) = try await backend.make()
            defer { cleanup() }
            let quota = SuiteQuota(maxKeys: 100, maxBytes: 1 << 20)
            let t = API.hlc()
            _ = try await storage.push(
                account: "a",
                suite: "s",
                request: PushRequest(
                    deviceID: 1,
                    batchID: "1",
                    ops: [
                        API.set("x", "1", hlc: t), API.set("y", "1", hlc: t),
                    ]
                ),
                quota: quota,
                serverTime: ""
            )
            _ = try await storage.push(
                account: "a",
                suite: "s",
                request: PushRequest(
                    deviceID: 1,
                    batchID: "2",
                    ops: [
                        API.set("x", "2", hlc: HLC(rawValue: t.rawValue + 1))
                    ]
                ),
                quota: quota,
                serverTime: ""
            )
            let page = try await storage.changes(account: "a", suite: "s", since: 0, limit: 10).page()
            #expect(page.entries.map(\.key) == ["y", "x"] && page.entries.map(\.rev) == [2, 3])
            #expect(page.entries[1].value == .string("2") && page.lastRev == 3 && !page.hasMore)
            #expect(try await storage.headRevision(account: "a", suite: "s") == 3)
            #expect(try await storage.headRevision(account: "b", suite: "s") == 0)
            #expect(try await storage.changes(account: "b", suite: "s", since: 0, limit: 10).page().entries.isEmpty)
            #expect(try await storage.suites(account: "a").suites == [.init(name: "s", headRev: 3, keys: 2)])
            #expect(try await storage.suites(account: "b").suites.isEmpty)
            try await storage.shutdown()
        }

        @Test(
            "history keeps each key's last N versions (intermediate ones of a batch too), newest first, apart from quotas and accounts",
            arguments: StorageBackend.allCases
        )
        func historyKeepsTheLastVersions(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let depth = 3
                let quota = SuiteQuota(maxKeys: 1, maxBytes: 16 << 20, historyDepth: depth)
                var hlc: UInt64 = 1000
                // depth + 5 writes of one key: one by one, then a batch of three, then a deletion.
                for n in 1...4 {
                    hlc += 1
                    try await push(storage, quota: quota, [op("sound", .string("v\(n)"), hlc: hlc)])
                }
                try await push(
                    storage,
                    quota: quota,
                    (5...7).map { n in
                        hlc += 1
                        return op("sound", .string("v\(n)"), hlc: hlc)
                    }
                )
                hlc += 1
                try await push(storage, device: 9, quota: quota, [op("sound", nil, hlc: hlc)])
                try await push(storage, quota: quota, [op("other", .string("x"), hlc: 1)])  // history is not a live key

                let history = try await storage.history(account: "alice", suite: "s", key: "sound")
                #expect(history.map(\.entry.rev) == [8, 7, 6], "the last \(depth), newest first")
                #expect(history.map(\.entry.valueJSON) == [nil, Array(#"{"string":"v7"}"#.utf8), Array(#"{"string":"v6"}"#.utf8)])
                #expect(history.map(\.entry.stamp.origin) == [9, 1, 1])
                #expect(history.first?.entry.stamp.hlc.rawValue == hlc)
                let now = HLC.wallClockMilliseconds()
                #expect(history.allSatisfy { $0.receivedMilliseconds <= now && $0.receivedMilliseconds > now - 60_000 })

                // A version superseded by what is held is not one; other keys, suites and accounts are apart.
                try await push(storage, quota: quota, [op("sound", .string("late"), hlc: 2)])
                #expect(try await storage.history(account: "alice", suite: "s", key: "sound").map(\.entry.rev) == [8, 7, 6])
                #expect(try await storage.history(account: "alice", suite: "s", key: "other").map(\.entry.rev) == [9])
                #expect(try await storage.history(account: "bob", suite: "s", key: "sound").isEmpty)
                #expect(try await storage.history(account: "alice", suite: "other", key: "sound").isEmpty)
                #expect(try await storage.history(account: "alice", suite: "s", key: "never").isEmpty)

                // Two keys that are one Swift string (é composed and decomposed) in one push: each
                // keeps its own last versions.
                let twoKeys = SuiteQuota(maxKeys: 100, maxBytes: 16 << 20, historyDepth: 1)
                try await push(storage, suite: "t", quota: twoKeys, [op("caf\u{E9}", .integer(1), hlc: 10), op("cafe\u{301}", .integer(2), hlc: 11)])
                #expect(try await storage.history(account: "alice", suite: "t", key: "caf\u{E9}").map(\.entry.rev) == [1])
                #expect(try await storage.history(account: "alice", suite: "t", key: "cafe\u{301}").map(\.entry.rev) == [2])

                // Depth 0 keeps nothing new.
                try await push(storage, quota: SuiteQuota(maxKeys: 10, maxBytes: 16 << 20, historyDepth: 0), [op("off", .integer(1), hlc: 5000)])
                #expect(try await storage.history(account: "alice", suite: "s", key: "off").isEmpty)
            }
        }

        @Test(
            "the suite's history in pages: keys in byte order, each whole and newest first, at most `limit` versions unless one key holds more",
            arguments: StorageBackend.allCases
        )
        func suiteHistoryPages(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let quota = SuiteQuota(maxKeys: 100, maxBytes: 16 << 20, historyDepth: 4)
                var hlc: UInt64 = 1000
                // "K" sorts before "a", KELVIN SIGN (E2 84 AA) after "e": bytes, not String order.
                let writes: [(String, Int)] = [("a", 3), ("b", 1), ("c", 2), ("d", 6), ("e", 1), ("K", 1), ("\u{212A}", 1)]
                for (key, count) in writes {
                    for n in 1...count {
                        hlc += 1
                        try await push(storage, quota: quota, [op(key, .integer(n), hlc: hlc)])
                    }
                }
                hlc += 1
                try await push(storage, quota: quota, [op("e", nil, hlc: hlc)])  // a deletion is a version
                try await push(storage, quota: SuiteQuota(maxKeys: 100, maxBytes: 16 << 20, historyDepth: 0), [op("f", .integer(1), hlc: 1)])

                var pages: [StoredHistoryPage] = []
                var after: String?
                repeat {
                    let page = try await storage.history(account: "alice", suite: "s", after: after, limit: 3)
                    pages.append(page)
                    after = page.next
                } while after != nil && pages.count < 10
                #expect(pages.map { $0.keys.map(\.key) } == [["K"], ["a"], ["b", "c"], ["d"], ["e", "\u{212A}"]])
                #expect(pages.map(\.next) == ["K", "a", "c", "d", nil])
                #expect(pages[3].versionCount == 4, "a key with more versions than the limit comes whole, alone")
                // Each key as its own history reads it.
                for (key, versions) in pages.flatMap(\.keys) {
                    let alone = try await storage.history(account: "alice", suite: "s", key: key)
                    #expect(versions == alone, "\(key)")
                    #expect(versions.map(\.entry.rev) == versions.map(\.entry.rev).sorted(by: >), "newest first")
                }
                #expect(pages[4].keys[0].versions.first?.entry.valueJSON == nil, "the deletion, newest")
                // The whole in one page; other accounts and suites, and keys after the last, are empty.
                let whole = try await storage.history(account: "alice", suite: "s", after: nil, limit: 1000)
                #expect(whole.keys.map(\.key) == ["K", "a", "b", "c", "d", "e", "\u{212A}"] && whole.next == nil)
                #expect(try await storage.history(account: "bob", suite: "s", after: nil, limit: 10) == StoredHistoryPage(keys: [], next: nil))
                #expect(try await storage.history(account: "alice", suite: "t", after: nil, limit: 10) == StoredHistoryPage(keys: [], next: nil))
                #expect(
                    try await storage.history(account: "alice", suite: "s", after: "\u{212A}", limit: 10) == StoredHistoryPage(keys: [], next: nil)
                )
            }
        }

        @Test(
            "the purge drops history versions older than its horizon unless current: a purged tombstone takes its key's history",
            arguments: StorageBackend.allCases
        )
        func historyAfterPurge(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                func at(_ seconds: UInt64) -> UInt64 { HLC(milliseconds: seconds * 1000, counter: 0).rawValue }
                try await push(storage, [op("kept", .string("a"), hlc: at(1))])
                try await push(storage, [op("kept", .string("b"), hlc: at(2))])
                try await push(storage, [op("kept", .string("c"), hlc: at(9))])  // newer than the horizon
                try await push(storage, [op("old", .string("only"), hlc: at(1))])  // current, however old
                try await push(storage, [op("gone", .string("x"), hlc: at(1))])
                try await push(storage, [op("gone", nil, hlc: at(2))])

                #expect(try await storage.purgeTombstones(olderThan: HLC(milliseconds: 5000, counter: 0)) == 1)
                #expect(try await storage.history(account: "alice", suite: "s", key: "kept").map(\.entry.stamp.hlc.rawValue) == [at(9)])
                #expect(try await storage.history(account: "alice", suite: "s", key: "old").map(\.entry.stamp.hlc.rawValue) == [at(1)])
                #expect(try await storage.history(account: "alice", suite: "s", key: "gone").isEmpty)
            }
        }

        @Test(
            "an entry a member pushed names its account in the answer, changes, snapshot and history; the owner's names none; a re-seal keeps the account",
            arguments: StorageBackend.allCases
        )
        func memberAccount(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                func byBob(device: UInt64 = 2, suite: String = "s", _ ops: [PushOp]) async throws -> PushResponse {
                    var prepared = try PreparedPush(PushRequest(deviceID: device, batchID: UUID().uuidString, ops: ops))
                    prepared.account = "bob"
                    return try await storage.push(
                        account: "alice",
                        suite: suite,
                        push: prepared,
                        quota: StorageConformanceTests.roomy,
                        serverTime: StorageConformanceTests.now
                    )
                }
                let answer = try await byBob([op("sound", .string("bell.caf"), hlc: 10), op("gone", nil, hlc: 10)])
                #expect(answer.results.map(\.winner?.account) == ["bob", "bob"])
                try await push(storage, [op("volume", .integer(3), hlc: 11)])
                func accounts() async throws -> (changes: [String: String], snapshot: [String: String]) {
                    let changes = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 10).page().entries
                    let snapshot = try await storage.snapshot(account: "alice", suite: "s", after: nil, limit: 10).page().entries
                    return (
                        Dictionary(uniqueKeysWithValues: changes.map { ($0.key, $0.account ?? "-") }),
                        Dictionary(uniqueKeysWithValues: snapshot.map { ($0.key, $0.account ?? "-") })
                    )
                }
                let expected = ["sound": "bob", "gone": "bob", "volume": "-"]
                #expect(try await accounts() == (expected, expected))
                // The owner writes over the member's value: the entry is the owner's again; the
                // history keeps who wrote each version.
                try await push(storage, [op("sound", .string("ding.caf"), hlc: 12)])
                #expect(try await accounts().snapshot["sound"] == "-")
                let history = try await storage.history(account: "alice", suite: "s", key: "sound")
                #expect(history.map { $0.entry.account ?? "-" } == ["-", "bob"])
                #expect(try history.map { try $0.keyVersion().entry.account ?? "-" } == ["-", "bob"])

                // Sealed: the owner's device seals the member's write again under a new epoch.
                let box = Array(repeating: UInt8(1), count: 40)
                _ = try await byBob(
                    suite: "e",
                    [PushOp(keyID: "k", sealed: SealedPayload(epoch: 1, box: box), deleted: false, hlc: HLC(rawValue: 20))]
                )
                var chain = TestKeyChain(suite: "e")
                try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: chain.anchor())
                try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: chain.bag(2))
                var reseal = PushOp(keyID: "k", sealed: SealedPayload(epoch: 2, box: box), deleted: false, hlc: HLC(rawValue: 20))
                reseal.origin = 2
                let resealed = try await push(storage, suite: "e", device: 1, [reseal])
                #expect(resealed.results.first?.status == .applied)
                #expect(resealed.results.first?.winner?.account == "bob")
                let entry = try await storage.snapshot(account: "alice", suite: "e", after: nil, limit: 10).page().entries.first
                #expect(entry?.sealed?.epoch == 2 && entry?.account == "bob")
            }
        }

        @Test(
            "sealed entries: stored and returned as pushed, tombstones included; a suite is sealed or plain for good; an older key epoch is refused",
            arguments: StorageBackend.allCases
        )
        func sealedEntries(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                func sealed(_ id: String, epoch: UInt32, deleted: Bool = false, hlc: UInt64) -> PushOp {
                    PushOp(
                        keyID: id,
                        sealed: SealedPayload(epoch: epoch, box: Array(repeating: UInt8(hlc & 0xff), count: 40)),
                        deleted: deleted,
                        hlc: HLC(rawValue: hlc)
                    )
                }
                try await push(storage, suite: "e", [sealed("k1", epoch: 1, hlc: 10), sealed("k2", epoch: 1, deleted: true, hlc: 11)])
                let snapshot = try await storage.snapshot(account: "alice", suite: "e", after: nil, limit: 10).page()
                #expect(snapshot.entries.map(\.key) == ["k1", "k2"])
                #expect(snapshot.entries.map(\.isDeleted) == [false, true])
                #expect(snapshot.entries.map { $0.sealed?.box.count } == [40, 40])
                #expect(snapshot.entries.allSatisfy { $0.value == nil && $0.sealed?.epoch == 1 })
                #expect(try await storage.suites(account: "alice").suites.first?.keys == 1)
                let history = try await storage.history(account: "alice", suite: "e", key: "k2")
                #expect(history.first?.entry.sealed?.box == Array(repeating: 11, count: 40))
                await expectStorageError(.suiteEncrypted) { try await push(storage, suite: "e", [op("k3", .string("plain"), hlc: 12)]) }
                // A newer epoch exists once its key bag is stored, each epoch once; then older ones are refused.
                await expectStorageError(.staleKeyEpoch) { try await push(storage, suite: "e", [sealed("k1", epoch: 2, hlc: 12)]) }
                var chain = TestKeyChain(suite: "e")
                try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: chain.anchor())
                let bag = chain.bag(2)
                await expectStorageError(.suiteNotEncrypted) { try await storage.putKeyBag(account: "alice", suite: "none", epoch: 2, bag: bag) }
                await expectStorageError(.staleKeyEpoch) { try await storage.putKeyBag(account: "alice", suite: "e", epoch: 1, bag: bag) }
                // Only the next epoch: a bag for a later one would let any token spend the epochs.
                await expectStorageError(.staleKeyEpoch) { try await storage.putKeyBag(account: "alice", suite: "e", epoch: 3, bag: bag) }
                await expectStorageError(.staleKeyEpoch) { try await storage.putKeyBag(account: "alice", suite: "e", epoch: .max, bag: bag) }
                try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: bag)
                await expectStorageError(.staleKeyEpoch) { try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: chain.bag(2)) }
                #expect(try await storage.keyBags(account: "alice", suite: "e")[2]?.bundle == bag.bundle)
                await expectStorageError(.staleKeyEpoch) { try await push(storage, suite: "e", [sealed("k2", epoch: 1, hlc: 12)]) }
                // A re-seal keeps the stamp and replaces only the same write under an older epoch.
                var reseal = sealed("k2", epoch: 2, deleted: true, hlc: 11)
                reseal.origin = 1
                var stale = sealed("k1", epoch: 2, hlc: 9)
                stale.origin = 1
                let resealed = try await push(storage, suite: "e", device: 5, [reseal, stale])
                #expect(resealed.results.map(\.status) == [.applied, .superseded])
                #expect(resealed.results[0].winner?.origin == 1 && resealed.results[0].winner?.hlc.rawValue == 11)
                #expect(resealed.results[0].winner?.sealed?.epoch == 2)
                #expect(try await push(storage, suite: "e", device: 5, [reseal]).results.map(\.status) == [.superseded], "done once")
                try await push(storage, suite: "e", [sealed("k1", epoch: 2, hlc: 13)])
                await expectStorageError(.staleKeyEpoch) { try await push(storage, suite: "e", [sealed("k2", epoch: 1, hlc: 14)]) }
                try await push(storage, suite: "p", [op("k", .string("plain"), hlc: 10)])
                await expectStorageError(.suiteNotEncrypted) { try await push(storage, suite: "p", [sealed("k", epoch: 1, hlc: 11)]) }
                await expectStorageError(.malformed) {
                    try await push(storage, suite: "q", [sealed("a", epoch: 1, hlc: 1), op("b", .string("plain"), hlc: 2)])
                }
            }
        }
    }
}
