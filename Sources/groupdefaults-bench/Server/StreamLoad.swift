import Foundation
import Glibc
import ServerLaunching

/// `groupdefaults-bench server --streams N[,N…]`: N open event streams on one server (embedded
/// storage, or a throwaway PostgreSQL: `database`), one suite and device id each, spread over
/// `accounts` accounts and several loopback source addresses, and a steady rate of single-op
/// pushes, each to a random stream's suite. The client is `Tools/bench-streams/load.py` (Python's
/// asyncio, raw sockets: one process holds many thousands of connections in little memory); this
/// side starts the server, makes the tokens, runs the client and turns what it prints into rows.
struct StreamLoad {
    /// Accounts the streams are spread over, each with one token.
    static let accounts = 50
    static let script = "Tools/bench-streams/load.py"

    let serverExecutable: String
    let sandbox: Sandbox
    let streams: Int
    /// The server's PostgreSQL, or nil for embedded storage in the sandbox.
    var database: ThrowawayPostgres?
    var pushesPerSecond = 200
    var seconds = 10

    /// What the client prints (its JSON, snake_case).
    struct Measured: Decodable {
        var streams: Int
        var accounts: Int
        var sources: Int
        var openSeconds: Double
        var rssBeforeKib: Double
        var rssOpenKib: Double
        var kibPerStream: Double
        var idleSeconds: Double
        var idleEvents: Int
        var idleServerCores: Double
        var idlePostgresCores: Double?
        var pushes: Int
        var pushErrors: [String]
        var woken: Int
        var missed: Int
        var wakeP50Ms: Double?
        var wakeP99Ms: Double?
        var serverCores: Double
        var postgresCores: Double?
    }

    func run() throws -> [ServerReport.Row] {
        guard FileManager.default.isReadableFile(atPath: Self.script) else {
            throw BenchError("no \(Self.script): run from the package's directory (Tools/bench server does)")
        }
        // Each stream is a socket on both sides (the client and the server inherit this limit).
        try ProcessStats.raiseOpenFileLimit(atLeast: streams + 1_000)
        let storage = try database.map { ["--postgres-url", $0.url] } ?? ["--data-dir", try sandbox.makeDirectory("streams-\(streams)")]
        let backend = database == nil ? "embedded" : "PostgreSQL"
        var tokens: [String] = []
        for account in 0..<Self.accounts {
            tokens.append(try ServerProcess.createToken(executable: serverExecutable, storage: storage, account: "load-\(account)"))
        }
        let tokenFile = sandbox.root + "/streams-\(streams).tokens"
        guard
            FileManager.default.createFile(
                atPath: tokenFile,
                contents: Data(tokens.joined(separator: "\n").utf8),
                attributes: [.posixPermissions: 0o600]
            )
        else { throw BenchError("cannot write \(tokenFile)") }
        let server = try ServerProcess(
            executable: serverExecutable,
            storage: storage + ["--max-connections", String(streams + 1_000)]
        )
        let result: Spawn.Result
        do {
            let postmaster = database?.postmaster.map { ["--postgres-pid", String($0)] } ?? []
            result = try Spawn.run(
                "/usr/bin/python3",
                [
                    Self.script, "--port", String(server.port), "--server-pid", String(server.pid), "--tokens", tokenFile,
                    "--streams", String(streams), "--rate", String(pushesPerSecond), "--seconds", String(seconds),
                ] + postmaster,
                captureOutput: true
            )
            try server.stop()
        } catch {
            try? server.stop()
            throw error
        }
        guard result.status == 0, let line = result.output.split(separator: "\n").last else {
            throw BenchError("\(Self.script) failed (exit \(result.status)): \(result.output)")
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let measured = try decoder.decode(Measured.self, from: Data(line.utf8))
        guard measured.pushErrors.isEmpty else { throw BenchError("pushes were refused: \(measured.pushErrors)") }
        let label = "\(ServerFormat.count(Double(streams))) open event streams (\(measured.accounts) accounts)"
        return [
            ServerReport.Row(
                backend: backend,
                measurement: "\(label): server RSS per stream",
                value: measured.kibPerStream,
                unit: "KiB",
                samples: streams,
                reference: "VmRSS \(Self.mib(measured.rssBeforeKib)) before, \(Self.mib(measured.rssOpenKib)) with the streams open",
                target: "≤ 16 KiB",
                met: measured.kibPerStream <= 16,
                detail: "opened in \(String(format: "%.1f", measured.openSeconds)) s from \(measured.sources) loopback address(es); "
                    + "idle for \(Int(measured.idleSeconds)) s: \(measured.idleEvents) events or heartbeats in all, server "
                    + String(format: "%.3f", measured.idleServerCores) + " cores"
                    + (measured.idlePostgresCores.map { ", PostgreSQL " + String(format: "%.3f", $0) + " cores" } ?? "")
            ),
            ServerReport.Row(
                backend: backend,
                measurement: "\(label): push → its stream's event, \(pushesPerSecond) pushes/s to random streams",
                samples: measured.woken,
                p50Ms: measured.wakeP50Ms,
                p99Ms: measured.wakeP99Ms,
                reference: "—",
                target: "p99 ≤ 50 ms",
                met: (measured.wakeP99Ms ?? .infinity) <= 50 && measured.missed == 0,
                detail: "\(measured.pushes) pushes, \(measured.missed) not seen within 5 s; server "
                    + String(format: "%.2f", measured.serverCores) + " cores"
                    + (measured.postgresCores.map { ", PostgreSQL " + String(format: "%.2f", $0) + " cores" } ?? "") + " while pushed"
            ),
        ]
    }

    private static func mib(_ kib: Double) -> String {
        String(format: "%.0f MiB", kib / 1024)
    }
}
