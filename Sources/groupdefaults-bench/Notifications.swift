import Foundation
import GroupDefaults

/// Change notifications across processes (`--only notify`): how soon an observer in another
/// process has a change, and what being observed costs a writer's `set`.
///
/// Latency: an observer child (`NotifyChild` observe) and a writer child (`NotifyChild` write) on
/// one suite; see `NotifyChild`. Overhead: this process sets integers, in batches alternating
/// between no observer anywhere and a drain-only observer child, over a few rounds so that drift
/// of the machine falls on both sides alike.
enum Notifications {
    /// Everything measured, for `--json`.
    struct Summary: Encodable {
        var method: String
        var changes: Int
        var warmupChanges: Int
        var paceNs: Int
        var latencyNs: Latency
        var delivered: Delivered
        var writerSetMedianNs: Double
        var writerSetP99Ns: Double
        var setWithoutObserverNs: Double
        var setWithObserverNs: Double
        var overheadPerSetNs: Double
        var overheadMethod: String
        var drainedChanges: Int
        var drainResets: Int
        var references: [String]
    }

    struct Latency: Encodable {
        var min, p50, p90, p99, p999, max, mean: Double
    }

    struct Delivered: Encodable {
        var expected, received, lost, duplicated, outOfOrder, resets: Int
    }

    static let references = [
        "another process noticing a raw LMDB commit by polling every 10 µs: ≈ 20 µs",
        "MMKV's multi-process mode noticing another process's change by polling: ≈ 21–24 µs; it pushes nothing "
            + "(an observer learns of a change only on its next access, without the key)",
        "UserDefaults: didChangeNotification never fires for another process's writes; Foundation on Linux has "
            + "no cross-process notification",
    ]

    static let latencyChanges = 10_000
    static let warmupChanges = 100
    /// The writer's pace: one `set` per 200 µs, so that changes do not queue.
    static let paceNs = 200_000

    static func measure(
        sandbox: Sandbox,
        workload: Workload,
        quick: Bool,
        progress: (String) -> Void
    ) throws -> Summary {
        progress("change notifications: latency, \(latencyChanges) changes across processes")
        let (observed, writer) = try measureLatency(directory: try sandbox.makeDirectory("notify-latency"))
        let sorted = observed.latencies.map(Double.init).sorted()

        let rounds = quick ? 1 : 4
        let batchesPerRound = quick ? 5 : 10
        progress("change notifications: set with and without an observer in another process")
        let overhead = try measureOverhead(
            directory: try sandbox.makeDirectory("notify-overhead"),
            workload: workload,
            rounds: rounds,
            batchesPerRound: batchesPerRound
        )
        let without = median(overhead.without)
        let with = median(overhead.with)

        let total = latencyChanges + warmupChanges
        return Summary(
            method: "an observer child (ChangeFeed.next()) and a writer child on one suite; the writer sets \(total) "
                + "distinct keys one per \(Format.duration(Double(paceNs))) (the first \(warmupChanges) not timed), each "
                + "to CLOCK_MONOTONIC taken just before its set; latency = the observer's CLOCK_MONOTONIC when next() "
                + "returned it − that value, so it includes the commit itself",
            changes: latencyChanges,
            warmupChanges: warmupChanges,
            paceNs: paceNs,
            latencyNs: Latency(
                min: sorted.first!,
                p50: percentile(sorted, 0.5),
                p90: percentile(sorted, 0.9),
                p99: percentile(sorted, 0.99),
                p999: percentile(sorted, 0.999),
                max: sorted.last!,
                mean: Format.rounded(sorted.reduce(0, +) / Double(sorted.count))
            ),
            delivered: Delivered(
                expected: total,
                received: observed.received,
                lost: observed.lost,
                duplicated: observed.duplicated,
                outOfOrder: observed.outOfOrder,
                resets: observed.resets
            ),
            writerSetMedianNs: Format.rounded(writer.setMedianNs),
            writerSetP99Ns: Format.rounded(writer.setP99Ns),
            setWithoutObserverNs: Format.rounded(without),
            setWithObserverNs: Format.rounded(with),
            overheadPerSetNs: Format.rounded(with - without),
            overheadMethod: "set(_: Int, forKey:) on \(Workload.keyCount) keys, medians of \(rounds * batchesPerRound) "
                + "batches of \(Workload.keyCount) per side, alternating in \(rounds) round\(rounds == 1 ? "" : "s") "
                + "between no observer and a drain-only ChangeFeed in another process, each after a warm-up batch",
            drainedChanges: overhead.drained,
            drainResets: overhead.drainResets,
            references: references
        )
    }

