import Foundation

/// What one server instance measured, turned into the report's rows beside the same-run references
/// and the targets.
struct SingleInstance {
    var memory: StreamMemory.Result?
    /// wrk's single-op pushes, by connection count.
    var singleOp: [Int: WrkLoad.Result] = [:]
    var batches: [(clients: Int, result: PushThroughput.Result)] = []
    var longPoll: MeteredWakeUp?
    var eventStream: MeteredWakeUp?

    /// The connection count at which the server's CPU per push is reported.
    static let cpuConnections = 10

    func rows(_ backend: String, etcd: EtcdReference, batchReference: ServerReport.Reference) -> [ServerReport.Row] {
        let embedded = backend == "embedded"
        var rows: [ServerReport.Row] = []
        if let memory {
            rows.append(
                ServerReport.Row(
                    backend: backend,
                    measurement: "memory per open event stream",
                    value: memory.kibPerStream,
                    unit: "KiB",
                    samples: memory.streams,
                    reference: etcd.watchMemoryText,
                    ratio: memory.kibPerStream / etcd.kibPerWatch,
                    target: "≤ 16 KiB",
                    met: memory.kibPerStream <= 16,
                    detail: "VmRSS \(ServerFormat.count(memory.beforeKiB / 1024)) MiB before, \(ServerFormat.count(memory.afterKiB / 1024)) MiB "
                        + "with \(memory.streams) streams open"
                )
            )
        }
        for (clients, ours) in singleOp.sorted(by: { $0.key < $1.key }) {
            let theirs = etcd.puts(clients)
            var row = ServerReport.Row(
                backend: backend,
                measurement: "push, 1 op, \(clients) connection\(clients == 1 ? "" : "s") (wrk)",
                value: ours.requestsPerSecond,
                unit: "ops/s",
                samples: ours.requests,
                p50Ms: ours.p50Microseconds / 1000,
                p99Ms: ours.p99Microseconds / 1000,
                reference: theirs.reference.text + ", p99 " + ServerFormat.milliseconds(theirs.p99Ms),
                ratio: ours.requestsPerSecond / theirs.reference.perSecond,
                usage: ours.usage
            )
            let minimum = embedded ? 1.0 : clients == 10 ? 0.75 : clients > 10 ? 0.5 : nil
            if let minimum {
                row.target = "≥ \(minimum)× etcd"
                row.met = row.ratio! >= minimum
                if embedded && clients == 100 {
                    row.target! += ", p99 ≤ etcd's"
                    row.met = row.met! && ours.p99Microseconds / 1000 <= theirs.p99Ms
                }
            }
            rows.append(row)
        }
        if let ours = singleOp[Self.cpuConnections] {
            let theirs = etcd.cpuPerPutMicroseconds(Self.cpuConnections)
            let perPush = ours.usage.server * 1e6 / ours.requestsPerSecond
            rows.append(
                ServerReport.Row(
                    backend: backend,
                    measurement: "server CPU per single-op push, \(Self.cpuConnections) connections",
                    value: perPush,
                    unit: "µs",
                    reference: "etcd \(ServerFormat.count(theirs)) µs per put",
                    ratio: perPush / theirs,
                    target: embedded ? "≤ 100 µs" : nil,
                    met: embedded ? perPush <= 100 : nil,
                    usage: ours.usage,
                    detail: "server cores busy / pushes per second, during the wrk run above"
                )
            )
        }
        for (clients, result) in batches {
            var row = ServerReport.Row(
                backend: backend,
                measurement: "push, batch \(ServerBench.batchSize), \(clients) client\(clients == 1 ? "" : "s")",
                value: result.opsPerSecond,
                unit: "ops/s",
                samples: result.latencies.count,
                p50Ms: result.latencies.p50 / 1e6,
                p99Ms: result.latencies.p99 / 1e6,
                reference: batchReference.text,
                ratio: result.opsPerSecond / batchReference.perSecond,
                usage: result.usage
            )
            if let disk = result.usage.disk, let referenceWrites = batchReference.diskWritesPerOp, embedded {
                row.detail = String(
                    format: "%.2f disk writes per op, the disk completing %.0f writes/s (the durable reference: %.1f per commit)",
                    disk.writesPerSecond / result.opsPerSecond,
                    disk.writesPerSecond,
                    referenceWrites
                )
            }
            rows.append(row)
        }
        let wakeTarget = embedded ? 5.0 : 3.0
        if let longPoll { rows.append(etcd.wakeRow(backend, "long-poll wake-up, one instance", longPoll, targetMs: wakeTarget)) }
        if let eventStream { rows.append(etcd.wakeRow(backend, "event-stream wake-up, one instance", eventStream, targetMs: wakeTarget)) }
        return rows
    }
}

extension SingleInstance {
    /// The single-op pushes at the floor's connection count beside the floor: the same statements
    /// run by pgbench.
    func floorRows(_ floor: ServerReport.Reference) -> [ServerReport.Row] {
        guard let ours = singleOp[Self.cpuConnections] else { return [] }
        let ratio = ours.requestsPerSecond / floor.perSecond
        return [
            ServerReport.Row(
                backend: "PostgreSQL",
                measurement: "push, 1 op, \(Self.cpuConnections) connections (wrk), over its floor",
                value: ours.requestsPerSecond,
                unit: "ops/s",
                samples: ours.requests,
                reference: floor.text,
                ratio: ratio,
                target: "≥ 0.7× the floor",
                met: ratio >= 0.7,
                usage: ours.usage,
                detail: "the floor: Tools/bench-files/push-floor.sql, the statements of a one-op push with prepared statements, "
                    + "pgbench -M prepared -c \(Self.cpuConnections) -j 2, each client its own suite (wrk's pushes share one suite, "
                    + "where the server writes several pushes at once)"
            )
        ]
    }
}

