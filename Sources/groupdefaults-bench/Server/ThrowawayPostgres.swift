import Foundation
import Glibc

/// A throwaway PostgreSQL 15 from `Tools/postgres start` (stopped by `stop`, or by the tool itself
/// once this process has exited), and PostgreSQL's own `pgbench` against it as the reference.
final class ThrowawayPostgres {
    let url: String
    private let tool: String
    /// Where the pgbench script is written.
    private let directory: String
    private var stopped = false

    static let binDirectory = "/usr/lib/postgresql/15/bin"

    init(tool: String, scratch directory: String) throws {
        self.tool = tool
        self.directory = directory
        let started = try Spawn.run(tool, ["start", "--until-exit", String(getpid())], captureOutput: true)
        guard started.status == 0, let url = started.output.split(separator: "\n").last.map(String.init), url.hasPrefix("postgres://")
        else { throw BenchError("\(tool) start failed (exit \(started.status))") }
        self.url = url
    }

    deinit { try? stop() }

    /// The server's postmaster (the first line of postmaster.pid in the directory `Tools/postgres`
    /// registered for its port), whose children are the backends.
    var postmaster: pid_t? {
        guard let port = url.split(separator: ":").last?.split(separator: "/").first else { return nil }
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        guard let directory = try? String(contentsOfFile: "\(base)/groupdefaults-postgres.\(port)", encoding: .utf8),
              let pidFile = try? String(contentsOfFile: directory.trimmingCharacters(in: .whitespacesAndNewlines) + "/data/postmaster.pid",
                                        encoding: .utf8)
        else { return nil }
        return pidFile.split(separator: "\n").first.flatMap { pid_t($0) }
    }

    func stop() throws {
        guard !stopped else { return }
        stopped = true
        _ = try Spawn.run(tool, ["stop", url], captureOutput: true)
    }

    /// Runs SQL with psql; its output.
    @discardableResult
    func psql(_ sql: String) throws -> String {
        let result = try Spawn.run(Self.executable("psql"), ["-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", url, "-c", sql],
                                   captureOutput: true)
        guard result.status == 0 else { throw BenchError("psql failed (exit \(result.status)): \(sql)") }
        return result.output
    }

    /// pgbench inserting one row of a ~60-byte value per transaction into a small table, `clients`
    /// connections on 2 threads for `seconds`: its transactions per second.
    func pgbenchInsertsPerSecond(clients: Int, seconds: Int) throws -> Double {
        try psql("CREATE TABLE IF NOT EXISTS bench_reference (id bigserial PRIMARY KEY, k bigint NOT NULL, v text NOT NULL)")
        let script = directory + "/pgbench-insert.sql"
        try """
            \\set k random(1, 1000000)
            INSERT INTO bench_reference (k, v) VALUES (:k, '\(String(repeating: "v", count: 60))');

            """.write(toFile: script, atomically: true, encoding: .utf8)
        let result = try Spawn.run(Self.executable("pgbench"),
                                   ["-n", "-f", script, "-c", String(clients), "-j", "2", "-T", String(seconds), url],
                                   captureOutput: true)
        guard result.status == 0 else { throw BenchError("pgbench failed (exit \(result.status)): \(result.output)") }
        // "tps = 4321.123456 (without initial connection time)"
        guard let line = result.output.split(separator: "\n").first(where: { $0.hasPrefix("tps = ") }),
              let tps = line.dropFirst("tps = ".count).split(separator: " ").first.flatMap({ Double($0) })
        else { throw BenchError("no tps in pgbench's output: \(result.output)") }
        return tps
    }

    /// The `application_name`s of the servers' listening connections (one per instance).
    func listenerCount() throws -> Int {
        let count = try psql("SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'groupdefaults-listener-%' AND query LIKE 'LISTEN%'")
        return Int(count.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    private static func executable(_ name: String) -> String {
        let path = binDirectory + "/" + name
        return FileManager.default.isExecutableFile(atPath: path) ? path : "/usr/bin/" + name
    }
}
