import Foundation
import Synchronization

/// What this server instance did in the last hour, minute by minute, for the console's charts:
/// pushes applied, and the most event streams open at once. Kept in memory (an instance's own
/// figures; `/metrics` has the same counters for a monitoring system).
package final class ConsoleActivity: Sendable {
    /// One minute's figures.
    struct Minute: Sendable, Hashable {
        /// Minutes since 1970.
        var minute: Int64
        var pushes = 0
        /// The most event streams open at once in the minute.
        var peakStreams = 0
        /// The event streams open at its end (or now).
        var endStreams = 0
    }

    /// How many minutes the charts show.
    static let window = 60

    private struct State {
        var minutes: [Minute] = []  // oldest first, at most `window`
        var openStreams = 0
        /// The streams open at the end of the last minute dropped from `minutes`.
        var openBefore = 0
    }

    private let state = Mutex(State())

    /// No activity yet.
    package init() {}

    /// A push was applied.
    func pushed(now: Date = Date()) {
        state.withLock { state in Self.update(&state, now) { $0.pushes += 1 } }
    }

    /// An event stream opened (`+1`) or ended (`-1`).
    func streams(_ change: Int, now: Date = Date()) {
        state.withLock { state in
            state.openStreams += change
            let open = state.openStreams
            Self.update(&state, now) { minute in
                minute.peakStreams = max(minute.peakStreams, open)
                minute.endStreams = open
            }
        }
    }

    /// The last `window` minutes, oldest first; a minute without a push or a stream opening or
    /// ending shows no pushes and the streams open then.
    func lastHour(now: Date = Date()) -> [Minute] {
        state.withLock { state in
            let last = Self.minute(of: now)
            let first = last - Int64(Self.window) + 1
            var recorded: [Int64: Minute] = [:]
            var open = state.openBefore
            for minute in state.minutes {
                if minute.minute < first { open = minute.endStreams } else { recorded[minute.minute] = minute }
            }
            var result: [Minute] = []
            for minute in first...last {
                if let figures = recorded[minute] {
                    result.append(figures)
                    open = figures.endStreams
                } else {
                    result.append(Minute(minute: minute, pushes: 0, peakStreams: open, endStreams: open))
                }
            }
            return result
        }
    }

    private static func minute(of date: Date) -> Int64 { Int64((date.timeIntervalSince1970 / 60).rounded(.down)) }

    /// Applies `change` to the current minute's record, made when the minute is new (the oldest
    /// dropped beyond the window).
    private static func update(_ state: inout State, _ now: Date, _ change: (inout Minute) -> Void) {
        let minute = minute(of: now)
        if state.minutes.last?.minute != minute {
            let open = state.openStreams
            state.minutes.append(Minute(minute: minute, pushes: 0, peakStreams: open, endStreams: open))
        }
        change(&state.minutes[state.minutes.count - 1])
        while let first = state.minutes.first, first.minute <= minute - Int64(window) {
            state.openBefore = first.endStreams
            state.minutes.removeFirst()
        }
    }
}
