import Foundation
import Glibc
import GroupDefaults

/// What one change costs as the suite grows: set on A → readable on B (both in `run()`) for a suite
/// of 100 keys and one of 100,000, and the CPU time it took per change on the devices (this
/// process, which runs both engines) and on the server. The small suite is the reference: the
/// target is that the large one costs at most 1.2× as much.
enum ScaleCost {
    static let small = 100
    static let large = 100_000

    static func measure(devices: Devices, server: ServerProcess, changes: Int) async throws -> [ServerReport.Row] {
        let reference = try await oneSize(devices: devices, server: server, keys: small, changes: changes)
        let grown = try await oneSize(devices: devices, server: server, keys: large, changes: changes)
        let latency = ServerReport.Row(
            backend: "embedded",
            measurement: "set on A → readable on B, both in run(), suite of \(ServerFormat.count(Double(large))) keys",
            samples: changes,
            p50Ms: grown.latencies.p50 / 1e6,
            p99Ms: grown.latencies.p99 / 1e6,
            reference: "suite of \(small) keys, same run: p50 \(ServerFormat.milliseconds(reference.latencies.p50 / 1e6)), p99 "
                + ServerFormat.milliseconds(reference.latencies.p99 / 1e6),
            ratio: grown.latencies.p50 / reference.latencies.p50,
            target: "p50 ≤ 1.2× the small suite's",
            met: grown.latencies.p50 <= 1.2 * reference.latencies.p50
        )
        let deviceCPU = cpuRow("devices' CPU per change (A's push + B's pull)", grown.deviceMicroseconds, reference.deviceMicroseconds, changes)
        let serverCPU = cpuRow("server's CPU per change (the push and B's pull)", grown.serverMicroseconds, reference.serverMicroseconds, changes)
        return [latency, deviceCPU, serverCPU]
    }

    /// A row of CPU time per change at the large size beside the small size's.
    private static func cpuRow(_ what: String, _ grown: Double, _ reference: Double, _ changes: Int) -> ServerReport.Row {
        ServerReport.Row(
            backend: "embedded",
            measurement: "\(what), suite of \(ServerFormat.count(Double(large))) keys",
            value: grown,
            unit: "µs",
            samples: changes,
            reference: "suite of \(small) keys: \(format(reference)) µs",
            ratio: grown / reference,
            target: "≤ 1.2× the small suite's",
            met: grown <= 1.2 * reference
        )
    }

    private struct Measured {
        var latencies: Latencies
        var deviceMicroseconds: Double
        var serverMicroseconds: Double
    }

    /// Both devices hold a suite of `keys` keys (written on A, uploaded, read by B's join), then
    /// `changes` changes of one key travel from A to B, one at a time.
    private static func oneSize(devices: Devices, server: ServerProcess, keys: Int, changes: Int) async throws -> Measured {
        var cpu: (device: Double, server: Double) = (0, 0)
        let latencies = try await SyncBench.endToEnd(
            devices: devices,
            suite: "group.bench.scale-\(keys)",
            keyFile: nil,
            changes: changes,
            preload: keys,
            aroundChanges: { changesRun in
                let before = (ProcessStats.cpuSeconds(of: getpid()), ProcessStats.cpuSeconds(of: server.pid))
                try await changesRun()
                cpu = (ProcessStats.cpuSeconds(of: getpid()) - before.0, ProcessStats.cpuSeconds(of: server.pid) - before.1)
            }
        )
        return Measured(
            latencies: latencies,
            deviceMicroseconds: cpu.device / Double(changes) * 1e6,
            serverMicroseconds: cpu.server / Double(changes) * 1e6
        )
    }

    private static func format(_ microseconds: Double) -> String {
        String(format: "%.0f", microseconds)
    }
}
