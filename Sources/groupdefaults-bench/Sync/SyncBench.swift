import AsyncHTTPClient
import Foundation
import GroupDefaults
import GroupDefaultsSync

/// `groupdefaults-bench sync`: two devices (two suites in two directories, each with its own
/// `SyncEngine`, in this process) and the real `groupdefaults-server` on loopback, embedded storage.
///
/// - Initial sync: a fresh device's first `syncOnce()` of a suite of 10,000 keys (the join: the
///   snapshot's pages, applied in one transaction), beside the same pages fetched and decoded alone.
/// - End to end: `set` on device A → the value readable on device B (B's change feed), both engines
///   in `run()`, one change at a time; beside the server's own push → event-stream wake-up.
/// - The conflict journal: a pull replacing 1,000 pending values, beside one replacing synced ones.
/// - The key history: pushes to a server keeping it, beside one with `--history 0`, both backends
///   (PostgreSQL: a throwaway `Tools/postgres` server).
/// - Idle: requests the server counts (`/metrics`) while both engines run and nothing changes.
/// - Scale: set → readable and the CPU per change, for a suite of 100,000 keys beside one of 100
///   (`ScaleCost`).
struct SyncBench {
    static let command = "sync"

    struct Options {
        var quick = false
        var json = false
        var encrypt = false
        var scale = false
        var showHelp = false

        static let usage = """
            usage: groupdefaults-bench sync [--json] [--quick] [--encrypt | --scale]
              Starts groupdefaults-server (found next to this executable) on loopback, embedded storage,
              and syncs two devices through it; then measures the key history's cost per push on
              both backends (Tools/postgres, from the package's directory, for PostgreSQL).
              --json     print the results as JSON instead of a table
              --quick    few samples (a smoke test; figures are rough)
              --encrypt  only end-to-end encryption's cost: initial sync, set → readable and bytes per
                         entry of an encrypted suite beside a plain one in the same run, and seal + open
              --scale    only the cost of a change in a suite of 100,000 keys beside one of 100 keys
            """

        init(parsing arguments: [String]) throws {
            for argument in arguments {
                switch argument {
                case "--json": json = true
                case "--quick": quick = true
                case "--encrypt": encrypt = true
                case "--scale": scale = true
                case "-h", "--help": showHelp = true
                default: throw BenchError("unknown argument '\(argument)'\n\(Self.usage)")
                }
            }
            if encrypt && scale { throw BenchError("--encrypt and --scale each run alone: choose one\n\(Self.usage)") }
        }
    }

    static let keys = 10_000
    let options: Options
    let sandbox: Sandbox
    var joins: Int { options.quick ? 2 : 5 }
    var changes: Int { options.quick ? 100 : 1_000 }
    var idleSeconds: Int { options.quick ? 2 : 10 }

    var serverExecutable: String {
        URL(fileURLWithPath: Spawn.executablePath()).deletingLastPathComponent().appendingPathComponent("groupdefaults-server").path
    }