    // MARK: Latency

    private static func measureLatency(directory: String) throws -> (NotifyChild.ObserverReport, NotifyChild.WriterReport) {
        let executable = Spawn.executablePath()
        let total = latencyChanges + warmupChanges
        let observer = try Spawn.start(
            executable,
            [NotifyChild.command, "observe", directory, String(total), String(warmupChanges)],
            captureOutput: true
        )
        try awaitReady(observer, "observer")
        let written = try Spawn.run(
            executable,
            [NotifyChild.command, "write", directory, String(total), String(warmupChanges), String(paceNs)],
            captureOutput: true
        )
        guard written.status == 0 else {
            throw BenchError("change notifications: the writer child exited with \(written.status): \(written.output)")
        }
        let writer = try decode(NotifyChild.WriterReport.self, from: written.output, "writer")
        let observed = try decode(NotifyChild.ObserverReport.self, from: try finish(observer, "observer"), "observer")
        guard observed.isClean, observed.received == total, writer.written == total,
            observed.latencies.count == latencyChanges
        else {
            throw BenchError(
                "change notifications: the observer in another process did not receive each of the "
                    + "\(writer.written) changes exactly once, in order: \(observed.problemSummary)"
            )
        }
        return (observed, writer)
    }

    // MARK: Overhead

    private static func measureOverhead(
        directory: String,
        workload: Workload,
        rounds: Int,
        batchesPerRound: Int
    ) throws
        -> (without: [Double], with: [Double], drained: Int, drainResets: Int)
    {
        let defaults = try StoreSubject.open(directory: URL(fileURLWithPath: directory))
        try defaults.write { tx in
            for index in 0..<Workload.keyCount {
                try tx.set(.integer(workload.initialInteger(index)), forKey: workload.keys[index])
            }
        }
        var nextOp = 0
        /// A warm-up batch, then `count` timed ones of `Workload.keyCount` sets each.
        func batches(_ count: Int, into samples: inout [Double]) {
            for batch in 0...count {
                let nanoseconds = timeBatch(first: nextOp, ops: Workload.keyCount) { op in
                    defaults.set(workload.integer(forOp: op), forKey: workload.key(forOp: op))
                    return 0
                }
                nextOp += Workload.keyCount
                if batch > 0 { samples.append(nanoseconds) }
            }
        }

        var without: [Double] = []
        var with: [Double] = []
        var drained = 0
        var drainResets = 0
        for _ in 0..<rounds {
            batches(batchesPerRound, into: &without)
            let observer = try Spawn.start(Spawn.executablePath(), [NotifyChild.command, "drain", directory], captureOutput: true)
            try awaitReady(observer, "drain observer")
            let firstOp = nextOp
            batches(batchesPerRound, into: &with)
            defaults.set(nextOp, forKey: NotifyChild.endKey)  // a new value each round
            let report = try decode(NotifyChild.ObserverReport.self, from: try finish(observer, "drain observer"), "drain observer")
            // A drain observer may fall behind the retained log (then it gets a reset, not a loss).
            guard report.sequenceErrors == 0, report.unexpected == 0, !report.timedOut,
                report.resets > 0 || report.received == nextOp - firstOp
            else {
                throw BenchError(
                    "change notifications: the drain observer expected \(nextOp - firstOp) changes: "
                        + report.problemSummary
                )
            }
            drained += report.received
            drainResets += report.resets
        }
        if let error = defaults.lastError { throw BenchError("change notifications, set: \(error)") }
        // Read back the last set, so that a failed write cannot pass for a fast one.
        let lastOp = nextOp - 1
        guard defaults.integer(forKey: workload.key(forOp: lastOp)) == workload.integer(forOp: lastOp) else {
            throw BenchError("change notifications, set: the last value set did not read back")
        }
        return (without, with, drained, drainResets)
    }

    // MARK: Children

    private static func awaitReady(_ child: Spawn.Child, _ name: String) throws {
        guard let line = child.readLine(), line == "ready" else {
            let result = try child.wait()
            throw BenchError("change notifications: the \(name) child did not start (exit \(result.status)): \(result.output)")
        }
    }

