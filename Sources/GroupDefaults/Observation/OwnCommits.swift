import Synchronization

/// The sequence numbers of the changes this process committed to a store, so that an observer can
/// tell its own process's changes from another process's (the change log records the store's
/// origin, which every process on the device shares). A range is added inside its write
/// transaction, before the commit, so that no reader can see the commit before the range; it is
/// removed again if the commit fails. The last `capacity` commits are remembered: a change
/// replayed from further back is reported as another process's.
final class OwnCommits: Sendable {
    static let capacity = 4096

    private let ranges = Mutex<[ClosedRange<UInt64>]>([])  // in commit order

    func add(_ range: ClosedRange<UInt64>) {
        ranges.withLock { ranges in
            ranges.append(range)
            if ranges.count > Self.capacity { ranges.removeFirst(ranges.count - Self.capacity) }
        }
    }

    func remove(_ range: ClosedRange<UInt64>) {
        ranges.withLock { ranges in ranges.removeAll { $0 == range } }
    }

    func contains(_ sequence: UInt64) -> Bool {
        ranges.withLock { ranges in ranges.reversed().contains { $0.contains(sequence) } }
    }
}