    func run() async throws -> ServerReport {
        let dataDirectory = sandbox.root + "/sync-server"
        let storage = ["--data-dir", dataDirectory]
        let token = try ServerProcess.createToken(executable: serverExecutable, storage: storage)
        // Another account's token: a member's device of a suite the first account shares.
        let memberToken = try ServerProcess.createToken(executable: serverExecutable, storage: storage, account: "bench-member")
        // Room for the scale rows' suite of 100,000 keys (10,000 by default).
        let server = try ServerProcess(executable: serverExecutable, storage: storage + ["--max-keys-per-suite", "200000"])
        let tokenFile = sandbox.root + "/sync.token"
        _ = FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600])
        let memberTokenFile = sandbox.root + "/member.token"
        _ = FileManager.default.createFile(atPath: memberTokenFile, contents: Data(memberToken.utf8), attributes: [.posixPermissions: 0o600])
        let http = try SyncClient.makeHTTPClient()
        let api = SyncAPI(http: SyncAPI.makeHTTPClient(connections: 4), baseURL: server.baseURL, token: token)
        do {
            let report = try await measure(server: server, http: http, api: api, tokenFile: tokenFile, memberTokenFile: memberTokenFile)
            try await http.shutdown()
            try await api.http.shutdown()
            try server.stop()
            return report
        } catch {
            // The clients must be shut down before they go, whatever failed; the failure is what is told.
            try? await http.shutdown()
            try? await api.http.shutdown()
            try? server.stop()
            throw error
        }
    }

    private func measure(
        server: ServerProcess,
        http: HTTPClient,
        api: SyncAPI,
        tokenFile: String,
        memberTokenFile: String
    ) async throws
        -> ServerReport
    {
        var report = ServerReport(method: [
            "groupdefaults-bench sync: two devices (two suites in two directories, a SyncEngine each, in this process) and the",
            "real groupdefaults-server on loopback (embedded storage: every acknowledged push flushed). Release build.",
        ])
        let devices = Devices(
            root: sandbox.root,
            server: URL(string: server.baseURL)!,
            tokenFile: tokenFile,
            memberTokenFile: memberTokenFile,
            http: http
        )
        if options.encrypt {
            report.rows += try await EncryptionCost.measure(devices: devices, sandbox: sandbox, joins: joins, changes: changes)
            return report
        }
        if options.scale {
            report.rows += try await ScaleCost.measure(devices: devices, server: server, changes: changes)
            return report
        }

        // Initial sync of 10,000 keys to a fresh device.
        let initial = try await Self.initialSync(devices: devices, suite: "group.bench.initial", keyFile: nil, joins: joins)
        let joinMedian = initial.milliseconds
        let fetchMedian = initial.fetchMilliseconds
        report.rows.append(
            ServerReport.Row(
                backend: "embedded",
                measurement: "initial sync, \(ServerFormat.count(Double(Self.keys))) keys to a fresh device",
                value: joinMedian,
                unit: "ms",
                samples: joins,
                reference: "the snapshot's pages fetched and decoded alone: " + ServerFormat.milliseconds(fetchMedian),
                ratio: joinMedian / fetchMedian,
                target: "≤ 1 s",
                met: joinMedian <= 1000
            )
        )

        report.rows += try await JournalCost.measure(devices: devices, quick: options.quick)
        report.rows += try await HistoryCost.measure(
            serverExecutable: serverExecutable,
            sandbox: sandbox,
            postgresTool: FileManager.default.currentDirectoryPath + "/Tools/postgres",
            quick: options.quick
        )

        // End to end: set on A → readable on B, both running; then idle.
        let endToEnd = try await Self.endToEnd(devices: devices, suite: "group.bench.live", keyFile: nil, changes: changes) { phone, tablet in
            try await Self.waitUntilAgreed(phone.defaults, tablet.defaults)
            let before = try await Self.syncRequests(api)
            try await Task.sleep(for: .seconds(idleSeconds))
            let idle = try await Self.syncRequests(api) - before
            report.rows.append(
                ServerReport.Row(
                    backend: "embedded",
                    measurement: "requests while idle for \(idleSeconds) s (push, changes, snapshot)",
                    value: idle,
                    unit: "requests",
                    reference: "—",
                    target: "0",
                    met: idle == 0,
                    detail: "counted by the server (GET /metrics, hb_requests by route), both engines holding their event stream open"
                )
            )
        }
        let wake = try await WakeUpLatency(waiter: api, pusher: api, suite: "group.bench.reference", samples: min(200, changes)).eventStream()
        report.rows.append(
            ServerReport.Row(
                backend: "embedded",
                measurement: "set on A → readable on B, both in run()",
                samples: changes,
                p50Ms: endToEnd.p50 / 1e6,
                p99Ms: endToEnd.p99 / 1e6,
                reference: "server alone, push → event p50 \(ServerFormat.milliseconds(wake.woken.p50 / 1e6)), p99 "
                    + "\(ServerFormat.milliseconds(wake.woken.p99 / 1e6)) (etcd's watch: `groupdefaults-bench server`)",
                ratio: endToEnd.p50 / wake.woken.p50,
                target: "p50 ≤ 20 ms, p99 ≤ 100 ms",
                met: endToEnd.p50 <= 20e6 && endToEnd.p99 <= 100e6
            )
        )
        // The same between two accounts: A the owner's device, B a write member's.
        let shared = try await Self.endToEnd(devices: devices, suite: "group.bench.shared", keyFile: nil, changes: changes, member: true)
        let ratio = max(shared.p50 / endToEnd.p50, shared.p99 / endToEnd.p99)
        report.rows.append(
            ServerReport.Row(
                backend: "embedded",
                measurement: "set on A → readable on B, B another account's device (a member of A's suite)",
                samples: changes,
                p50Ms: shared.p50 / 1e6,
                p99Ms: shared.p99 / 1e6,
                reference: "two devices of one account (the row above), p50 \(ServerFormat.milliseconds(endToEnd.p50 / 1e6)), p99 "
                    + ServerFormat.milliseconds(endToEnd.p99 / 1e6),
                ratio: ratio,
                target: "p50 and p99 ≤ 1.2× one account's",
                met: ratio <= 1.2,
                detail: "ratio: the larger of p50/p50 and p99/p99"
            )
        )
        // The idle row, measured after the latencies, comes last.
        report.rows.append(report.rows.remove(at: report.rows.count - 3))
        report.rows.insert(contentsOf: try await ScaleCost.measure(devices: devices, server: server, changes: changes), at: report.rows.count - 1)
        return report
    }

    /// A fresh device's first `syncOnce()` of a suite of `keys` keys (uploaded first by another
    /// device), the median of `joins`; beside the snapshot's pages fetched alone, and the bytes the
    /// server stores per entry (key and value as the quota counts them).
    static func initialSync(
        devices: Devices,
        suite: String,
        keyFile: String?,
        joins: Int
    ) async throws
        -> (milliseconds: Double, fetchMilliseconds: Double, bytesPerEntry: Double)
    {
        let source = try devices.make("source-\(suite)", suite: suite, keyFile: keyFile)
        try await source.defaults.write { tx in
            for index in 0..<Self.keys { try tx.set(SyncBench.value(index), forKey: String(format: "setting.%05d", index)) }
        }
        let uploaded = try await source.engine.syncOnce()
        guard uploaded.pushed == Self.keys, uploaded.isInAgreement else { throw BenchError("the upload of \(Self.keys) keys: \(uploaded)") }
        var joinTimes: [Double] = []
        var fetchTimes: [Double] = []
        for attempt in 0..<joins {
            let fresh = try devices.make("fresh-\(attempt)-\(suite)", suite: suite, keyFile: keyFile)
            let start = Clock.nanoseconds()
            let joined = try await fresh.engine.syncOnce()
            joinTimes.append(Double(Clock.nanoseconds() - start) / 1e6)
            let held = try await fresh.defaults.read { try $0.keys.count }
            guard joined.applied == Self.keys, held == Self.keys else {
                throw BenchError("a fresh device got \(joined.applied) of \(Self.keys) keys")
            }
            fetchTimes.append(try await Self.fetchSnapshot(fresh.engine.client) / 1e6)
        }
        var bytes = 0
        var entries = 0
        var after: String? = nil
        repeat {
            let page = try await source.engine.client.snapshot(after: after, limit: 1000)
            for entry in page.entries {
                let stored = try entry.sealed?.box.count ?? entry.value.map { try $0.typedJSON().count } ?? 0
                bytes += entry.key.utf8.count + stored
                entries += 1
            }
            after = page.next
        } while after != nil
        return (median(joinTimes), median(fetchTimes), Double(bytes) / Double(max(1, entries)))
    }

    /// Set on A → readable on B, both engines in `run()`, one change at a time, `changes` times;
    /// then `whileRunning` with both still running. With `preload`, both devices first hold a suite
    /// of that many other keys (written on A, uploaded, taken by B's join). `aroundChanges` runs
    /// the changes (to measure what they cost).
    static func endToEnd(
        devices: Devices,
        suite: String,
        keyFile: String?,
        changes: Int,
        preload: Int = 0,
        member: Bool = false,
        whileRunning: (_ phone: (defaults: SharedDefaults, engine: SyncEngine), _ tablet: (defaults: SharedDefaults, engine: SyncEngine)) async throws
            -> Void = { _, _ in },
        aroundChanges: (_ changes: () async throws -> Void) async throws -> Void = { try await $0() }
    ) async throws -> Latencies {
        let phone = try devices.make("phone-\(suite)", suite: suite, keyFile: keyFile)
        let tablet =
            member
            ? try await devices.makeMember("tablet-\(suite)", suite: suite, invitedBy: phone.engine)
            : try devices.make("tablet-\(suite)", suite: suite, keyFile: keyFile)
        if preload > 0 {
            try await phone.defaults.write { tx in
                for index in 0..<preload { try tx.set(SyncBench.value(index), forKey: String(format: "setting.%06d", index)) }
            }
        }
        let uploaded = try await phone.engine.syncOnce()
        let joined = try await tablet.engine.syncOnce()
        guard uploaded.isInAgreement, joined.isInAgreement, try await tablet.defaults.read({ try $0.keys.count }) == preload else {
            throw BenchError("the suite of \(preload) keys did not reach the second device: \(uploaded), \(joined)")
        }
        let running = [Task { await phone.engine.run() }, Task { await tablet.engine.run() }]
        defer { for task in running { task.cancel() } }
        try await Self.waitUntilListening(phone.engine, tablet.engine)
        var seen = tablet.defaults.changes(forKeys: ["sound"]).makeAsyncIterator()
        var latencies: [Int64] = []
        try await aroundChanges {
            for index in 0..<changes {
                let start = Clock.nanoseconds()
                phone.defaults.set("sound-\(index).caf", forKey: "sound")
                while let change = await seen.next() {
                    if change.isRemote, change.value == .string("sound-\(index).caf") { break }
                }
                latencies.append(Clock.nanoseconds() - start)
            }
        }
        try await whileRunning(phone, tablet)
        for task in running { task.cancel() }
        for task in running { await task.value }
        return Latencies(latencies)
    }

    /// A typical settings value: strings, numbers and flags.
    static func value(_ index: Int) -> PropertyListValue {
        switch index % 3 {
        case 0: .string("value-\(index)")
        case 1: .integer(index)
        default: .bool(index % 2 == 0)
        }
    }

    /// The snapshot's pages through the same client, nothing stored: nanoseconds.
    static func fetchSnapshot(_ client: SyncClient) async throws -> Double {
        let start = Clock.nanoseconds()
        var after: String? = nil
        repeat { after = try await client.snapshot(after: after, limit: 1000).next } while after != nil
        return Double(Clock.nanoseconds() - start)
    }

    static func waitUntilListening(_ engines: SyncEngine...) async throws {
        for engine in engines {
            for await status in await engine.statusUpdates() where status.isListening { break }
        }
    }

    /// Until neither device has pending changes and both hold the same value (at most 10 s).
    static func waitUntilAgreed(_ a: SharedDefaults, _ b: SharedDefaults) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if try a.pendingCount() == 0, try b.pendingCount() == 0, a.value(forKey: "sound") == b.value(forKey: "sound") {
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw BenchError("the two devices did not agree within 10 s")
    }

    /// The server's count of push, changes and snapshot requests so far.
    static func syncRequests(_ api: SyncAPI) async throws -> Double {
        let text = try await api.metricsText()
        return text.split(separator: "\n").filter { line in
            line.hasPrefix("hb_requests{") && ["/push\"", "/changes\"", "/snapshot\""].contains { line.contains($0) }
        }.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
    }
}

