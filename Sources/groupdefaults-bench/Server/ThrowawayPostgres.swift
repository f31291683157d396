import Foundation
import ServerLaunching

/// The benchmark's uses of the throwaway PostgreSQL (the one the tests use too): PostgreSQL's own
/// `pgbench` against it as the reference, and its servers' listening connections.
extension ThrowawayPostgres {
    /// pgbench inserting one row of a ~60-byte value per transaction into a small table, `clients`
    /// connections on 2 threads for `seconds` (its script written in `directory`): its transactions per
    /// second.
    func pgbenchInsertsPerSecond(clients: Int, seconds: Int, scratch directory: String) throws -> Double {
        try psql("CREATE TABLE IF NOT EXISTS bench_reference (id bigserial PRIMARY KEY, k bigint NOT NULL, v text NOT NULL)")
        let script = directory + "/pgbench-insert.sql"
        try """
        \\set k random(1, 1000000)
        INSERT INTO bench_reference (k, v) VALUES (:k, '\(String(repeating: "v", count: 60))');

        """.write(toFile: script, atomically: true, encoding: .utf8)
        return try pgbench(["-f", script], clients: clients, seconds: seconds)
    }

    /// The floor of a single-op push: `Tools/bench-files/push-floor.sql` (the very statements a
    /// one-op push runs, with prepared statements, as the server's pool does) by pgbench, `clients`
    /// connections on 2 threads for `seconds`, on rows `push-floor-setup.sql` makes afresh (the
    /// schema must exist: a server has started on this database). Its pushes per second.
    func pgbenchPushFloor(clients: Int, seconds: Int, files directory: String) throws -> Double {
        let setup = try runTool(Self.executable("psql"), ["-X", "-q", "-v", "ON_ERROR_STOP=1", url, "-f", directory + "/push-floor-setup.sql"])
        guard setup.status == 0 else { throw BenchError("push-floor-setup.sql failed: \(setup.stderr)") }
        return try pgbench(["-M", "prepared", "-f", directory + "/push-floor.sql"], clients: clients, seconds: seconds)
    }

    /// pgbench with `arguments` (its script), `clients` connections on 2 threads for `seconds`: its
    /// transactions per second.
    private func pgbench(_ arguments: [String], clients: Int, seconds: Int) throws -> Double {
        let result = try Spawn.run(
            Self.executable("pgbench"),
            ["-n"] + arguments + ["-c", String(clients), "-j", "2", "-T", String(seconds), url],
            captureOutput: true
        )
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
}
