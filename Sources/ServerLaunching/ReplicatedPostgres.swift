import Foundation
import Glibc

/// A throwaway replicated PostgreSQL 15 from `Tools/postgres-ha start --until-exit PID`: a primary,
/// its synchronous standby and pg_auto_failover's monitor (it stops by itself once this process has
/// exited, or at `stop`), as the failover test and the benchmark use it. Calls block their thread.
package final class ReplicatedPostgres: @unchecked Sendable {  // `stopped` is only touched by its owner
    /// `postgres://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write`.
    package let url: String
    private let tool: String
    private var stopped = false

    /// Starts the three servers with `tool` (the path of `Tools/postgres-ha`).
    package init(tool: String) throws {
        self.tool = tool
        let started = try runTool(tool, ["start", "--until-exit", String(getpid())])
        guard started.status == 0, let url = started.stdout.split(separator: "\n").last.map(String.init), url.hasPrefix("postgres://")
        else {
            // What went wrong is at the end of what it said (pg_autoctl's logs come before).
            let said = started.stderr.split(separator: "\n").suffix(8).joined(separator: "\n")
            throw PostgresFailure("\(tool) start failed (exit \(started.status)):\n\(said)", stderr: started.stderr)
        }
        self.url = url
    }

    /// The URL of one database on the same hosts (`CREATE DATABASE` it first, on the primary).
    package func url(database: String) -> String {
        guard let slash = url.range(of: "/postgres?") else { return url }
        return url[..<slash.lowerBound] + "/\(database)?" + url[slash.upperBound...]
    }

    /// The primary's `host:port`, as the monitor reports it.
    package func primary() throws -> String {
        try run(["primary", url])
    }

    /// Loses the primary's machine (`kill -9` of its keeper and its postmaster); returns its
    /// `host:port`.
    @discardableResult
    package func killPrimary() throws -> String {
        try run(["kill-primary", url])
    }

    /// The primary's machine stops answering without closing anything (`SIGSTOP` of its keeper,
    /// postmaster and backends: a partition, a hung machine); returns its `host:port`.
    @discardableResult
    package func freezePrimary() throws -> String {
        try run(["freeze-primary", url])
    }

    /// A node frozen by `freezePrimary` answers again: an old primary back.
    package func thaw(_ node: String) throws {
        _ = try run(["thaw", url, node])
    }

    /// The monitor's table of the nodes (`pg_autoctl show state`), for a failure's report.
    package func state() -> String {
        (try? run(["state", url])) ?? "(the monitor did not answer)"
    }

    /// Stops the three servers and removes their directory (once).
    package func stop() throws {
        guard !stopped else { return }
        stopped = true
        _ = try runTool(tool, ["stop", url])
    }

    private func run(_ arguments: [String]) throws -> String {
        let result = try runTool(tool, arguments)
        guard result.status == 0 else { throw PostgresFailure("\(tool) \(arguments[0]) failed (exit \(result.status))", stderr: result.stderr) }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
