import Foundation
import Glibc
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import Synchronization
import TestSupport
import Testing

/// The real executable on loopback, with token commands run as separate processes beside it.
@Suite("Live server process")
struct LiveServerTests {
    private func temporaryDirectory() -> String { ServerTool.temporaryDirectory("gds-live") }

    private func createToken(_ dataDirectory: String, _ extra: [String] = []) async throws -> String {
        try await ServerTool.createToken(dataDirectory, extra)
    }

    @Test("push and read over a socket; tokens made and revoked by other processes while it runs; SIGTERM exits 0")
    func roundTripRevokeAndTerminate() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(dataDirectory: directory)
        let token = try await createToken(directory, ["--suites", "group.*"])
        #expect(token.hasPrefix("gdt_") && token.count > 40)

        try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            let pushed = try await client.post("/v1/suites/group.live/push", headers: API.auth(token), body: API.push([API.set("sound", "ring.caf")]))
            #expect(pushed.status == .ok)
            let changes = try await client.get("/v1/suites/group.live/changes?since=0", headers: API.auth(token))
            let page = try JSONDecoder().decode(ChangesPage.self, from: Data((changes.body ?? ByteBuffer()).readableBytesView))
            #expect(page.entries.map(\.value) == [.string("ring.caf")])
        }

        let list = try await ServerTool.run(["token", "list", "--data-dir", directory])
        #expect(list.status == 0)
        #expect(!list.stdout.contains(token))
        let fields = list.stdout.split(separator: "\n").first?.split(separator: "\t").map(String.init) ?? []
        #expect(
            fields.count == 7 && fields[1] == "alice" && fields[2] == "group.* read-write" && fields[5] == "active"
                && fields[6] == "any-device",
            "\(fields)"
        )
        let id = fields.first ?? ""
        #expect(id.hasPrefix("tok_"))
        #expect(try await ServerTool.run(["token", "revoke", "--data-dir", directory, id]).status == 0)
        #expect(try await ServerTool.run(["token", "revoke", "--data-dir", directory, "tok_unknown"]).status == 1)

        try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            let refused = try await client.get("/v1/suites", headers: API.auth(token))
            #expect(refused.status == .unauthorized)
        }

        server.signal(SIGTERM)
        let exit = await server.waitForExit()
        #expect(!exit.bySignal && exit.status == 0)
        #expect(server.remainingOutput().isEmpty, "the listening line is the only line on stdout")
    }

    @Test("kill -9 during a stream of pushes, restart: every push answered 2xx is there")
    func killNineKeepsAcknowledgedPushes() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let token = try await createToken(directory)
        let server = try await ServerProcess(dataDirectory: directory)
        let acknowledged = Acknowledged()

        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<3 {
                group.addTask {
                    try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
                        for i in 0... {
                            let key = "w\(writer)-\(i)"
                            guard
                                let response = try? await client.post(
                                    "/v1/suites/s/push",
                                    headers: API.auth(token),
                                    body: API.push(device: UInt64(writer + 1), [API.set(key, "v")])
                                )
                            else { return }  // the server is gone
                            guard response.status == .ok else { return }
                            acknowledged.keys.withLock { $0.append(key) }
                        }
                    }
                }
            }
            // Kill once pushes are flowing (bounded polling for that condition).
            for _ in 0..<3000 where acknowledged.keys.withLock({ $0.count }) < 60 { try await Task.sleep(for: .milliseconds(10)) }
            server.signal(SIGKILL)
            while let result = await group.nextResult() { _ = result }  // writers end when the connection drops
        }
        let exit = await server.waitForExit()
        #expect(exit.bySignal)
        let keys = acknowledged.keys.withLock { $0 }
        #expect(keys.count >= 60)

        let restarted = try await ServerProcess(dataDirectory: directory)
        try await TestClient.withClient(host: "127.0.0.1", port: restarted.port) { client in
            let response = try await client.get("/v1/suites/s/snapshot?limit=1000", headers: API.auth(token))
            let page = try JSONDecoder().decode(SnapshotPage.self, from: Data((response.body ?? ByteBuffer()).readableBytesView))
            let stored = Set(page.entries.map(\.key))
            let missing = keys.filter { !stored.contains($0) }
            #expect(missing.isEmpty, "acknowledged but lost: \(missing)")
        }
        restarted.signal(SIGTERM)
        #expect(await restarted.waitForExit().status == 0)
    }

    @Test("SIGTERM ends a parked long-poll and exits 0 promptly")
    func terminateDuringLongPoll() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let token = try await createToken(directory)
        let server = try await ServerProcess(dataDirectory: directory, extraArguments: ["--max-wait", "60"])
        let signalled = try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            // Once this answers, the server is up and the next request parks.
            #expect(try await client.get("/v1/suites", headers: API.auth(token)).status == .ok)
            async let poll = try? client.get("/v1/suites/s/changes?since=0&wait=60", headers: API.auth(token))
            try await Task.sleep(for: .milliseconds(300))  // let the poll reach the server; the outcome does not depend on it
            let signalled = ContinuousClock.now
            server.signal(SIGTERM)
            _ = await poll
            return signalled
        }
        let exit = await server.waitForExit()
        #expect(!exit.bySignal && exit.status == 0)
        // Measured from the signal: well before the 60 s the poll would wait (the requests before
        // it once took seconds under a full run's load, and are not what is measured).
        #expect(ContinuousClock.now - signalled < .seconds(30))
    }

    @Test("two server processes on one PostgreSQL: a token made by the CLI works on both, and a long-poll on one is woken by a push to the other")
    func twoInstancesOnPostgres() async throws {
        let url = try await PostgresFixture.freshDatabase()
        let first = try await ServerProcess(dataDirectory: nil, extraArguments: ["--postgres-url", url])
        let second = try await ServerProcess(dataDirectory: nil, extraArguments: ["--postgres-url", url])
        let made = try await ServerTool.run(["token", "create", "--postgres-url", url, "--account", "alice"])
        #expect(made.status == 0, "\(made.stderr)")
        // The hint names the database (this URL holds no password), so that pasted as is it revokes there.
        #expect(made.stderr.contains("`groupdefaults-server token revoke --postgres-url \(url) tok_"), "\(made.stderr)")
        let token = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let pushed = Moment()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await TestClient.withClient(host: "127.0.0.1", port: second.port) { client in
                    let polled = try await client.get("/v1/suites/group.shared/changes?since=0&wait=20", headers: API.auth(token))
                    let woken = ContinuousClock.now
                    #expect(polled.status == .ok)
                    let page = try JSONDecoder().decode(ChangesPage.self, from: Data((polled.body ?? ByteBuffer()).readableBytesView))
                    #expect(page.entries.map(\.key) == ["sound"])
                    if let pushedAt = pushed.value.withLock({ $0 }) {
                        #expect(woken - pushedAt < .milliseconds(100), "woken \(woken - pushedAt) after the push was answered")
                    }
                }
            }
            group.addTask {
                // The long-poll is parked before the push: its suite is still empty when this runs.
                try await Task.sleep(for: .milliseconds(500))
                try await TestClient.withClient(host: "127.0.0.1", port: first.port) { client in
                    let response = try await client.post(
                        "/v1/suites/group.shared/push",
                        headers: API.auth(token),
                        body: API.push([API.set("sound", "bell.aiff")])
                    )
                    pushed.value.withLock { $0 = ContinuousClock.now }
                    #expect(response.status == .ok)
                }
            }
            try await group.waitForAll()
        }
        for server in [first, second] {
            server.signal(SIGTERM)
            let exit = await server.waitForExit()
            #expect(!exit.bySignal && exit.status == 0)
        }
    }

    @Test(
        "two server processes on one PostgreSQL: an event stream on one is woken by a push to the other within 100 ms, also after its listening connection was killed",
        .timeLimit(.minutes(2))
    )
    func eventStreamAcrossInstances() async throws {
        let url = try await PostgresFixture.freshDatabase()
        let first = try await ServerProcess(dataDirectory: nil, extraArguments: ["--postgres-url", url])
        let firstListener = try await Listeners.waitFor(url) { $0.count == 1 }
        // A heartbeat every second on the stream's instance: a comment shows the stream has waited.
        let second = try await ServerProcess(dataDirectory: nil, extraArguments: ["--postgres-url", url, "--heartbeat", "1"])
        let listeners = try await Listeners.waitFor(url) { $0.count == 2 }
        let secondListener = try #require(listeners.first { $0.name != firstListener.first?.name })
        let made = try await ServerTool.run(["token", "create", "--postgres-url", url, "--account", "alice"])
        #expect(made.status == 0, "\(made.stderr)")
        let token = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let stream = try Curl(["-H", "Authorization: Bearer \(token)", "http://127.0.0.1:\(second.port)/v1/suites/group.shared/events"])
        #expect(await stream.nextComment(), "the stream on the second instance is open and waiting")

        /// Pushes `key` through the first instance while the stream on the second is read: the time
        /// from the push's answer to the event parsed, zero if the event came first. (Under the
        /// parallel test load the push itself can take tens of milliseconds.)
        func wakeUp(_ key: String, revision: Int) async throws -> Duration {
            async let arrival = stream.timedEvents(1)
            let response = try await TestClient.withClient(host: "127.0.0.1", port: first.port) { client in
                try await client.post("/v1/suites/group.shared/push", headers: API.auth(token), body: API.push([API.set(key, "v")]))
            }
            let answered = ContinuousClock.now
            #expect(response.status == .ok)
            let (events, parsed) = await arrival
            #expect(events.map(\.id) == ["\(revision)"])
            let woken = try #require(parsed, "no event within 10 s")
            return max(.zero, woken - answered)
        }

        let before = try await wakeUp("sound", revision: 1)
        #expect(before < .milliseconds(100), "woken \(before) after the push was answered")

        // Kill the second instance's listening connection: it reconnects by itself, re-reads, and the
        // stream still gets the push made meanwhile.
        let killed = try await PostgresFixture.psql(url, "SELECT pg_terminate_backend(\(secondListener.pid))")
        #expect(killed == "t")
        let afterKill = try await wakeUp("volume", revision: 2)
        #expect(afterKill < .milliseconds(100), "woken \(afterKill) after the push was answered")

        // Listening again on a new connection, which delivers the notifications.
        _ = try await Listeners.waitFor(url) { $0.contains { $0.name == secondListener.name && $0.pid != secondListener.pid } }
        let afterReconnect = try await wakeUp("badge", revision: 3)
        #expect(afterReconnect < .milliseconds(100), "woken \(afterReconnect) after the push was answered")

        for server in [first, second] {
            server.signal(SIGTERM)
            let exit = await server.waitForExit()
            #expect(!exit.bySignal && exit.status == 0)
        }
        #expect(await stream.waitForExit() == 0, "the stream ends cleanly with its server")
    }
}

