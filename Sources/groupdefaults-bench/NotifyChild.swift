import Foundation
import Glibc
import GroupDefaults
import SystemCalls

/// The child processes of the change-notification benchmark: `groupdefaults-bench notify-child
/// MODE DIRECTORY …`, each on the suite `StoreSubject.suiteName` in `DIRECTORY`.
///
/// - `observe DIRECTORY TOTAL WARMUP`: opens the suite, creates a `ChangeFeed`, prints `ready`,
///   then expects TOTAL sets of `NotifyChild.key(0 ..< TOTAL)`, in that order, and the end key.
///   For each set after the first WARMUP it records CLOCK_MONOTONIC when `next()` returned minus
///   the value, which the writer took just before its `set`. Prints an `ObserverReport` (JSON).
/// - `write DIRECTORY TOTAL WARMUP PACE_NS`: sets those keys, each to CLOCK_MONOTONIC just before
///   the `set`, one every PACE_NS, then the end key. Prints a `WriterReport` (JSON).
/// - `drain DIRECTORY`: an observer that only reads every change (a `ChangeFeed`, values
///   included) until the end key. Prints an `ObserverReport` without latencies.
enum NotifyChild {
    static let command = "notify-child"
    static let endKey = "notify.end"
    private static let keyPrefix = "notify.latency."

    static func key(_ index: Int) -> String {
        keyPrefix + String(format: "%06d", index)
    }

    private static func index(ofKey key: String) -> Int? {
        key.hasPrefix(keyPrefix) ? Int(key.dropFirst(keyPrefix.count)) : nil
    }

    /// What an observer child received.
    struct ObserverReport: Codable {
        /// Sets of the expected keys received, duplicates included.
        var received = 0
        /// Expected keys never received.
        var lost = 0
        /// Expected keys received more than once.
        var duplicated = 0
        /// Changes received before one that was due earlier.
        var outOfOrder = 0
        /// Changes whose sequence number was not the previous one's + 1 (one writer, nothing else
        /// in the log), resets apart.
        var sequenceErrors = 0
        var resets = 0
        /// Changes that were neither an expected key's set nor the end key.
        var unexpected = 0
        /// No change came for `NotifyChild.silence` before the end key.
        var timedOut = false
        /// Latencies of the changes after the warm-up, ns, in order (observe mode).
        var latencies: [Int64] = []
        /// The first few problems, for the error message.
        var problems: [String] = []

        var isClean: Bool {
            lost == 0 && duplicated == 0 && outOfOrder == 0 && sequenceErrors == 0 && resets == 0
                && unexpected == 0 && !timedOut
        }

        var problemSummary: String {
            "received \(received), lost \(lost), duplicated \(duplicated), out of order \(outOfOrder), "
                + "sequence errors \(sequenceErrors), resets \(resets), unexpected \(unexpected)"
                + (timedOut ? ", timed out" : "") + (problems.isEmpty ? "" : "; first: " + problems.joined(separator: "; "))
        }

        mutating func note(_ problem: String) {
            if problems.count < 5 { problems.append(problem) }
        }
    }

    /// What the writer child did.
    struct WriterReport: Codable {
        var written: Int
        /// The duration of each timed `set` (after the warm-up), ns.
        var setMedianNs: Double
        var setP99Ns: Double
    }

    /// How long an observer waits for the next change before it gives up.
    static let silence: Duration = .seconds(30)

    static func run(arguments: [String]) throws {
        let usage = "usage: groupdefaults-bench \(command) observe DIR TOTAL WARMUP | write DIR TOTAL WARMUP PACE_NS | drain DIR"
        guard arguments.count >= 2 else { throw BenchError(usage) }
        let directory = URL(fileURLWithPath: arguments[1])
        let numbers = arguments.dropFirst(2).compactMap { Int($0) }
        guard numbers.count == arguments.count - 2 else { throw BenchError(usage) }
        switch (arguments[0], numbers.count) {
        case ("observe", 2): try observe(directory: directory, total: numbers[0], warmup: numbers[1])
        case ("drain", 0): try observe(directory: directory, total: nil, warmup: 0)
        case ("write", 3): try write(directory: directory, total: numbers[0], warmup: numbers[1], pace: Int64(numbers[2]))
        default: throw BenchError(usage)
        }
    }

