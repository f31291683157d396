import Foundation
import Glibc
import ServerLaunching

/// The real `groupdefaults-server` executable, started on loopback for the benchmark (the launcher
/// the tests use too), its stderr shared with the benchmark's.
final class ServerProcess {
    private let server: LaunchedServer

    var port: Int { server.port }
    var pid: pid_t { server.pid }
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// `serve --port 0 --log-level warning --rate-limit … --max-streams-per-token …` with `storage`
    /// (`--data-dir DIR` or `--postgres-url URL`); returns once it printed its `listening on` line.
    /// The rate limit and the stream limit are out of reach (the memory row opens 1,000 streams with
    /// one token): a 429 would only hide what is measured.
    init(executable: String, storage: [String]) throws {
        do {
            server = try LaunchedServer(
                executable: URL(fileURLWithPath: executable),
                arguments: ["--rate-limit", "10000000", "--max-streams-per-token", "100000"] + storage,
                keepsStderr: true
            )
        } catch is ServerStartFailure {
            throw BenchError("\(executable) did not announce its port")
        }
    }

    /// `token create --create … --account ACCOUNT` (`bench` by default): a token for every suite
    /// (the store made if no server made it yet).
    static func createToken(executable: String, storage: [String], account: String = "bench") throws -> String {
        let result = try Spawn.run(executable, ["token", "create", "--create", "--account", account] + storage, captureOutput: true)
        let token = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, !token.isEmpty else { throw BenchError("token create failed (exit \(result.status))") }
        return token
    }

    /// SIGTERM, then waits for the exit (which ends every stream and long-poll first).
    func stop() throws {
        server.signal(SIGTERM)
        let exit = server.waitForExit()
        guard exit.status == 0, !exit.bySignal else {
            throw BenchError("the server exited with status \(exit.bySignal ? 128 + exit.status : exit.status)")
        }
    }

    /// The server's resident memory, VmRSS of /proc/PID/status, in KiB.
    func residentKiB() throws -> Double {
        if !server.process.isRunning {
            let exit = server.waitForExit()
            throw BenchError("the server exited (wait status \(exit.bySignal ? exit.status : exit.status << 8))")
        }
        return try ProcessStats.residentKiB(of: pid)
    }
}