    /// Waits for `child` and returns its output; throws unless it exited with 0.
    private static func finish(_ child: Spawn.Child, _ name: String) throws -> String {
        let result = try child.wait()
        guard result.status == 0 else {
            throw BenchError("change notifications: the \(name) child exited with \(result.status): \(result.output)")
        }
        return result.output
    }

    /// Decodes the last line of a child's output.
    private static func decode<T: Decodable>(_ type: T.Type, from output: String, _ name: String) throws -> T {
        let line = output.split(separator: "\n").last.map(String.init) ?? ""
        do {
            return try JSONDecoder().decode(type, from: Data(line.utf8))
        } catch {
            throw BenchError("change notifications: cannot read the \(name) child's report '\(line.prefix(200))': \(error)")
        }
    }

    // MARK: Report

    static func rows(_ summary: Summary) -> [Report.Row] {
        let latency = summary.latencyNs
        let none = "none ²"
        let noTarget: Target? = nil
        return [
            Report.Row(
                notify: "notify-latency-p50",
                label: "notify latency p50 ¹",
                groupDefaults: latency.p50,
                rawLMDB: "≈ 20 µs ²",
                userDefaults: none,
                target: .atMost(nanoseconds: 100_000)
            ),
            Report.Row(
                notify: "notify-latency-p99",
                label: "notify latency p99 ¹",
                groupDefaults: latency.p99,
                rawLMDB: nil,
                userDefaults: none,
                target: .atMost(nanoseconds: 1_000_000)
            ),
            Report.Row(
                notify: "notify-latency-max",
                label: "notify latency max ¹",
                groupDefaults: latency.max,
                rawLMDB: nil,
                userDefaults: none,
                target: noTarget
            ),
            Report.Row(
                notify: "notify-set-unobserved",
                label: "set, no observer ³",
                groupDefaults: summary.setWithoutObserverNs,
                rawLMDB: nil,
                userDefaults: nil,
                target: noTarget
            ),
            Report.Row(
                notify: "notify-set-observed",
                label: "set, observed elsewhere ³",
                groupDefaults: summary.setWithObserverNs,
                rawLMDB: nil,
                userDefaults: nil,
                target: noTarget
            ),
            Report.Row(
                notify: "notify-overhead",
                label: "notify cost per set ³",
                groupDefaults: summary.overheadPerSetNs,
                rawLMDB: nil,
                userDefaults: nil,
                target: .atMost(nanoseconds: 500)
            ),
        ]
    }

    /// The footnotes under the table, wrapped.
    static func notes(_ summary: Summary) -> String {
        unwrappedNotes(summary).split(separator: "\n").map { wrap(String($0)) }.joined(separator: "\n")
    }

    private static func unwrappedNotes(_ summary: Summary) -> String {
        let delivered = summary.delivered
        let clean =
            delivered.lost == 0 && delivered.duplicated == 0 && delivered.outOfOrder == 0 && delivered.resets == 0
            && delivered.received == delivered.expected
        return """
            ¹ notify latency: \(summary.method) (the writer's set: median \(Format.duration(summary.writerSetMedianNs)), \
            p99 \(Format.duration(summary.writerSetP99Ns))); percentiles of \(summary.changes) changes, \
            p90 \(Format.duration(summary.latencyNs.p90)), p99.9 \(Format.duration(summary.latencyNs.p999)). \
            Delivered \(delivered.received) of \(delivered.expected): \(delivered.lost) lost, \(delivered.duplicated) \
            duplicated, \(delivered.outOfOrder) out of order, \(delivered.resets) resets (target: zero lost or \
            duplicated: \(clean ? "met" : "NOT MET")).
            ² References from the issue, measured on this machine, not by this run: \
            \(summary.references.joined(separator: "; ")).
            ³ \(summary.overheadMethod); the observer drained \(summary.drainedChanges) changes\
            \(summary.drainResets > 0 ? " and \(summary.drainResets) resets (it fell behind)" : ""). \
            Cost = observed − unobserved.
            """
    }

    /// `paragraph` in lines of at most `width` characters, the later ones indented by two spaces.
    private static func wrap(_ paragraph: String, width: Int = 110) -> String {
        var lines: [String] = []
        var line = ""
        for word in paragraph.split(separator: " ") {
            if !line.isEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = "  "
            }
            line += (line.isEmpty || line == "  " ? "" : " ") + word
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }
}
