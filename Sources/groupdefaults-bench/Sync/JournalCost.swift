import Foundation
import GroupDefaults

/// What the conflict journal costs a pull (`groupdefaults-bench sync`): one transaction applying
/// 1,000 pulled entries that each replace a pending local value (each replaced value kept in the
/// journal, which is full and so also drops its oldest entry), beside the same transaction
/// replacing 1,000 values that were already pushed (nothing kept). Timed on the device's own
/// transaction, without the network: the journal's share of a whole pull, requests included, is
/// smaller still.
enum JournalCost {
    static let entries = 1000

    static func measure(root: String, quick: Bool) throws -> ServerReport.Row {
        let withJournal = try SharedDefaults(suiteName: "journal-on", directory: URL(fileURLWithPath: "\(root)/journal-on"))
        let without = try SharedDefaults(suiteName: "journal-off", directory: URL(fileURLWithPath: "\(root)/journal-off"))
        for defaults in [withJournal, without] { try defaults.enableSync(server: "https://sync.example.com") }
        let runs = quick ? 5 : 21
        var samples: [Bool: [Double]] = [true: [], false: []]
        var base: UInt64 = 0
        let remote: UInt64 = 0xC0FFEE
        // The first run of each side warms up; sides alternate, so both see the same machine.
        for run in 0 ... runs {
            for (defaults, pending) in [(withJournal, true), (without, false)] {
                let keys = (0 ..< entries).map { String(format: "setting.%04d", $0) }
                try defaults.write { tx in
                    for key in keys { try tx.set(.string("local \(run)"), forKey: key) }
                }
                if !pending { try defaults.clearPending(try defaults.pendingChanges().map { ($0.key, $0.stamp) }) }
                base = max(HLC.wallClockMilliseconds(), base) + 1
                let pulled = keys.enumerated().map { index, key in
                    SyncEntry(key: key, value: .string("remote \(run)"), hlc: HLC(milliseconds: base, counter: UInt16(index)), origin: remote)
                }
                let start = Clock.nanoseconds()
                let result = try defaults.applyRemote(pulled, cursor: UInt64(run + 1))
                let elapsed = Double(Clock.nanoseconds() - start)
                guard result.applied.count == entries, result.replaced.count == (pending ? entries : 0) else {
                    throw BenchError("journal cost: applied \(result.applied.count), kept \(result.replaced.count) of \(entries)")
                }
                if run > 0 { samples[pending]!.append(elapsed) }
            }
        }
        guard try withJournal.conflicts().count == SharedDefaults.ConflictJournalBounds.standard.maximumCount else {
            throw BenchError("journal cost: the journal should be full")
        }
        let on = median(samples[true]!), off = median(samples[false]!)
        return ServerReport.Row(
            backend: "device", measurement: "pull replacing \(entries) pending values (each kept in the conflict journal)",
            value: on / 1e6, unit: "ms", samples: runs,
            reference: "the same pull replacing \(entries) pushed values, nothing kept: " + ServerFormat.milliseconds(off / 1e6),
            ratio: on / off, target: "≤ 1.3×", met: on / off <= 1.3,
            detail: "the device's applyRemote transaction alone, median of \(runs) alternating runs after a warm-up; the journal full (1,000)")
    }
}
