import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("Push, changes and snapshot in-process")
struct RoundTripTests {
    @Test("a push is read back by changes and snapshot, with one revision per applied op")
    func roundTrip() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            let pushed = try await client.push("group.a", token: token, API.push(device: 9, [API.set("b", "2"), API.set("a", "1"), API.delete("c")]))
            #expect(pushed.status == .ok)
            let response = try API.decode(PushResponse.self, pushed)
            #expect(response.headRev == 3)
            #expect(response.results.map(\.status) == [.applied, .applied, .applied])
            #expect(response.results.map { $0.winner?.rev } == [1, 2, 3])
            #expect(response.results[0].winner?.origin == 9)

            let changes = try API.decode(ChangesPage.self, try await client.get("/v1/suites/group.a/changes?since=0", token: token))
            #expect(changes.entries.map(\.key) == ["b", "a", "c"])
            #expect(changes.entries[2].isDeleted)
            #expect(changes.lastRev == 3 && !changes.hasMore)

            let paged = try API.decode(ChangesPage.self, try await client.get("/v1/suites/group.a/changes?since=1&limit=1", token: token))
            #expect(paged.entries.map(\.key) == ["a"] && paged.lastRev == 2 && paged.hasMore)

            let none = try API.decode(ChangesPage.self, try await client.get("/v1/suites/group.a/changes?since=3", token: token))
            #expect(none.entries.isEmpty && none.lastRev == 3)
            let largest = try API.decode(ChangesPage.self, try await client.get("/v1/suites/group.a/changes?since=\(UInt64.max)", token: token))
            #expect(largest.entries.isEmpty && largest.lastRev == 3)

            let first = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/group.a/snapshot?limit=2", token: token))
            #expect(first.entries.map(\.key) == ["a", "b"] && first.next == "b" && first.headRev == 3)
            let second = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/group.a/snapshot?after=b&limit=2", token: token))
            #expect(second.entries.map(\.key) == ["c"] && second.next == nil)

