import AsyncHTTPClient
import CLMDBReference
import Dispatch
import Foundation
import Glibc
import ServerLaunching
import Synchronization

/// `groupdefaults-bench server`: the sync server's real executable on loopback, on both storage
/// backends, beside same-run references (durable LMDB commits from C; pgbench's inserts into the
/// same throwaway PostgreSQL).
struct ServerBench {
    static let command = "server"

    struct Options {
        var quick = false
        var json = false
        var markdown = false
        var showHelp = false
        /// The storage backends to measure.
        var backends: Set<String> = ["embedded", "postgres"]

        static let usage = """
            usage: groupdefaults-bench server [--json | --markdown] [--quick] [--only embedded|postgres]
              Starts groupdefaults-server (found next to this executable) on loopback, with embedded
              storage and with a throwaway PostgreSQL (Tools/postgres, from the package's directory).
              --json    print the results as JSON instead of a table
              --markdown  print the table as Markdown (for the README), then its notes
              --quick   short runs and few samples (a smoke test; figures are rough)
              --only    one backend only
            """

        init(parsing arguments: [String]) throws {
            var rest = arguments[...]
            while let argument = rest.popFirst() {
                switch argument {
                case "--json": json = true
                case "--markdown": markdown = true
                case "--quick": quick = true
                case "-h", "--help": showHelp = true
                case "--only":
                    guard let backend = rest.popFirst(), ["embedded", "postgres"].contains(backend) else {
                        throw BenchError("--only takes embedded or postgres\n\(Self.usage)")
                    }
                    backends = [backend]
                default: throw BenchError("unknown argument '\(argument)'\n\(Self.usage)")
                }
            }
        }
    }

    /// How long and how often.
    struct Plan {
        var pushWarmup: Duration
        var pushDuration: Duration
        var wakeSamples: Int
        var streams: Int
        var durableReferenceSeconds: Double
        var pgbenchSeconds: Int

        static let full = Plan(pushWarmup: .milliseconds(500), pushDuration: .seconds(3), wakeSamples: 200, streams: 1_000,
                               durableReferenceSeconds: 3, pgbenchSeconds: 5)
        static let quick = Plan(pushWarmup: .milliseconds(200), pushDuration: .milliseconds(500), wakeSamples: 20, streams: 1_000,
                                durableReferenceSeconds: 0.5, pgbenchSeconds: 1)
    }

    static let batchSizes = [1, 100]
    static let clientCounts = [1, 10, 100]
    /// pgbench's connections: the middle of the client counts, where the embedded target is set.
    static let pgbenchClients = 10

    let options: Options
    let sandbox: Sandbox
    var plan: Plan { options.quick ? .quick : .full }
    /// The disk that holds the sandbox: the embedded store, the durable reference and PostgreSQL's
    /// temporary directory are all on it.
    var disk: DiskStats.Device? { DiskStats.device(holding: sandbox.root) }

    var postgresTool: String { FileManager.default.currentDirectoryPath + "/Tools/postgres" }

    var serverExecutable: String {
        URL(fileURLWithPath: Spawn.executablePath()).deletingLastPathComponent().appendingPathComponent("groupdefaults-server").path
    }

