import AsyncHTTPClient
import Foundation
import ServerLaunching

/// Fan-out across instances on one PostgreSQL: every push's `NOTIFY` reaches every instance's
/// listening connection, and PostgreSQL serialises notifying commits behind one lock, so the cost
/// may grow with instances × pushes.
///
/// For each instance count: that many servers on the same database, each listening; wrk's
/// single-op pushes through the first, `connections` connections into one suite (the load of the
/// one-instance rows, so that what changes from row to row is only the instances that each
/// notification reaches); while they run, wake-ups through an event stream open on the last
/// instance, each push sent through the first (the same instance when there is one). Pushes shared
/// out among the instances would measure something else as well: each instance's suites would
/// get fewer pushes at once, and the server writes the pushes that wait on one suite together.
struct FanOut {
    let serverExecutable: String
    let storage: [String]
    let token: String
    let database: ThrowawayPostgres
    let connections: Int
    let seconds: Int
    let wakeSamples: Int
    let scratch: String
    let disk: DiskStats.Device?

    struct Result {
        var instances: Int
        var pushesPerSecond: Double
        var wake: WakeUpLatency.Result
        /// Cores busy while wrk's counted run ran (every instance, PostgreSQL, the benchmark).
        var usage: Usage
        /// PostgreSQL's CPU per push, in microseconds.
        var postgresMicrosecondsPerPush: Double { (usage.postgres ?? 0) * 1e6 / pushesPerSecond }
    }

    func run(instances count: Int, http: HTTPClient) async throws -> Result {
        var servers: [ServerProcess] = []
        defer { for server in servers { try? server.stop() } }
        for _ in 0..<count { servers.append(try ServerProcess(executable: serverExecutable, storage: storage)) }
        try await Self.waitForListeners(database, count)
        let meter = UsageMeter(serverPIDs: servers.map(\.pid), postmaster: database.postmaster, disk: disk)
        let load = WrkLoad(target: .push(suite: "bench.fan\(count)", token: token), connections: connections)
        let baseURL = servers[0].baseURL
        let (seconds, scratch) = (self.seconds, self.scratch)
        let pushes = Self.inBackground { try load.run(baseURL: baseURL, seconds: seconds, scratch: scratch, meter: meter) }
        // The wake-ups start once wrk's one-second warm-up is over, and take less than its counted run.
        try await Task.sleep(for: .milliseconds(1_200))
        let wake = try await WakeUpLatency(
            waiter: SyncAPI(http: http, baseURL: servers[count - 1].baseURL, token: token),
            pusher: SyncAPI(http: http, baseURL: servers[0].baseURL, token: token),
            suite: "bench.fan\(count)-wake",
            samples: wakeSamples
        ).eventStream()
        let result = try await pushes.value
        for server in servers { try server.stop() }
        servers = []
        return Result(instances: count, pushesPerSecond: result.requestsPerSecond, wake: wake, usage: result.usage)
    }

    /// `body` on a thread of its own (a wrk run is synchronous, and the wake-ups run meanwhile).
    private static func inBackground<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> Task<T, any Error> {
        Task {
            try await withCheckedThrowingContinuation { continuation in
                Thread.detachNewThread { continuation.resume(with: Swift.Result { try body() }) }
            }
        }
    }

    /// Until exactly `count` servers' listening connections have said LISTEN (those of servers
    /// stopped before gone; bounded: 30 s).
    static func waitForListeners(_ database: ThrowawayPostgres, _ count: Int) async throws {
        for _ in 0..<300 {
            if try database.listenerCount() == count { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchError("the servers' listening connections did not show up in pg_stat_activity")
    }
}
