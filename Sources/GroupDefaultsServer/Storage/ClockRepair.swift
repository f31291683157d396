import Foundation
package import GroupDefaultsWire

/// `groupdefaults-server suites repair-clock`: finds the entries of a suite stamped more than the
/// allowed skew ahead of the server's clock (stored while a clock was wrong, or restored from a
/// backup of such a server) and, in a plain suite, stamps them again with the server's clock,
/// value unchanged, or drops them (a deletion stamped now). Devices refuse such entries one by one
/// and any honest write replaces them (`PushStep`); the repair makes the server's copy honest again
/// without waiting for one, and devices receive it at their next pull.
///
/// It runs through the storage protocol's own push, so both backends share it and the push rule
/// applies: each repair takes a revision. An end-to-end encrypted suite's entries cannot be
/// stamped again by the server (the stamp is sealed with the value): they are listed, and a device
/// holding the key repairs them by writing the keys again.
package enum ClockRepair {
    /// What to do with the entries found.
    package enum Action: Sendable {
        /// Only list them.
        case list
        /// Stamp each again with the server's clock, keeping its value (or deletion).
        case restamp
        /// Replace each with a deletion stamped with the server's clock.
        case drop
    }

    /// What a repair found and did.
    package struct Outcome: Sendable {
        /// The entries stamped too far ahead, as they were.
        package var found: [SyncEntry] = []
        /// How many of them were stamped again or dropped.
        package var repaired = 0
        /// Whether the suite is end-to-end encrypted (then nothing can be repaired here).
        package var sealed = false
    }

    /// Finds `account`'s `suite`'s far-future entries and applies `action` to them; each repair is
    /// a version in the key's history, which keeps `historyDepth` (the server's `--history`).
    package static func run(
        _ storage: some SyncStore,
        account: String,
        suite: String,
        action: Action,
        historyDepth: Int = 10,
        now: UInt64 = HLC.wallClockMilliseconds(),
        maximumSkew: UInt64 = HLC.maximumDrift
    ) async throws -> Outcome {
        var outcome = Outcome()
        var after: String?
        repeat {
            let page = try await storage.snapshot(account: account, suite: suite, after: after, limit: 1000).page()
            outcome.found += page.entries.filter { $0.hlc.isAhead(of: now, by: maximumSkew) }
            outcome.sealed = outcome.sealed || page.entries.contains { $0.sealed != nil }
            after = page.next
        } while after != nil
        guard action != .list, !outcome.sealed, !outcome.found.isEmpty else { return outcome }
        let stamp = HLC(milliseconds: now, counter: 0)
        let serverTime = TypedJSONDate.format(milliseconds: now)
        for entry in outcome.found {
            // The writer's device id is kept: the entry is the same write, honestly stamped.
            let op = PushOp(key: entry.key, value: action == .drop ? nil : entry.value, hlc: stamp)
            var push = try PreparedPush(PushRequest(deviceID: entry.origin, batchID: "repair-clock-\(UUID().uuidString.lowercased())", ops: [op]))
            push.clock = PreparedPush.Clock(now: now, maximumSkew: maximumSkew)
            let response = try await storage.push(
                account: account,
                suite: suite,
                push: push,
                quota: SuiteQuota(maxKeys: .max, maxBytes: .max, historyDepth: historyDepth),
                serverTime: serverTime
            )
            outcome.repaired += response.results.count { $0.status == .applied }
        }
        return outcome
    }
}