    func run() async throws -> ServerReport {
        guard FileManager.default.isExecutableFile(atPath: serverExecutable) else {
            throw BenchError("no \(serverExecutable): build it (Tools/bench server does)")
        }
        guard FileManager.default.isExecutableFile(atPath: postgresTool) else {
            throw BenchError("no Tools/postgres in the current directory: run from the package's directory (Tools/bench server does)")
        }
        try ProcessStats.raiseOpenFileLimit(atLeast: 2 * plan.streams + 500)

        var report = ServerReport(method: [
            "groupdefaults-server on loopback, release build, \(ProcessInfo.processInfo.activeProcessorCount) cores shared by the server, "
                + "this client (AsyncHTTPClient) and PostgreSQL",
            "push: each client its own device, one request after another, batches of 1 or 100 ops into one suite; "
                + "\(plan.pushDuration) counted after \(plan.pushWarmup) of warm-up; p50/p99 per request",
            "wake-up: \(plan.wakeSamples) samples, each from just before a push is sent to the long-poll's answer "
                + "(changes?since=HEAD&wait=30) or the event parsed (SSE), the waiter parked 10 ms before",
            "memory: the server's VmRSS with \(plan.streams) open event streams minus before, per stream",
            "references: durable LMDB = raw C, one put per commit, fsync per commit (no NOSYNC/NOMETASYNC), same disk; "
                + "pgbench = one INSERT per transaction, -c \(Self.pgbenchClients) -j 2, same PostgreSQL (Tools/postgres: fsync=off)",
        ])
        // A connection per concurrent client, and a few for the wake-ups' waiter and pusher and /metrics.
        let http = SyncAPI.makeHTTPClient(connections: Self.clientCounts.max()! + 8)
        do {
            if options.backends.contains("embedded") { report.rows += try await embedded(http) }
            if options.backends.contains("postgres") { report.rows += try await postgres(http) }
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
        return report
    }

    // MARK: Backends

    private func embedded(_ http: HTTPClient) async throws -> [ServerReport.Row] {
        let referenceBefore = try durableLMDBCommitsPerSecond()
        let writesPerCommit = referenceBefore.writesPerCommit
        let storage = ["--data-dir", try sandbox.makeDirectory("server-data")]
        let token = try ServerProcess.createToken(executable: serverExecutable, storage: storage)
        let server = try ServerProcess(executable: serverExecutable, storage: storage)
        let api = SyncAPI(http: http, baseURL: server.baseURL, token: token)
        let rows = try await singleInstance("embedded", server: server, api: api,
                                            meter: UsageMeter(serverPIDs: [server.pid], disk: disk)) {
            let after = try durableLMDBCommitsPerSecond()
            return ServerReport.Reference(label: "durable LMDB", before: referenceBefore.rate, after: after.rate,
                                          diskWritesPerOp: writesPerCommit.flatMap { before in after.writesPerCommit.map { (before + $0) / 2 } })
        }
        try server.stop()
        return rows
    }

    private func postgres(_ http: HTTPClient) async throws -> [ServerReport.Row] {
        let database = try ThrowawayPostgres(tool: postgresTool)
        defer { try? database.stop() }
        let pgbench = { try database.pgbenchInsertsPerSecond(clients: Self.pgbenchClients, seconds: plan.pgbenchSeconds, scratch: sandbox.root) }
        let referenceBefore = try pgbench()
        let storage = ["--postgres-url", database.url]
        let token = try ServerProcess.createToken(executable: serverExecutable, storage: storage)
        let first = try ServerProcess(executable: serverExecutable, storage: storage)
        let api = SyncAPI(http: http, baseURL: first.baseURL, token: token)
        var rows = try await singleInstance("PostgreSQL", server: first, api: api,
                                            meter: UsageMeter(serverPIDs: [first.pid], postmaster: database.postmaster, disk: disk)) {
            ServerReport.Reference(label: "pgbench INSERT", before: referenceBefore, after: try pgbench())
        }

        // A second instance on the same database: waiters on it, pushes to the first.
        let second = try ServerProcess(executable: serverExecutable, storage: storage)
        try await waitForListeners(database, 2)
        let other = SyncAPI(http: http, baseURL: second.baseURL, token: token)
        let meter = UsageMeter(serverPIDs: [first.pid, second.pid], postmaster: database.postmaster, disk: disk)
        rows.append(try await wakeRow("PostgreSQL", "long-poll wake-up, across 2 instances", cross: true, meter: meter) {
            try await WakeUpLatency(waiter: other, pusher: api, suite: "bench.wake-cross-poll", samples: plan.wakeSamples).longPoll()
        })
        rows.append(try await wakeRow("PostgreSQL", "event-stream wake-up, across 2 instances", cross: true, meter: meter) {
            try await WakeUpLatency(waiter: other, pusher: api, suite: "bench.wake-cross-events", samples: plan.wakeSamples).eventStream()
        })
        try second.stop()
        try first.stop()
        try database.stop()
        return rows
    }

    /// Memory per stream on the fresh server, then push throughput, then wake-ups on one instance.
    /// The reference is measured again by `referenceAfter` once the push figures are in.
    private func singleInstance(_ backend: String, server: ServerProcess, api: SyncAPI, meter: UsageMeter,
                                referenceAfter: () throws -> ServerReport.Reference) async throws -> [ServerReport.Row] {
        var rows: [ServerReport.Row] = []
        let memory = try await StreamMemory(server: server, token: api.token, suite: "bench.memory", count: plan.streams).run()
        rows.append(ServerReport.Row(
            backend: backend, measurement: "memory per open event stream", value: memory.kibPerStream, unit: "KiB",
            samples: memory.streams, target: "≤ 50 KiB", met: memory.kibPerStream <= 50,
            detail: String(format: "VmRSS %.1f MiB before, %.1f MiB with %d streams open", memory.beforeKiB / 1024,
                           memory.afterKiB / 1024, memory.streams)))

        var pushes: [(batch: Int, clients: Int, result: PushThroughput.Result)] = []
        for batch in Self.batchSizes {
            for clients in Self.clientCounts {
                let result = try await PushThroughput(batch: batch, clients: clients).run(
                    api, suite: "bench.push-b\(batch)-c\(clients)", warmup: plan.pushWarmup, duration: plan.pushDuration, usage: meter)
                pushes.append((batch, clients, result))
            }
        }
        let reference = try referenceAfter()
        for (batch, clients, result) in pushes {
            var row = ServerReport.Row(
                backend: backend, measurement: "push, batch \(batch), \(clients) client\(clients == 1 ? "" : "s")",
                value: result.opsPerSecond, unit: "ops/s", samples: result.latencies.count,
                p50Ms: result.latencies.p50 / 1e6, p99Ms: result.latencies.p99 / 1e6,
                reference: reference.text, ratio: result.opsPerSecond / reference.perSecond, usage: result.usage)
            if let disk = result.usage.disk, let referenceWrites = reference.diskWritesPerOp, backend == "embedded" {
                row.detail = String(format: "%.2f disk writes per op, the disk completing %.0f writes/s (the durable reference: %.1f per commit)",
                                    disk.writesPerSecond / result.opsPerSecond, disk.writesPerSecond, referenceWrites)
            }
            if backend == "embedded" && batch == 1 && clients == 10 {
                row.target = "≥ 5,000 ops/s"
                row.met = result.opsPerSecond >= 5_000
            } else if backend == "embedded" && batch == 1 && clients == 100 {
                row.target = "p99 ≤ 50 ms"
                row.met = result.latencies.p99 <= 50e6
            }
            rows.append(row)
        }

        rows.append(try await wakeRow(backend, "long-poll wake-up, one instance", cross: false, meter: meter) {
            try await WakeUpLatency(waiter: api, pusher: api, suite: "bench.wake-poll", samples: plan.wakeSamples).longPoll()
        })
        rows.append(try await wakeRow(backend, "event-stream wake-up, one instance", cross: false, meter: meter) {
            try await WakeUpLatency(waiter: api, pusher: api, suite: "bench.wake-events", samples: plan.wakeSamples).eventStream()
        })
        return rows
    }

    private func wakeRow(_ backend: String, _ measurement: String, cross: Bool, meter: UsageMeter,
                         _ measure: () async throws -> WakeUpLatency.Result) async throws -> ServerReport.Row {
        let usage = meter.start()
        let result = try await measure()
        let p50 = result.woken.p50 / 1e6, p99 = result.woken.p99 / 1e6
        return ServerReport.Row(
            backend: backend, measurement: measurement, samples: result.woken.count, p50Ms: p50, p99Ms: p99,
            target: cross ? "p99 ≤ 100 ms" : "p50 ≤ 5 ms", met: cross ? p99 <= 100 : p50 <= 5, usage: usage.stop(),
            detail: "the push itself was answered after " + ServerFormat.milliseconds(result.pushAnswered.p50 / 1e6) + " (p50), "
                + ServerFormat.milliseconds(result.pushAnswered.p99 / 1e6) + " (p99)")
    }

    // MARK: References and waits

    /// Raw LMDB from C, one put per commit, flushed per commit, in the sandbox (the disk the
    /// embedded server writes to): commits per second, and the disk's writes per commit.
    private func durableLMDBCommitsPerSecond() throws -> (rate: Double, writesPerCommit: Double?) {
        var error = [CChar](repeating: 0, count: 256)
        let usage = UsageMeter(serverPIDs: [], disk: disk).start()
        let rate = gdref_durable_commits_per_second(sandbox.root + "/durable-reference.lmdb", plan.durableReferenceSeconds,
                                                    &error, error.count)
        guard rate > 0 else { throw BenchError("durable LMDB reference: \(String(cBuffer: error))") }
        return (rate, usage.stop().disk.map { $0.writesPerSecond / rate })
    }

    /// Until `count` servers' listening connections have said LISTEN (bounded: 30 s).
    private func waitForListeners(_ database: ThrowawayPostgres, _ count: Int) async throws {
        for _ in 0 ..< 300 {
            if try database.listenerCount() >= count { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchError("the servers' listening connections did not show up in pg_stat_activity")
    }
}

/// Runs `body` to completion from synchronous code (the benchmark's `main` is synchronous: the
/// store's benchmarks time tight loops on the main thread).
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        do {
            let value = try await body()
            outcome.withLock { $0 = .success(value) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}
