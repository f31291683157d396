import AsyncHTTPClient
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import ServerLaunching
import Synchronization
import TestSupport
import Testing

/// Sync through two server instances on a replicated PostgreSQL (`Tools/postgres-ha`: a primary, a
/// synchronous standby, pg_auto_failover's monitor) that loses its primary's machine.
@Suite("PostgreSQL failover", .serialized)
struct FailoverTests {
    /// What the devices saw: each acknowledged push (key → value) and when, and each refusal.
    final class Record: Sendable {
        struct Ack {
            var key: String
            var value: String
            var instance: Int
            /// When the push was sent: one sent before the loss may be answered after it.
            var started: ContinuousClock.Instant
        }
        let acks = Mutex<[Ack]>([])
        let failures = Mutex<[String: Int]>([:])
        /// Set when the devices are to stop pushing.
        let stopped = Atomic<Bool>(false)

        func acknowledged(_ ack: Ack) { acks.withLock { $0.append(ack) } }
        func failed(_ error: SyncError) {
            let kind = "\(error.status.map { "\($0)" } ?? "no answer") \(error.code.map { "\($0)" } ?? "")"
            failures.withLock { $0[kind, default: 0] += 1 }
        }
    }

    /// How the primary's machine is lost.
    enum Loss: String, CustomStringConvertible, CaseIterable {
        /// `kill -9` of its keeper and postmaster: connections are refused or reset at once.
        case killed
        /// `SIGSTOP`: it stops answering and closes nothing, as behind a partition; it comes back
        /// (`SIGCONT`) once the standby took over, and its keeper demotes it.
        case frozen

        var description: String { rawValue }
    }

    @Test(
        "devices push through two instances while the primary's machine is lost: every acknowledged push is kept, both instances serve again, and a push on one reaches a stream on the other",
        arguments: Loss.allCases
    )
    func primaryLost(loss: Loss) async throws {
        let tool = PostgresFixture.packageRoot.appendingPathComponent("Tools/postgres-ha").path
        let cluster = try await offThePool { try ReplicatedPostgres(tool: tool) }
        defer { try? cluster.stop() }
        let storage = ["--postgres-url", cluster.url]
        try await Self.refusesWhatTakesNoWrites(cluster)
        let token = try await ServerTool.createToken(storage: storage)
        let instances = [
            try await ServerProcess(dataDirectory: nil, extraArguments: storage + Self.serveArguments, keepsStderr: true),
            try await ServerProcess(dataDirectory: nil, extraArguments: storage + Self.serveArguments, keepsStderr: true),
        ]
        let http = try SyncClient.makeHTTPClient()
        do {
            try await devicesPush(through: instances, http: http, token: token, cluster: cluster, loss: loss)
        } catch {
            for instance in instances { await instance.stop() }
            try await http.shutdown()
            throw error
        }
        for instance in instances { await instance.stop() }
        try await http.shutdown()
    }

