import Foundation
import Glibc

/// The real `groupdefaults-server` executable, started on loopback for the benchmark.
final class ServerProcess {
    let port: Int
    private let child: Spawn.Child

    var pid: pid_t { child.pid }
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// `serve --port 0 --log-level warning --rate-limit …` with `storage` (`--data-dir DIR` or
    /// `--postgres-url URL`); returns once it printed its `listening on` line. The rate limit is out
    /// of reach: a 429 would only hide what is measured.
    init(executable: String, storage: [String]) throws {
        child = try Spawn.start(executable, ["serve", "--port", "0", "--log-level", "warning", "--rate-limit", "10000000"] + storage,
                                captureOutput: true)
        let prefix = "listening on http://127.0.0.1:"
        guard let line = child.readLine(), line.hasPrefix(prefix), let port = Int(line.dropFirst(prefix.count)) else {
            throw BenchError("\(executable) did not announce its port")
        }
        self.port = port
    }

    /// `token create … --account bench`: a token for every suite.
    static func createToken(executable: String, storage: [String]) throws -> String {
        let result = try Spawn.run(executable, ["token", "create", "--account", "bench"] + storage, captureOutput: true)
        let token = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, !token.isEmpty else { throw BenchError("token create failed (exit \(result.status))") }
        return token
    }

    /// SIGTERM, then waits for the exit (which ends every stream and long-poll first).
    func stop() throws {
        kill(child.pid, SIGTERM)
        let result = try child.wait()
        guard result.status == 0 else { throw BenchError("the server exited with status \(result.status)") }
    }

    /// The server's resident memory, VmRSS of /proc/PID/status, in KiB.
    func residentKiB() throws -> Double {
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid { throw BenchError("the server exited (wait status \(status))") }
        return try ProcessStats.residentKiB(of: pid)
    }
}
