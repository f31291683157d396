import Synchronization

/// The sequence numbers of the changes this process committed to a store, so that an observer can
/// tell its own process's changes from another process's (the change log records the store's
/// origin, which every process on the device shares). A range is added inside its write
/// transaction, before the commit, so that no reader can see the commit before the range; it is
/// removed again if the commit fails. The last `capacity` commits are remembered, in a ring: a
/// change replayed from further back is reported as another process's.
///
/// Commits of one store take increasing sequence numbers (LMDB has one writer at a time), so the
/// ring is sorted and a lookup is a binary search; adding is O(1). (Appending to an array and
/// dropping its first element cost a set microseconds once the array was full.)
final class OwnCommits: Sendable {
    static let capacity = 4096

    private struct Ring {
        var ranges: [ClosedRange<UInt64>] = []
        /// The index of the oldest range once `ranges` is full.
        var start = 0

        /// The `index`-th oldest range.
        func range(_ index: Int) -> ClosedRange<UInt64> { ranges[(start + index) % ranges.count] }
    }

    private let ring = Mutex(Ring())

    func add(_ range: ClosedRange<UInt64>) {
        ring.withLock { ring in
            if ring.ranges.count < Self.capacity {
                ring.ranges.append(range)
            } else {
                ring.ranges[ring.start] = range
                ring.start = (ring.start + 1) % Self.capacity
            }
        }
    }

    /// Forgets `range` (a commit that failed: it is the newest range).
    func remove(_ range: ClosedRange<UInt64>) {
        ring.withLock { ring in
            guard !ring.ranges.isEmpty else { return }
            let newest = (ring.start + ring.ranges.count - 1) % ring.ranges.count
            guard ring.ranges[newest] == range else { return }
            if ring.start == 0 {
                ring.ranges.removeLast()
            } else {
                // Full ring: unroll it oldest first, then drop the newest.
                ring.ranges = (0..<ring.ranges.count).map { ring.range($0) }
                ring.ranges.removeLast()
                ring.start = 0
            }
        }
    }

    func contains(_ sequence: UInt64) -> Bool {
        ring.withLock { ring in
            var low = 0
            var high = ring.ranges.count - 1
            while low <= high {
                let middle = (low + high) / 2
                let range = ring.range(middle)
                if sequence < range.lowerBound {
                    high = middle - 1
                } else if sequence > range.upperBound {
                    low = middle + 1
                } else {
                    return true
                }
            }
            return false
        }
    }
}