extension FanOut {
    /// A row per instance count: pushes per second over all instances, the wake-up on the last
    /// instance meanwhile, and PostgreSQL's CPU per push.
    static func rows(_ results: [Result]) -> [ServerReport.Row] {
        guard let one = results.first(where: { $0.instances == 1 }) else { return [] }
        return results.map { result in
            ServerReport.Row(
                backend: "PostgreSQL",
                measurement: "fan-out, \(result.instances) instance\(result.instances == 1 ? "" : "s") listening: pushes through one (wrk, "
                    + "\(SingleInstance.cpuConnections) connections), event-stream wake-up "
                    + (result.instances == 1 ? "on the same instance" : "on another instance"),
                value: result.pushesPerSecond,
                unit: "ops/s",
                samples: result.wake.woken.count,
                p50Ms: result.wake.woken.p50 / 1e6,
                p99Ms: result.wake.woken.p99 / 1e6,
                reference: result.instances == 1
                    ? nil
                    : "1 instance: \(ServerFormat.count(one.pushesPerSecond)) ops/s, wake-up p99 \(ServerFormat.milliseconds(one.wake.woken.p99 / 1e6))",
                ratio: result.instances == 1 ? nil : result.pushesPerSecond / one.pushesPerSecond,
                usage: result.usage,
                detail: String(format: "PostgreSQL's CPU per push: %.0f µs", result.postgresMicrosecondsPerPush)
                    + (result.instances == 1 ? "" : String(format: " (1 instance: %.0f µs)", one.postgresMicrosecondsPerPush))
            )
        }
    }
}

/// A wake-up measurement and the cores busy while it ran.
struct MeteredWakeUp {
    var result: WakeUpLatency.Result
    var usage: Usage
}

/// A wake-up measurement that can be metered.
protocol WakeUpMeasurement {}

extension WakeUpMeasurement {
    /// `body(self)`, metered by `meter`.
    func metered(_ meter: UsageMeter, _ body: (Self) async throws -> WakeUpLatency.Result) async throws -> MeteredWakeUp {
        let usage = meter.start()
        let result = try await body(self)
        return MeteredWakeUp(result: result, usage: usage.stop())
    }
}

extension WakeUpLatency: WakeUpMeasurement {}
extension EtcdWatchLatency: WakeUpMeasurement {}

/// etcd's figures from one fresh member.
struct EtcdFigures {
    /// wrk's single-key puts, by connection count.
    var puts: [Int: WrkLoad.Result]
    /// Put sent → the watch's event parsed.
    var watch: MeteredWakeUp
    /// Its resident memory per open watch (`EtcdWatchMemory`).
    var watchMemory: StreamMemory.Result
}

/// etcd measured just before and just after one backend's figures.
struct EtcdReference {
    let before: EtcdFigures
    let after: EtcdFigures

    /// Puts per second (before → after, their mean) and the mean p99, in milliseconds.
    func puts(_ connections: Int) -> (reference: ServerReport.Reference, p99Ms: Double) {
        let first = before.puts[connections]!
        let second = after.puts[connections]!
        return (
            ServerReport.Reference(label: "etcd put", before: first.requestsPerSecond, after: second.requestsPerSecond),
            (first.p99Microseconds + second.p99Microseconds) / 2000
        )
    }

    /// etcd's resident memory per open watch, KiB, the mean of both runs.
    var kibPerWatch: Double { (before.watchMemory.kibPerStream + after.watchMemory.kibPerStream) / 2 }

    /// The memory row's reference: etcd per open watch (before → after).
    var watchMemoryText: String {
        let kib = { String(format: "%.1f", $0) }
        return "etcd \(kib(kibPerWatch)) KiB per open watch (\(kib(before.watchMemory.kibPerStream)) → \(kib(after.watchMemory.kibPerStream)))"
    }

    /// etcd's CPU per put, microseconds, the mean of both runs.
    func cpuPerPutMicroseconds(_ connections: Int) -> Double {
        [before.puts[connections]!, after.puts[connections]!].map { $0.usage.server * 1e6 / $0.requestsPerSecond }.reduce(0, +) / 2
    }

    /// A wake-up row beside etcd's watch latency (p50 before → after; the ratio is over their mean).
    func wakeRow(_ backend: String, _ measurement: String, _ measured: MeteredWakeUp, targetMs: Double) -> ServerReport.Row {
        let p50 = measured.result.woken.p50 / 1e6
        let p99 = measured.result.woken.p99 / 1e6
        let watchBefore = before.watch.result.woken.p50 / 1e6
        let watchAfter = after.watch.result.woken.p50 / 1e6
        let watch = (watchBefore + watchAfter) / 2
        return ServerReport.Row(
            backend: backend,
            measurement: measurement,
            samples: measured.result.woken.count,
            p50Ms: p50,
            p99Ms: p99,
            reference: "etcd watch p50 " + ServerFormat.milliseconds(watch)
                + " (\(ServerFormat.milliseconds(watchBefore)) → \(ServerFormat.milliseconds(watchAfter)))",
            ratio: p50 / watch,
            target: "p50 ≤ \(ServerFormat.count(targetMs)) ms",
            met: p50 <= targetMs,
            usage: measured.usage,
            detail: "the push itself was answered after " + ServerFormat.milliseconds(measured.result.pushAnswered.p50 / 1e6) + " (p50), "
                + ServerFormat.milliseconds(measured.result.pushAnswered.p99 / 1e6) + " (p99); etcd's put after "
                + ServerFormat.milliseconds(before.watch.result.pushAnswered.p50 / 1e6) + " (p50)"
        )
    }
}