            let list = try API.decode(SuiteList.self, try await client.get("/v1/suites", token: token))
            #expect(list.suites == [.init(name: "group.a", headRev: 3, keys: 2)])
        }
    }

    @Test("an unwritten suite is empty, head 0")
    func emptySuite() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/nobody/snapshot", token: token))
            #expect(snapshot.entries.isEmpty && snapshot.headRev == 0 && snapshot.next == nil)
            let changes = try API.decode(ChangesPage.self, try await client.get("/v1/suites/nobody/changes?since=0", token: token))
            #expect(changes.entries.isEmpty && changes.lastRev == 0)
        }
    }

    @Test("last writer wins by HLC, ties go to the larger origin; superseded ops get no revision")
    func lastWriterWins() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        let stamp = API.hlc()
        try await fixture.test { client in
            _ = try await client.push("s", token: token, API.push(device: 5, [API.set("k", "five", hlc: stamp)]))
            let lower = try API.decode(
                PushResponse.self,
                try await client.push("s", token: token, API.push(device: 4, [API.set("k", "four", hlc: stamp)]))
            )
            #expect(lower.results[0].status == .superseded)
            #expect(lower.results[0].winner?.value == .string("five"))
            #expect(lower.headRev == 1)
            let older = try API.decode(
                PushResponse.self,
                try await client.push("s", token: token, API.push(device: 99, [API.set("k", "old", hlc: HLC(rawValue: stamp.rawValue - 1))]))
            )
            #expect(older.results[0].status == .superseded)
            let higher = try API.decode(
                PushResponse.self,
                try await client.push("s", token: token, API.push(device: 6, [API.delete("k", hlc: stamp)]))
            )
            #expect(higher.results[0].status == .applied && higher.headRev == 2)
            // The tombstone orders against later writes too.
            let stale = try API.decode(
                PushResponse.self,
                try await client.push("s", token: token, API.push(device: 5, [API.set("k", "again", hlc: stamp)]))
            )
            #expect(stale.results[0].status == .superseded && stale.results[0].winner?.isDeleted == true)
            let changes = try API.decode(ChangesPage.self, try await client.get("/v1/suites/s/changes?since=0", token: token))
            #expect(changes.entries.count == 1 && changes.entries[0].rev == 2 && changes.entries[0].origin == 6)
        }
    }

    @Test("a retried batch gets the same answer and changes nothing; other ops under its id are 422")
    func idempotency() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        let ops = [API.set("k", "v"), API.set("j", "w")]
        try await fixture.test { client in
            let first = try await client.push("s", token: token, API.push(device: 1, batch: "b1", ops))
            let again = try await client.push("s", token: token, API.push(device: 1, batch: "b1", ops))
            #expect(first.status == .ok && again.status == .ok)
            #expect(try API.decode(PushResponse.self, first) == API.decode(PushResponse.self, again))
            #expect(try API.decode(ChangesPage.self, try await client.get("/v1/suites/s/changes", token: token)).lastRev == 2)

            let other = try await client.push("s", token: token, API.push(device: 1, batch: "b1", [API.set("k", "x")]))
            #expect(other.status == .unprocessableContent)
            #expect(try API.error(other).error == .idempotencyMismatch)
            // Another device may use the same batch id.
            let otherDevice = try await client.push("s", token: token, API.push(device: 2, batch: "b1", [API.set("k", "x")]))
            #expect(otherDevice.status == .ok)
        }
    }

    @Test("revisions follow commit order across concurrent pushes, each once")
    func concurrentRevisions() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            let heads = try await withThrowingTaskGroup(of: UInt64.self) { group in
                for i in 0..<20 {
                    group.addTask {
                        let response = try await client.push("s", token: token, API.push(device: UInt64(i + 1), [API.set("k\(i)", "v")]))
                        return try API.decode(PushResponse.self, response).headRev
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(heads) == Set(1...20))
            let changes = try API.decode(ChangesPage.self, try await client.get("/v1/suites/s/changes", token: token))
            #expect(changes.entries.compactMap(\.rev) == Array(1...20))
        }
    }

    @Test("quotas: a push that would exceed keys or bytes is 422 quota_exceeded and changes nothing")
    func quotas() async throws {
        let fixture = try Fixture(limits: SyncLimits(maxKeysPerSuite: 2, maxBytesPerSuite: 100))
        let token = try await fixture.token()
        try await fixture.test { client in
            #expect(try await client.push("s", token: token, API.push([API.set("a", "1"), API.set("b", "2")])).status == .ok)
            let tooMany = try await client.push("s", token: token, API.push([API.delete("a"), API.set("c", "3"), API.set("d", "4")]))
            #expect(tooMany.status == .unprocessableContent)
            #expect(try API.error(tooMany).error == .quotaExceeded)
            #expect(try API.error(tooMany).limit == 2)
            // Replacing a key keeps the count.
            #expect(try await client.push("s", token: token, API.push([API.delete("a"), API.set("c", "3")])).status == .ok)
            let tooBig = try await client.push("s", token: token, API.push([API.set("b", String(repeating: "x", count: 100))]))
            #expect(try API.error(tooBig).error == .quotaExceeded)
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(snapshot.entries.map(\.key) == ["a", "b", "c"] && snapshot.headRev == 4)
            #expect(snapshot.entries[1].value == .string("2"))
        }
    }

    @Test("410 cursor_expired after tombstones are purged past the cursor")
    func cursorExpired() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        let old = API.hlc(offsetMilliseconds: -86_400_000)
        try await fixture.test { client in
            _ = try await client.push("s", token: token, API.push([API.set("a", "1"), API.delete("b", hlc: old), API.set("c", "3")]))
            #expect(try await fixture.storage.purgeTombstones(olderThan: API.hlc(offsetMilliseconds: -3_600_000)) == 1)
            let expired = try await client.get("/v1/suites/s/changes?since=1", token: token)
            #expect(expired.status == .gone)
            #expect(try API.error(expired).error == .cursorExpired)
            let fine = try API.decode(ChangesPage.self, try await client.get("/v1/suites/s/changes?since=2", token: token))
            #expect(fine.entries.map(\.key) == ["c"])
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(snapshot.entries.map(\.key) == ["a", "c"])
        }
    }
}
