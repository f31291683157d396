import AsyncHTTPClient
import Foundation
import ServerLaunching

/// What the key history costs a push (`groupdefaults-bench sync`), on both backends: two servers
/// side by side on the same storage kind, one keeping history (`--history 10`, the default) and
/// one not (`--history 0`), pushed alternately by one client in rounds (batches of 1 and of 100
/// ops). Each client cycles through 100 keys, so that after the warm-up every key has its full
/// history and each push also trims it: the steady state of a long-lived suite.
enum HistoryCost {
    static let depth = 10
    static let keySpace = 100

    static func measure(serverExecutable: String, sandbox: Sandbox, postgresTool: String, quick: Bool) async throws -> [ServerReport.Row] {
        var rows: [ServerReport.Row] = []
        let http = SyncAPI.makeHTTPClient(connections: 4)
        do {
            rows += try await compare(backend: "embedded", serverExecutable: serverExecutable, quick: quick, http: http) { history in
                ["--data-dir", try sandbox.makeDirectory("history-\(history)")]
            }
            let database = try ThrowawayPostgres(tool: postgresTool)
            defer { try? database.stop() }
            rows += try await compare(backend: "PostgreSQL", serverExecutable: serverExecutable, quick: quick, http: http) { _ in
                ["--postgres-url", database.url]
            }
            try await http.shutdown()
        } catch {
            try? await http.shutdown()
            throw error
        }
        return rows
    }

    private static func compare(
        backend: String,
        serverExecutable: String,
        quick: Bool,
        http: HTTPClient,
        storage: (Int) throws -> [String]
    ) async throws -> [ServerReport.Row] {
        var apis: [Int: SyncAPI] = [:]
        var servers: [ServerProcess] = []
        defer { for server in servers { try? server.stop() } }
        for history in [depth, 0] {
            let place = try storage(history)
            let token = try ServerProcess.createToken(executable: serverExecutable, storage: place)
            let server = try ServerProcess(executable: serverExecutable, storage: place + ["--history", String(history)])
            servers.append(server)
            apis[history] = SyncAPI(http: http, baseURL: server.baseURL, token: token)
        }
        let rounds = quick ? 2 : 5
        let round: Duration = quick ? .milliseconds(300) : .seconds(1)
        var rows: [ServerReport.Row] = []
        for batch in [1, 100] {
            let push = PushThroughput(batch: batch, clients: 1, keySpace: max(batch, keySpace))
            // Warm-up: every key gets its full history on both servers.
            for history in [depth, 0] {
                _ = try await push.run(
                    apis[history]!,
                    suite: "group.bench.history-\(history)",
                    warmup: .zero,
                    duration: quick ? .milliseconds(300) : .seconds(2),
                    usage: UsageMeter(serverPIDs: [])
                )
            }
            var rates: [Int: [Double]] = [depth: [], 0: []]
            var p50s: [Int: [Double]] = [depth: [], 0: []]
            for _ in 0..<rounds {
                for history in [depth, 0] {
                    let result = try await push.run(
                        apis[history]!,
                        suite: "group.bench.history-\(history)",
                        warmup: .milliseconds(100),
                        duration: round,
                        usage: UsageMeter(serverPIDs: [])
                    )
                    rates[history]!.append(result.opsPerSecond)
                    p50s[history]!.append(result.latencies.p50)
                }
            }
            let on = median(rates[depth]!)
            let off = median(rates[0]!)
            let ratio = off / on  // time per op with history over without
            rows.append(
                ServerReport.Row(
                    backend: backend,
                    measurement: "push with key history (--history \(depth)), batch \(batch), 1 client",
                    value: on,
                    unit: "ops/s",
                    samples: rounds,
                    p50Ms: median(p50s[depth]!) / 1e6,
                    reference: "--history 0: \(ServerFormat.count(off)) ops/s, p50 \(ServerFormat.milliseconds(median(p50s[0]!) / 1e6))",
                    ratio: ratio,
                    target: "≤ 1.3×",
                    met: ratio <= 1.3,
                    detail: "ratio = time per op with history / without; medians of \(rounds) alternating rounds of \(round), "
                        + "\(max(batch, keySpace)) keys cycled so that every push also trims a full history"
                )
            )
        }
        return rows
    }
}