    /// Observes the suite until the end key changes; with `total` nil (drain), counts sets of any
    /// key.
    private static func observe(directory: URL, total: Int?, warmup: Int) throws {
        let defaults = try StoreSubject.open(directory: directory)
        var report = ObserverReport()
        try withExtendedLifetime(defaults) {
            // The feed watches the suite from here on; it is released (and its watch closed)
            // before this process exits.
            let feed = try defaults.changeFeed()
            // The writer ends a run by setting `endKey` to a new value.
            let initialEnd = defaults.integer(forKey: endKey)
            var previousSequence = feed.cursor
            var seen = [Bool](repeating: false, count: total ?? 0)
            var next = 0
            report.latencies.reserveCapacity(max(0, (total ?? 0) - warmup))
            print("ready")
            fflush(nil)  // all streams: stdout is a pipe, so fully buffered

            while true {
                guard let change = try feed.next(timeout: silence) else {
                    report.timedOut = true
                    break
                }
                let delivered = Clock.nanoseconds()
                if change.kind == .reset {
                    // The feed skipped to the end of the log: re-read what matters, the end key.
                    report.resets += 1
                    report.note("reset at \(change.sequence) after \(previousSequence)")
                    previousSequence = change.sequence
                    if defaults.integer(forKey: endKey) != initialEnd { break }
                    continue
                }
                if change.sequence != previousSequence + 1 {
                    report.sequenceErrors += 1
                    report.note("sequence \(change.sequence) after \(previousSequence)")
                }
                previousSequence = change.sequence
                if change.kind == .set && change.key == endKey { break }
                guard let total else {
                    report.received += 1
                    continue
                }
                guard change.kind == .set, let index = index(ofKey: change.key), index < total,
                    case .integer(let written)? = change.value
                else {
                    report.unexpected += 1
                    report.note("unexpected change \(change)")
                    continue
                }
                report.received += 1
                if seen[index] {
                    report.duplicated += 1
                    report.note("\(change.key) again at \(change.sequence)")
                    continue
                }
                seen[index] = true
                if index != next {
                    report.outOfOrder += 1
                    report.note("\(change.key) at \(change.sequence) while \(key(next)) was due")
                }
                next = index + 1
                if index >= warmup { report.latencies.append(delivered - Int64(written)) }
            }
            report.lost = seen.count(where: { !$0 })
        }
        print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
    }

    private static func write(directory: URL, total: Int, warmup: Int, pace: Int64) throws {
        let defaults = try StoreSubject.open(directory: directory)
        let keys = (0..<total).map(key)
        var durations: [Double] = []
        durations.reserveCapacity(max(0, total - warmup))
        for index in 0..<total {
            let start = Clock.nanoseconds()
            defaults.set(Int(start), forKey: keys[index])
            let end = Clock.nanoseconds()
            if index >= warmup { durations.append(Double(end - start)) }
            sleep(until: start + pace)
        }
        defaults.set(defaults.integer(forKey: endKey) + 1, forKey: endKey)
        if let error = defaults.lastError { throw BenchError("notify writer: \(error)") }
        let report = WriterReport(
            written: total,
            setMedianNs: median(durations),
            setP99Ns: percentile(durations.sorted(), 0.99)
        )
        print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
    }

    /// Sleeps until CLOCK_MONOTONIC reaches `deadline` (ns): pacing, not synchronisation.
    private static func sleep(until deadline: Int64) {
        var time = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        _ = SystemCall.retryingReturnedEINTR { clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &time, nil) }
    }
}

/// The `fraction` percentile of `sorted` by nearest rank (0.5: the median's upper neighbour
/// for an even count).
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    precondition(!sorted.isEmpty, "percentile of no samples")
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}