/// The devices of the benchmark: a suite each, in its own directory, configured for the server.
struct Devices {
    let root: String
    let server: URL
    let tokenFile: String
    /// Another account's token.
    let memberTokenFile: String
    let http: HTTPClient

    /// A device of the other account, joined to `suite` as a `write` member with an invitation
    /// from `owner` (a device of the suite's owner).
    func makeMember(_ name: String, suite: String, invitedBy owner: SyncEngine) async throws -> (defaults: SharedDefaults, engine: SyncEngine) {
        let (code, _) = try await owner.sharing.share(role: .write)
        let directory = URL(fileURLWithPath: "\(root)/devices/\(name)")
        _ = try await SyncSetup(server: server, tokenFile: memberTokenFile).join(invitation: code, localName: suite, directory: directory)
        let defaults = try SharedDefaults(existingSuiteName: suite, directory: directory)
        return (defaults, try SyncEngine(configured: defaults, http: http))
    }

    func make(_ name: String, suite: String, keyFile: String? = nil) throws -> (defaults: SharedDefaults, engine: SyncEngine) {
        let defaults = try SharedDefaults(suiteName: suite, directory: URL(fileURLWithPath: "\(root)/devices/\(name)"))
        try SyncSettings(server: server, tokenFile: tokenFile, keyFile: keyFile).store(in: defaults)
        return (defaults, try SyncEngine(configured: defaults, http: http))
    }
}
