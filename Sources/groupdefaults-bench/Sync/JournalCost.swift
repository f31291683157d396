import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

/// What the conflict journal costs a pull (`groupdefaults-bench sync`), through the real server:
/// a device's `pull()` of 1,000 entries that each replace a pending local value (each replaced
/// value kept in the journal, which is full, so each also evicts its oldest entry), beside another
/// device's `pull()` of the same 1,000 entries replacing values it had already synced (nothing
/// kept). Runs alternate; a third device writes and pushes the entries before each run.
///
/// The device's own transaction is also timed alone (`applyRemote`, no network), the journal's
/// share of it being larger: it is printed beside the whole pull, not hidden in it.
enum JournalCost {
    static let entries = 1000

    static func measure(devices: Devices, quick: Bool) async throws -> [ServerReport.Row] {
        let suite = "group.bench.journal"
        let writer = try devices.make("journal-writer", suite: suite)
        let keeping = try devices.make("journal-keeping", suite: suite)
        let clean = try devices.make("journal-clean", suite: suite)
        let keys = (0..<entries).map { String(format: "setting.%04d", $0) }
        try await writer.defaults.write { tx in for key in keys { try tx.set(.string("first"), forKey: key) } }
        for device in [writer, keeping, clean] { _ = try await device.engine.syncOnce() }

        let runs = quick ? 5 : 21
        var pulls: [Bool: [Double]] = [true: [], false: []]
        for run in 0...runs {
            // The keeping device changes every key locally and does not push; then the writer's
            // newer values reach the server.
            try await keeping.defaults.write { tx in for key in keys { try tx.set(.string("local \(run)"), forKey: key) } }
            // The writer's values must be the later ones: two devices' writes in one millisecond can
            // get equal clock readings (HLC: milliseconds and a counter each device starts again
            // every millisecond), and the origin then decides. A thousand sets now fit in one.
            try await Task.sleep(for: .milliseconds(2))
            try await writer.defaults.write { tx in for key in keys { try tx.set(.string("remote \(run)"), forKey: key) } }
            guard try await writer.engine.push().pushed == entries else { throw BenchError("journal cost: the writer's push") }
            for (device, keeps) in [(keeping, true), (clean, false)] {
                let start = Clock.nanoseconds()
                let report = try await device.engine.pull()
                let elapsed = Double(Clock.nanoseconds() - start)
                guard report.applied == entries, report.replaced == (keeps ? entries : 0) else {
                    throw BenchError("journal cost: applied \(report.applied), kept \(report.replaced) of \(entries)")
                }
                if run > 0 { pulls[keeps]!.append(elapsed) }  // the first run warms up
            }
        }
        guard try keeping.defaults.conflicts().count == SharedDefaults.ConflictJournalBounds.standard.maximumCount,
            try clean.defaults.conflicts().isEmpty
        else {
            throw BenchError("journal cost: the keeping device's journal should be full, the other's empty")
        }
        let transaction = try transactionAlone(root: devices.root + "/journal-alone", runs: runs)
        let on = median(pulls[true]!)
        let off = median(pulls[false]!)
        return [
            ServerReport.Row(
                backend: "embedded",
                measurement: "pull of \(entries) entries replacing pending values (kept in the conflict journal)",
                value: on / 1e6,
                unit: "ms",
                samples: runs,
                reference: "the same pull replacing synced values, nothing kept: " + ServerFormat.milliseconds(off / 1e6),
                ratio: on / off,
                target: "≤ 1.3×",
                met: on / off <= 1.3,
                detail: "SyncEngine.pull() through the server, medians of \(runs) alternating runs after a warm-up, the journal full (1,000 entries)"
            ),
            ServerReport.Row(
                backend: "device",
                measurement: "its applyRemote transaction alone, \(entries) entries replacing pending values",
                value: transaction.keeping / 1e6,
                unit: "ms",
                samples: runs,
                reference: "replacing synced values: " + ServerFormat.milliseconds(transaction.clean / 1e6),
                ratio: transaction.keeping / transaction.clean,
                target: "—",
                detail:
                    "no network: the journal's share of the device's own work (an extra record per replaced value, about as large as the value's own)"
            ),
        ]
    }

    /// `applyRemote` of 1,000 newer entries over pending values (kept) and over clean ones (not
    /// kept), alternating: medians in nanoseconds.
    private static func transactionAlone(root: String, runs: Int) throws -> (keeping: Double, clean: Double) {
        let keeping = try SharedDefaults(suiteName: "keeping", directory: URL(fileURLWithPath: "\(root)/keeping"))
        let clean = try SharedDefaults(suiteName: "clean", directory: URL(fileURLWithPath: "\(root)/clean"))
        for defaults in [keeping, clean] { try defaults.enableSync(server: "https://sync.example.com") }
        let keys = (0..<entries).map { String(format: "setting.%04d", $0) }
        var samples: [Bool: [Double]] = [true: [], false: []]
        var base: UInt64 = 0
        for run in 0...runs {
            for (defaults, keeps) in [(keeping, true), (clean, false)] {
                try defaults.write { tx in for key in keys { try tx.set(.string("local \(run)"), forKey: key) } }
                if !keeps { try defaults.clearPending(try defaults.pendingChanges().map { ($0.key, $0.stamp) }) }
                base = max(HLC.wallClockMilliseconds(), base) + 1
                let pulled = keys.enumerated().map { index, key in
                    SyncEntry(key: key, value: .string("remote \(run)"), hlc: HLC(milliseconds: base, counter: UInt16(index)), origin: 0xC0FFEE)
                }
                let start = Clock.nanoseconds()
                let result = try defaults.applyRemote(pulled, cursor: UInt64(run + 1))
                let elapsed = Double(Clock.nanoseconds() - start)
                guard result.replaced.count == (keeps ? entries : 0) else { throw BenchError("journal cost: \(result.replaced.count) kept") }
                if run > 0 { samples[keeps]!.append(elapsed) }
            }
        }
        return (median(samples[true]!), median(samples[false]!))
    }
}
