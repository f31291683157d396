import Glibc
import GroupDefaults
import GroupDefaultsWire

/// Push throughput: `clients` concurrent clients, each a device of its own pushing batches of
/// `batch` ops, one request after another, to one suite.
///
/// Each client writes its own keys, `c<client>-<n>`, cycling through a bounded key space (the
/// suite stays within the server's 10,000 keys), with current HLCs, so that every op is applied.
/// After `warmup`, requests that complete within the next `duration` are counted: ops/s is their
/// ops over `duration`, and their latencies (request sent → answer read) give p50/p99.
struct PushThroughput {
    let batch: Int
    let clients: Int
    /// Keys each client cycles through, where the default below is not wanted.
    var keySpace: Int? = nil

    struct Result {
        var opsPerSecond: Double
        var latencies: Latencies
        var usage: Usage
    }

    /// Keys each client cycles through: 1,000 alone, fewer with more clients, at least one batch.
    var keysPerClient: Int { keySpace ?? max(batch, min(1_000, 5_000 / clients)) }

    func run(_ api: SyncAPI, suite: String, warmup: Duration, duration: Duration, usage meter: UsageMeter) async throws -> Result {
        let measureStart = Clock.nanoseconds() + warmup.nanoseconds
        let measureEnd = measureStart + duration.nanoseconds
        let usage = meter.start()
        let runID = String(UInt32.random(in: .min ... .max), radix: 36)  // batch ids unique across runs on one suite
        let perClient = try await withThrowingTaskGroup(of: (ops: Int, latencies: [Int64]).self) { group in
            for client in 0..<clients {
                group.addTask {
                    try await runClient(client, runID: runID, api: api, suite: suite, measureStart: measureStart, measureEnd: measureEnd)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let ops = perClient.reduce(0) { $0 + $1.ops }
        return Result(
            opsPerSecond: Double(ops) / duration.seconds,
            latencies: Latencies(perClient.flatMap(\.latencies)),
            usage: usage.stop()
        )
    }

    private func runClient(
        _ client: Int,
        runID: String,
        api: SyncAPI,
        suite: String,
        measureStart: Int64,
        measureEnd: Int64
    ) async throws
        -> (ops: Int, latencies: [Int64])
    {
        let device = UInt64(client + 1)
        let keys = keysPerClient
        let value = PropertyListValue.string(String(repeating: "v", count: 60))
        var sequence = 0
        var ops = 0
        var latencies: [Int64] = []
        while true {
            let sent = Clock.nanoseconds()
            guard sent < measureEnd else { break }
            let now = HLC.wallClockMilliseconds()
            let request = PushRequest(
                deviceID: device,
                batchID: "b\(runID)-\(client)-\(sequence)",
                ops: (0..<batch).map { index in
                    let n = sequence * batch + index
                    return PushOp(
                        key: "c\(client)-\(n % keys)",
                        value: value,
                        hlc: HLC(milliseconds: now, counter: UInt16(truncatingIfNeeded: n))
                    )
                }
            )
            try await api.pushUnread(suite, request)
            let answered = Clock.nanoseconds()
            if answered >= measureStart && answered <= measureEnd {
                ops += batch
                latencies.append(answered - sent)
            }
            sequence += 1
        }
        return (ops, latencies)
    }
}

/// Request latencies in nanoseconds, sorted.
struct Latencies {
    let sorted: [Int64]

    init(_ samples: [Int64]) { sorted = samples.sorted() }

    var count: Int { sorted.count }

    /// The nearest-rank percentile (0 < p ≤ 100), in nanoseconds.
    func percentile(_ p: Double) -> Double {
        guard !sorted.isEmpty else { return .nan }
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return Double(sorted[min(max(rank, 1), sorted.count) - 1])
    }

    var p50: Double { percentile(50) }
    var p99: Double { percentile(99) }
}

extension Duration {
    var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
    var seconds: Double { Double(nanoseconds) / 1e9 }
}