/// When something happened, shared between tasks.
final class Moment: Sendable {
    let value = Mutex<ContinuousClock.Instant?>(nil)
}

/// The keys whose push the server answered 200, shared by the writer tasks.
final class Acknowledged: Sendable {
    let keys = Mutex<[String]>([])
}

/// The servers' listening connections to one database, as pg_stat_activity shows them once LISTEN
/// has run on them (`application_name` is per server instance).
enum Listeners {
    struct Listener: Equatable {
        var name: String
        var pid: Int
    }

    static func current(_ url: String) async throws -> [Listener] {
        let rows = try await PostgresFixture.psql(
            url,
            """
            SELECT application_name || ' ' || pid FROM pg_stat_activity
            WHERE datname = current_database() AND application_name LIKE 'groupdefaults-listener-%' AND query LIKE 'LISTEN%'
            """
        )
        return rows.split(separator: "\n").compactMap { row in
            let fields = row.split(separator: " ")
            guard fields.count == 2, let pid = Int(fields[1]) else { return nil }
            return Listener(name: String(fields[0]), pid: pid)
        }
    }

    /// Polls (a state of other processes, with no event to wait on; bounded: 20 s) until
    /// `condition` holds; the listeners then.
    static func waitFor(_ url: String, until condition: ([Listener]) -> Bool) async throws -> [Listener] {
        for _ in 0..<400 {
            let listeners = try await current(url)
            if condition(listeners) { return listeners }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw FixtureError("the servers' listening connections did not reach the expected state: \(try await current(url))")
    }
}
