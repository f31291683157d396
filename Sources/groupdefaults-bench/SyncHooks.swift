import Foundation
import GroupDefaults
import GroupDefaultsWire

/// The sync hooks' costs (`--only sync`): what a set pays in a synced suite (its pending mark, in
/// the same transaction), and `applyRemote` of 1,000 pulled entries in one transaction beside raw
/// LMDB writing 1,000 keys in one transaction.
enum SyncHooks {
    struct Summary: Encodable {
        var setSyncOffNs: Double
        var setSyncOnNs: Double
        var costPerSetNs: Double
        var applyRemoteNs: Double
        var rawWriteNs: Double
        var entries: Int
        var method: String
    }

    static let entryCount = Workload.keyCount

    static func measure(
        sandbox: Sandbox,
        workload: Workload,
        raw: RawSubject,
        quick: Bool,
        progress: (String) -> Void
    ) throws -> Summary {
        progress("sync hooks: set with sync off and on")
        let off = try SharedDefaults(suiteName: "sync-off", directory: URL(fileURLWithPath: try sandbox.makeDirectory("sync-off")))
        let on = try SharedDefaults(suiteName: "sync-on", directory: URL(fileURLWithPath: try sandbox.makeDirectory("sync-on")))
        try on.enableSync(server: "https://sync.example.com")
        for defaults in [off, on] { try populate(defaults, workload) }

        // Alternating rounds, so that both sides see the same machine.
        let rounds = quick ? 2 : 4
        let batchesPerRound = quick ? 3 : 10
        var offSamples: [Double] = []
        var onSamples: [Double] = []
        var first = 0
        for _ in 0..<rounds {
            for (defaults, isOn) in [(off, false), (on, true)] {
                let plan = Plan(batches: batchesPerRound, opsPerBatch: Workload.keyCount)
                let median = try medianNanosecondsPerOp(plan) { batchFirst, ops in
                    timeBatch(first: first + batchFirst, ops: ops) { op in
                        defaults.set(workload.string(forOp: op), forKey: workload.key(forOp: op))
                        return 0
                    }
                }
                if isOn { onSamples.append(median) } else { offSamples.append(median) }
            }
            first += (batchesPerRound + 1) * Workload.keyCount
        }
        for defaults in [off, on] {
            if let error = defaults.lastError { throw BenchError("sync hooks, set: \(error)") }
        }
        guard try on.pendingCount() == Workload.keyCount, try off.pendingCount() == 0 else {
            throw BenchError("sync hooks: the synced suite should have every key pending, the other none")
        }

        progress("sync hooks: applyRemote of \(entryCount) entries in one transaction")
        let runs = quick ? 5 : 21
        var applySamples: [Double] = []
        let origin: UInt64 = 0xC0FFEE
        var base: UInt64 = 0
        for run in 0...runs {
            // Each run's entries are newer than the last run's (a run may take less than a
            // millisecond), so every one of them is applied.
            base = max(HLC.wallClockMilliseconds(), base + 1)
            let entries = (0..<entryCount).map { index in
                SyncEntry(
                    key: workload.key(forOp: index),
                    value: .string(workload.string(forOp: index + run * entryCount)),
                    hlc: HLC(milliseconds: base, counter: UInt16(index)),
                    origin: origin
                )
            }
            let start = Clock.nanoseconds()
            let result = try on.applyRemote(entries, cursor: UInt64(run + 1))
            let elapsed = Clock.nanoseconds() - start
            guard result.applied.count == entryCount else {
                throw BenchError("sync hooks: applyRemote applied \(result.applied.count) of \(entryCount)")
            }
            if run > 0 { applySamples.append(Double(elapsed)) }
        }
        guard on.string(forKey: workload.key(forOp: 0)) == workload.string(forOp: runs * entryCount),
            try on.syncState().cursor == UInt64(runs + 1)
        else {
            throw BenchError("sync hooks: the applied entries or the cursor did not read back")
        }
        let rawWrite = try raw.medianTransaction(writing: entryCount, runs: runs)

        let offMedian = median(offSamples)
        let onMedian = median(onSamples)
        return Summary(
            setSyncOffNs: offMedian,
            setSyncOnNs: onMedian,
            costPerSetNs: onMedian - offMedian,
            applyRemoteNs: median(applySamples),
            rawWriteNs: rawWrite,
            entries: entryCount,
            method: "set(_: String, forKey:) on \(Workload.keyCount) keys, medians of \(rounds) rounds alternating "
                + "\(batchesPerRound) batches of \(Workload.keyCount) on an unsynced and a synced suite; applyRemote: "
                + "median of \(runs) calls of \(entryCount) newer entries after a warm-up call; raw: \(entryCount) "
                + "puts in one transaction"
        )
    }

    private static func populate(_ defaults: SharedDefaults, _ workload: Workload) throws {
        try defaults.write { tx in
            for index in 0..<Workload.keyCount {
                try tx.set(.string(workload.initialString(index)), forKey: workload.keys[index])
            }
        }
    }

    static func rows(_ summary: Summary) -> [Report.Row] {
        [
            Report.Row(
                only: "sync-set-off",
                label: "set string, sync off",
                groupDefaults: summary.setSyncOffNs,
                note: "alternating with the next row"
            ),
            Report.Row(
                only: "sync-set-on",
                label: "set string, sync on",
                groupDefaults: summary.setSyncOnNs,
                note: "+ pending mark in the same transaction"
            ),
            Report.Row(
                notify: "sync-cost",
                label: "sync cost per set",
                groupDefaults: summary.costPerSetNs,
                rawLMDB: nil,
                userDefaults: nil,
                target: .atMost(nanoseconds: 400)
            ),
            Report.Row(
                measured: "sync-apply-remote",
                label: "applyRemote of \(summary.entries) entries",
                groupDefaults: summary.applyRemoteNs,
                rawLMDB: summary.rawWriteNs,
                note: "raw: \(summary.entries) puts, one transaction",
                target: .atMost(nanoseconds: 2_000_000)
            ),
        ]
    }
}