    /// The test's body, once its servers and HTTP client are made.
    private func devicesPush(
        through instances: [ServerProcess],
        http: HTTPClient,
        token: String,
        cluster: ReplicatedPostgres,
        loss: Loss
    ) async throws {
        let clients = instances.map { instance in SyncClient(server: instance.url, suite: "failover", http: http) { token } }
        let record = Record()
        let clock = ContinuousClock()
        let killed = Mutex<ContinuousClock.Instant?>(nil)

        try await withThrowingTaskGroup(of: Void.self) { group in
            // Four devices, two through each instance, each pushing one new key after another.
            for device in 0..<4 {
                group.addTask {
                    let instance = device % 2
                    var n: UInt64 = 0
                    while !record.stopped.load(ordering: .acquiring) {
                        n += 1
                        let key = "d\(device)-\(n)"  // never written again: a lost write cannot be hidden by a later one
                        let started = clock.now
                        let value = "v\(n)"
                        let request = PushRequest(
                            deviceID: UInt64(device + 1),
                            batchID: UUID().uuidString,
                            ops: [PushOp(key: key, value: .string(value), hlc: HLC(rawValue: (1 << 40) + n))]
                        )
                        do throws(SyncError) {
                            _ = try await clients[instance].push(body: Array(try! JSONEncoder().encode(request)))
                            record.acknowledged(.init(key: key, value: value, instance: instance, started: started))
                        } catch {
                            record.failed(error)
                            try await Task.sleep(for: .milliseconds(100))  // a device's backoff after its own retries
                        }
                    }
                }
            }
            // Pushes flow, then the primary's machine is lost; the devices go on for 15 s more.
            try await Self.until { record.acks.withLock { Set($0.map(\.instance)).count == 2 && $0.count >= 40 } }
            let lost = try await offThePool { loss == .killed ? try cluster.killPrimary() : try cluster.freezePrimary() }
            let at = clock.now
            killed.withLock { $0 = at }
            do {
                try await Self.until(timeout: .seconds(60)) {
                    Set(record.acks.withLock { $0.filter { $0.started > at }.map(\.instance) }).count == 2
                }
            } catch {
                let served = Set(record.acks.withLock { $0.filter { $0.started > at }.map(\.instance) })
                throw FixtureError(
                    "instances \(served.sorted()) served again within 60 s of the loss of \(lost), not both; refusals: \(record.failures.withLock { $0 }); the monitor says:\n\(cluster.state())"
                )
            }
            try await Task.sleep(for: .seconds(3))  // pushes on the new primary for a while
            if loss == .frozen {
                // The old primary answers again, believing for a moment that it still is one: the
                // instances stay on the new primary, and the pushes go on.
                try await offThePool { try cluster.thaw(lost) }
                let thawed = record.acks.withLock { $0.count }
                try await Task.sleep(for: .seconds(3))
                #expect(record.acks.withLock { $0.count } > thawed, "no push was acknowledged after the old primary came back")
            }
            record.stopped.store(true, ordering: .releasing)
            try await group.waitForAll()
            let now = try await offThePool { try cluster.primary() }
            #expect(now != lost, "the monitor still names \(lost) the primary")
        }

        let acks = record.acks.withLock { $0 }
        let killedAt = try #require(killed.withLock { $0 })
        // Every acknowledged push is in the suite, read through either instance (each key is written
        // once).
        for client in clients {
            var held: [String: String] = [:]
            var after: String?
            repeat {
                let page = try await client.snapshot(after: after)
                for entry in page.entries { if case .string(let value)? = entry.value { held[entry.key] = value } }
                after = page.next
            } while after != nil
            let lost = acks.filter { held[$0.key] != $0.value }
            #expect(lost.isEmpty, "\(lost.count) of \(acks.count) acknowledged pushes are missing, e.g. \(lost.prefix(3).map(\.key))")
        }
        // Service back: the first acknowledged push after the loss, through each instance.
        let back = (0..<2).map { instance in
            acks.filter { $0.instance == instance && $0.started > killedAt }.map(\.started).min().map { $0 - killedAt }
        }
        let before = acks.filter { $0.started <= killedAt }.count
        print(
            "failover: \(acks.count) pushes acknowledged (\(before) before the loss), service back through each instance after \(back.map { $0.map { "\($0)" } ?? "never" }), refusals meanwhile: \(record.failures.withLock { $0 })"
        )
        #expect(back.allSatisfy { $0 != nil })
        // During the switch a push is answered 503 with Retry-After (which the client follows, six
        // times within a minute): never another 5xx, never no answer.
        let failures = record.failures.withLock { $0 }
        #expect(failures.keys.allSatisfy { $0.hasPrefix("503") }, "\(failures)")

        // Each instance listens on the new primary: a push through one reaches a stream open on
        // the other (open: the server subscribed before it answered).
        let head = try await clients[1].snapshot(after: nil, limit: 1).headRev
        let opened = AsyncStream<Void>.makeStream()
        let stream = Task { () -> String? in
            do {
                try await clients[1].events(after: head, onOpen: { opened.continuation.yield() }) { events in
                    for event in events {
                        if case .entry(let entry, _)? = try SyncStreamEvent(event), entry.key == "after" { throw Arrived() }
                    }
                }
                return "the stream ended"
            } catch is Arrived {
                return nil
            } catch {
                return "\(error)"
            }
        }
        for await _ in opened.stream { break }
        let request = PushRequest(
            deviceID: 9,
            batchID: UUID().uuidString,
            ops: [PushOp(key: "after", value: .string("failover"), hlc: HLC(rawValue: 1 << 41))]
        )
        _ = try await clients[0].push(body: Array(try JSONEncoder().encode(request)))
        let deadline = Task {
            try await Task.sleep(for: .seconds(20))
            stream.cancel()
        }
        let missed = await stream.value
        deadline.cancel()
        #expect(missed == nil, "a push through instance 0 did not reach a stream open on instance 1 within 20 s: \(missed ?? "")")
    }

    /// The stream saw the push it waited for.
    private struct Arrived: Error {}

    /// `serve`'s arguments besides the storage: no rate limit or key quota in the way of the
    /// devices' pushes (each a new key), the router's log lines shown.
    static let serveArguments = ["--rate-limit", "1000000", "--max-keys-per-suite", "1000000", "--log-level", "info"]

    /// Bad input at start: a standby given as the only host is refused as read-only; a host list
    /// none of which takes writes gets a line per host tried; both exit 1 before serving.
    static func refusesWhatTakesNoWrites(_ cluster: ReplicatedPostgres) async throws {
        let primary = try await offThePool { try cluster.primary() }
        let hosts = cluster.url.split(separator: "@")[1].split(separator: "/")[0].split(separator: ",").map(String.init)
        let standby = try #require(hosts.first { $0 != primary })
        let alone = try await ServerTool.run(["serve", "--port", "0", "--postgres-url", "postgres://postgres@\(standby)/postgres"])
        #expect(alone.status == 1, "\(alone)")
        #expect(alone.stderr.contains("PostgreSQL at \(standby) is read-only"), "\(alone)")
        let none = try await ServerTool.run(["serve", "--port", "0", "--postgres-url", "postgres://postgres@127.0.0.1:1,\(standby)/postgres"])
        #expect(none.status == 1, "\(none)")
        let lines = none.stderr.split(separator: "\n")
        #expect(lines.count == 3 && lines[0].hasPrefix("groupdefaults-server: no host of PostgreSQL takes writes"), "\(none)")
        #expect(lines.count == 3 && lines[1].contains("127.0.0.1:1: connection refused") && lines[2].contains("\(standby) is read-only"), "\(none)")
    }

    /// Waits until `condition` holds, checking it every 50 ms, at most `timeout`.
    static func until(timeout: Duration = .seconds(30), _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else { throw FixtureError("not within \(timeout)") }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
