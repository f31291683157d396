import Foundation
import ServerLaunching

/// What synchronous replication costs a push: wrk's single-op pushes through one instance on a
/// replicated PostgreSQL (`Tools/postgres-ha`: a primary and its synchronous standby, each flushing
/// its WAL, pg_auto_failover's monitor beside them), first with every commit waiting for the
/// standby (`synchronous_commit = on`, the setting that keeps an acknowledged push through a
/// failover), then on the same cluster with commits waiting for the primary's own flush only
/// (`synchronous_commit = local`, set for the server's role).
struct SynchronousCommitCost {
    let serverExecutable: String
    /// `Tools/postgres-ha`.
    let tool: String
    let connections: Int
    let seconds: Int
    let scratch: String

    func run() throws -> ServerReport.Row {
        let cluster = try ReplicatedPostgres(tool: tool)
        defer { try? cluster.stop() }
        let storage = ["--postgres-url", cluster.url]
        let token = try ServerProcess.createToken(executable: serverExecutable, storage: storage)
        let synchronous = try pushes(storage: storage, token: token, suite: "bench.synchronous")
        _ = try ThrowawayPostgres.psql(cluster.url, "ALTER ROLE postgres SET synchronous_commit = local")
        let local = try pushes(storage: storage, token: token, suite: "bench.local")
        try cluster.stop()
        let ratio = synchronous.requestsPerSecond / local.requestsPerSecond
        return ServerReport.Row(
            backend: "PostgreSQL",
            measurement: "push, 1 op, \(connections) connections (wrk), primary with a synchronous standby",
            value: synchronous.requestsPerSecond,
            unit: "ops/s",
            samples: synchronous.requests,
            p50Ms: synchronous.p50Microseconds / 1000,
            p99Ms: synchronous.p99Microseconds / 1000,
            reference: "the same cluster, synchronous_commit = local: \(ServerFormat.count(local.requestsPerSecond))/s, "
                + "p50 \(ServerFormat.milliseconds(local.p50Microseconds / 1000))",
            ratio: ratio,
            detail: "Tools/postgres-ha: both nodes with fsync on (Tools/postgres, the other rows' database, has fsync off), on this one disk; "
                + String(
                    format: "cores: the server %.2f, wrk %.2f, the two nodes and the monitor %.2f",
                    synchronous.usage.server,
                    synchronous.usage.bench,
                    synchronous.usage.other
                )
        )
    }

    /// A fresh instance (new connections: the role's setting applies to them), wrk, stopped.
    private func pushes(storage: [String], token: String, suite: String) throws -> WrkLoad.Result {
        let server = try ServerProcess(executable: serverExecutable, storage: storage)
        defer { try? server.stop() }
        let meter = UsageMeter(serverPIDs: [server.pid])
        return try WrkLoad(target: .push(suite: suite, token: token), connections: connections)
            .run(baseURL: server.baseURL, seconds: seconds, scratch: scratch, meter: meter)
    }
}
