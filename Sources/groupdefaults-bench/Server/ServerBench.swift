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
        /// With `--streams`: only the open-streams load, at these counts.
        var streamCounts: [Int]?

        static let usage = """
            usage: groupdefaults-bench server [--json | --markdown] [--quick] [--only embedded|postgres] [--streams N[,N…]]
              Starts groupdefaults-server (found next to this executable) on loopback, with embedded
              storage and with a throwaway PostgreSQL (Tools/postgres, from the package's directory).
              --json    print the results as JSON instead of a table
              --markdown  print the table as Markdown (for docs/reference/performance.md), then its notes
              --quick   short runs and few samples (a smoke test; figures are rough)
              --only    one backend only
              --streams only the open-streams load (Tools/bench-streams/load.py) with N streams each time,
                        e.g. --streams 1000,10000,100000 (the whole run does 10,000; --quick 1,000), on both
                        backends unless --only names one
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
                case "--streams":
                    let counts = rest.popFirst()?.split(separator: ",").compactMap { Int($0) } ?? []
                    guard !counts.isEmpty, counts.allSatisfy({ $0 >= 1 }) else {
                        throw BenchError("--streams takes counts of streams, such as 1000,10000\n\(Self.usage)")
                    }
                    streamCounts = counts
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
        /// Each wrk run (ours and etcd's), after a one-second warm-up.
        var wrkSeconds: Int

        static let full = Plan(
            pushWarmup: .milliseconds(500),
            pushDuration: .seconds(3),
            wakeSamples: 200,
            streams: 1_000,
            durableReferenceSeconds: 3,
            pgbenchSeconds: 5,
            wrkSeconds: 5
        )
        static let quick = Plan(
            pushWarmup: .milliseconds(200),
            pushDuration: .milliseconds(500),
            wakeSamples: 20,
            streams: 1_000,
            durableReferenceSeconds: 0.5,
            pgbenchSeconds: 1,
            wrkSeconds: 1
        )
    }

    /// Single-op pushes run with wrk (beside etcd's puts); batches of this size with our client.
    static let batchSize = 100
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
        if let counts = options.streamCounts {
            var report = ServerReport(method: Self.streamLoadMethod)
            report.rows += try streamLoads(counts: counts)
            return report
        }
        try ProcessStats.raiseOpenFileLimit(atLeast: 2 * plan.streams + 500)

        guard FileManager.default.isExecutableFile(atPath: WrkLoad.executable) else {
            throw BenchError("no \(WrkLoad.executable): install Debian's wrk (Tools/install-deps bench does)")
        }
        var report = ServerReport(method: [
            "groupdefaults-server on loopback, release build, \(ProcessInfo.processInfo.activeProcessorCount) cores shared by the server, "
                + "the load generator and PostgreSQL",
            "single-op pushes: wrk (LuaJIT script: each thread a device of its own, each request one op with the current HLC), "
                + "1, 10 or 100 connections, \(plan.wrkSeconds) s counted after 1 s of warm-up, into one suite; "
                + "etcd's puts with the same wrk, the same connection counts and the same value size",
            "batches of \(Self.batchSize): each client (AsyncHTTPClient) its own device, one request after another, into one suite; "
                + "\(plan.pushDuration) counted after \(plan.pushWarmup) of warm-up; p50/p99 per request",
            "wake-up: \(plan.wakeSamples) samples, each from just before a push is sent to the long-poll's answer "
                + "(changes?since=HEAD&wait=30) or the event parsed (SSE), the waiter parked 10 ms before; "
                + "etcd: from just before a put to its watch event parsed (POST /v3/watch)",
            "memory: the server's VmRSS with \(plan.streams) open event streams minus before, per stream; etcd's with \(plan.streams) open watches (POST /v3/watch, a connection each), the same way",
            "references, each measured just before and just after a backend's figures: etcd 3.4 (Debian's etcd-server, one member on "
                + "loopback, its data on the same disk, default durability); durable LMDB = raw C, one put per commit, fsync per commit "
                + "(no NOSYNC/NOMETASYNC), same disk; pgbench = one INSERT per transaction, -c \(Self.pgbenchClients) -j 2, "
                + "same PostgreSQL (Tools/postgres: fsync=off); the push floor = Tools/bench-files/push-floor.sql, the statements "
                + "of a one-op push, pgbench -M prepared -c \(SingleInstance.cpuConnections) -j 2, same PostgreSQL",
            "fan-out: 1, 2 or 4 instances on one PostgreSQL, each listening; wrk's single-op pushes through the first "
                + "(\(SingleInstance.cpuConnections) connections, one suite), and meanwhile event-stream wake-ups on the last",
            "synchronous commit: Tools/postgres-ha (a primary, its synchronous standby, pg_auto_failover's monitor; fsync on), "
                + "one instance, wrk at \(SingleInstance.cpuConnections) connections, synchronous_commit = on, then = local",
        ])
        // A connection per concurrent client, and a few for the wake-ups' waiter and pusher and /metrics.
        let http = SyncAPI.makeHTTPClient(connections: Self.clientCounts.max()! + 8)
        do {
            if options.backends.contains("embedded") { report.rows += try await embedded(http) }
            if options.backends.contains("postgres") { report.rows += try await postgres(http) }
            report.method += Self.streamLoadMethod
            report.rows += try streamLoads(counts: [options.quick ? 1_000 : 10_000])
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
        return report
    }

    /// The open-streams rows: each count on each backend measured, the server alone (a throwaway
    /// PostgreSQL of its own for each count, as the embedded store has a directory of its own).
    private func streamLoads(counts: [Int]) throws -> [ServerReport.Row] {
        var rows: [ServerReport.Row] = []
        for backend in ["embedded", "postgres"] where options.backends.contains(backend) {
            for count in counts {
                let database = backend == "postgres" ? try ThrowawayPostgres(tool: postgresTool) : nil
                defer { try? database?.stop() }
                rows += try StreamLoad(serverExecutable: serverExecutable, sandbox: sandbox, streams: count, database: database).run()
            }
        }
        return rows
    }

    /// How the open-streams rows are made.
    static let streamLoadMethod = [
        "open streams: groupdefaults-server alone on loopback (embedded storage, then a throwaway PostgreSQL) and Tools/bench-streams/load.py (asyncio, raw sockets) "
            + "holding N event streams, one suite each, over \(StreamLoad.accounts) accounts and one loopback source address per "
            + "20,000 streams; RSS from /proc before and with the streams open; idle for 15 s (one heartbeat each); then 200 "
            + "single-op pushes a second for 10 s, each to a random stream's suite, timed from just before the push is sent to the "
            + "line of its event read; CPU of the server (and of PostgreSQL's processes) from /proc"
    ]

    // MARK: Backends

    private func embedded(_ http: HTTPClient) async throws -> [ServerReport.Row] {
        let etcdBefore = try await etcd(http)
        let referenceBefore = try durableLMDBCommitsPerSecond()
        let writesPerCommit = referenceBefore.writesPerCommit
        let storage = ["--data-dir", try sandbox.makeDirectory("server-data")]
        let token = try ServerProcess.createToken(executable: serverExecutable, storage: storage)
        let server = try ServerProcess(executable: serverExecutable, storage: storage)
        let api = SyncAPI(http: http, baseURL: server.baseURL, token: token)
        let measured = try await singleInstance(server: server, api: api, meter: UsageMeter(serverPIDs: [server.pid], disk: disk))
        try server.stop()
        let after = try durableLMDBCommitsPerSecond()
        let reference = ServerReport.Reference(
            label: "durable LMDB",
            before: referenceBefore.rate,
            after: after.rate,
            diskWritesPerOp: writesPerCommit.flatMap { before in after.writesPerCommit.map { (before + $0) / 2 } }
        )
        let etcd = EtcdReference(before: etcdBefore, after: try await self.etcd(http))
        return measured.rows("embedded", etcd: etcd, batchReference: reference)
    }

    private func postgres(_ http: HTTPClient) async throws -> [ServerReport.Row] {
        let etcdBefore = try await etcd(http)
        let database = try ThrowawayPostgres(tool: postgresTool)
        defer { try? database.stop() }
        let pgbench = { try database.pgbenchInsertsPerSecond(clients: Self.pgbenchClients, seconds: plan.pgbenchSeconds, scratch: sandbox.root) }
        let referenceBefore = try pgbench()
        let storage = ["--postgres-url", database.url]
        let token = try ServerProcess.createToken(executable: serverExecutable, storage: storage)
        // The floor runs on the schema the token's store made, with no server running.
        let floor = { try database.pgbenchPushFloor(clients: SingleInstance.cpuConnections, seconds: plan.pgbenchSeconds, files: benchFiles) }
        let floorBefore = try floor()
        let first = try ServerProcess(executable: serverExecutable, storage: storage)
        let api = SyncAPI(http: http, baseURL: first.baseURL, token: token)
        let measured = try await singleInstance(
            server: first,
            api: api,
            meter: UsageMeter(serverPIDs: [first.pid], postmaster: database.postmaster, disk: disk)
        )

        // A second instance on the same database: waiters on it, pushes to the first.
        let second = try ServerProcess(executable: serverExecutable, storage: storage)
        try await FanOut.waitForListeners(database, 2)
        let other = SyncAPI(http: http, baseURL: second.baseURL, token: token)
        let meter = UsageMeter(serverPIDs: [first.pid, second.pid], postmaster: database.postmaster, disk: disk)
        let crossPoll = try await WakeUpLatency(waiter: other, pusher: api, suite: "bench.wake-cross-poll", samples: plan.wakeSamples)
            .metered(meter) { try await $0.longPoll() }
        let crossEvents = try await WakeUpLatency(waiter: other, pusher: api, suite: "bench.wake-cross-events", samples: plan.wakeSamples)
            .metered(meter) { try await $0.eventStream() }
        try second.stop()
        try first.stop()
        let floorReference = ServerReport.Reference(label: "pgbench push floor", before: floorBefore, after: try floor())

        let fanOut = FanOut(
            serverExecutable: serverExecutable,
            storage: storage,
            token: token,
            database: database,
            connections: SingleInstance.cpuConnections,
            seconds: plan.wrkSeconds,
            wakeSamples: plan.wakeSamples,
            scratch: sandbox.root,
            disk: disk
        )
        var spread: [FanOut.Result] = []
        for instances in Self.fanOutInstances { spread.append(try await fanOut.run(instances: instances, http: http)) }

        let reference = ServerReport.Reference(label: "pgbench INSERT", before: referenceBefore, after: try pgbench())
        try database.stop()
        let synchronousCommit = try SynchronousCommitCost(
            serverExecutable: serverExecutable,
            tool: FileManager.default.currentDirectoryPath + "/Tools/postgres-ha",
            connections: SingleInstance.cpuConnections,
            seconds: plan.wrkSeconds,
            scratch: sandbox.root
        ).run()
        let etcd = EtcdReference(before: etcdBefore, after: try await self.etcd(http))
        return measured.rows("PostgreSQL", etcd: etcd, batchReference: reference)
            + measured.floorRows(floorReference)
            + [
                etcd.wakeRow("PostgreSQL", "long-poll wake-up, across 2 instances", crossPoll, targetMs: 5),
                etcd.wakeRow("PostgreSQL", "event-stream wake-up, across 2 instances", crossEvents, targetMs: 5),
            ]
            + FanOut.rows(spread) + [synchronousCommit]
    }

    /// The instance counts of the fan-out rows.
    static let fanOutInstances = [1, 2, 4]

    /// `Tools/bench-files`: the pgbench scripts of the push floor.
    var benchFiles: String { FileManager.default.currentDirectoryPath + "/Tools/bench-files" }

    /// Memory per stream on the fresh server, then single-op pushes (wrk), batches of 100 (our
    /// client), then wake-ups on one instance.
    private func singleInstance(server: ServerProcess, api: SyncAPI, meter: UsageMeter) async throws -> SingleInstance {
        var measured = SingleInstance()
        measured.memory = try await StreamMemory(server: server, token: api.token, suite: "bench.memory", count: plan.streams).run()
        for clients in Self.clientCounts {
            measured.singleOp[clients] = try WrkLoad(target: .push(suite: "bench.wrk-c\(clients)", token: api.token), connections: clients)
                .run(baseURL: server.baseURL, seconds: plan.wrkSeconds, scratch: sandbox.root, meter: meter)
        }
        for clients in Self.clientCounts {
            measured.batches.append(
                (
                    clients,
                    try await PushThroughput(batch: Self.batchSize, clients: clients).run(
                        api,
                        suite: "bench.push-b\(Self.batchSize)-c\(clients)",
                        warmup: plan.pushWarmup,
                        duration: plan.pushDuration,
                        usage: meter
                    )
                )
            )
        }
        measured.longPoll = try await WakeUpLatency(waiter: api, pusher: api, suite: "bench.wake-poll", samples: plan.wakeSamples)
            .metered(meter) { try await $0.longPoll() }
        measured.eventStream = try await WakeUpLatency(waiter: api, pusher: api, suite: "bench.wake-events", samples: plan.wakeSamples)
            .metered(meter) { try await $0.eventStream() }
        return measured
    }

    /// etcd's figures on a fresh member: single-key puts with wrk at each connection count, then
    /// watch latency. The member is stopped afterwards, so that it takes nothing from our figures.
    private func etcd(_ http: HTTPClient) async throws -> EtcdFigures {
        let directory = try sandbox.makeDirectory("etcd-" + String(UInt32.random(in: .min ... .max), radix: 36))
        let etcd = try await ThrowawayEtcd(directory: directory, http: http)
        defer { etcd.stop() }
        let meter = UsageMeter(serverPIDs: [etcd.pid], disk: disk)
        var puts: [Int: WrkLoad.Result] = [:]
        for clients in Self.clientCounts {
            puts[clients] = try WrkLoad(target: .etcdPut, connections: clients)
                .run(baseURL: etcd.baseURL, seconds: plan.wrkSeconds, scratch: sandbox.root, meter: meter)
        }
        let watch = try await EtcdWatchLatency(http: http, baseURL: etcd.baseURL, samples: plan.wakeSamples).metered(meter) { try await $0.run() }
        let memory = try await EtcdWatchMemory(pid: etcd.pid, baseURL: etcd.baseURL, count: plan.streams).run()
        return EtcdFigures(puts: puts, watch: watch, watchMemory: memory)
    }

    // MARK: References and waits

    /// Raw LMDB from C, one put per commit, flushed per commit, in the sandbox (the disk the
    /// embedded server writes to): commits per second, and the disk's writes per commit.
    private func durableLMDBCommitsPerSecond() throws -> (rate: Double, writesPerCommit: Double?) {
        var error = [CChar](repeating: 0, count: 256)
        let usage = UsageMeter(serverPIDs: [], disk: disk).start()
        let rate = gdref_durable_commits_per_second(
            sandbox.root + "/durable-reference.lmdb",
            plan.durableReferenceSeconds,
            &error,
            error.count
        )
        guard rate > 0 else { throw BenchError("durable LMDB reference: \(String(cBuffer: error))") }
        return (rate, usage.stop().disk.map { $0.writesPerSecond / rate })
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
