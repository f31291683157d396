import Foundation
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import Testing

@testable import GroupDefaultsServer

@Suite("Long-poll")
struct LongPollTests {
    @Test("a waiting changes request is woken by a push")
    func wokenByPush() async throws {
        let fixture = try Fixture(maxWait: .seconds(30))
        let token = try await fixture.token()
        try await fixture.test { client in
            let started = ContinuousClock.now
            async let waited = client.get("/v1/suites/s/changes?since=0&wait=60", token: token)
            // Push once the poll is parked (bounded polling for that condition).
            for _ in 0..<500 where fixture.storage.waitingCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(fixture.storage.waitingCount == 1)
            _ = try await client.push("s", token: token, API.push([API.set("k", "v")]))
            let page = try API.decode(ChangesPage.self, try await waited)
            #expect(page.entries.map(\.key) == ["k"])
            #expect(ContinuousClock.now - started < .seconds(30), "woken by the push, not by the wait's end")
        }
    }

    @Test("a long-poll with nothing new ends after its wait, capped by max-wait")
    func timesOut() async throws {
        let fixture = try Fixture(maxWait: .seconds(1))
        let token = try await fixture.token()
        try await fixture.test { client in
            let started = ContinuousClock.now
            let page = try API.decode(ChangesPage.self, try await client.get("/v1/suites/s/changes?since=0&wait=60", token: token))
            let elapsed = ContinuousClock.now - started
            #expect(page.entries.isEmpty && page.lastRev == 0)
            #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(30), "capped at max-wait (1 s), not 60 s")
        }
    }

    @Test("waitForChange returns at once when the head already passed, and on cancellation")
    func storageWait() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        _ = try await fixture.storage.push(
            account: "a",
            suite: "s",
            request: PushRequest(deviceID: 1, batchID: "b", ops: [API.set("k", "v")]),
            quota: SuiteQuota(maxKeys: 10, maxBytes: 1000),
            serverTime: ""
        )
        // Bounds far below the timeouts (so they tell "at once" from "waited it out") yet loose enough
        // for a run of every test in parallel on two cores.
        let started = ContinuousClock.now
        await fixture.storage.waitForChange(account: "a", suite: "s", after: 0, timeout: .seconds(120))
        #expect(ContinuousClock.now - started < .seconds(60))
        let cancelled = ContinuousClock.now
        let task = Task { await fixture.storage.waitForChange(account: "a", suite: "s", after: 1, timeout: .seconds(120)) }
        task.cancel()
        await task.value
        #expect(ContinuousClock.now - cancelled < .seconds(60))
        try await fixture.storage.shutdown()
    }
}
