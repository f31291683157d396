import Dispatch
import Glibc
internal import GroupDefaultsLMDB
import Synchronization

/// When this process makes the suite's durability points: flushed copies that a power cut cannot
/// damage and that opening after a reboot puts back (`DurableCopy` in GroupDefaultsLMDB has the
/// mechanism and why).
///
/// A commit that was not flushed (`Durability.processCrashSafe`) asks for a point within its
/// handle's `durabilityInterval`; one timer serves every commit until it fires, so a burst of
/// writes costs one copy. A point is also made when the last handle of the process closes
/// (`finish`) and when the process exits normally (`exit`, or returning from `main`). A flushed
/// commit (`.fsyncEveryCommit`) and `synchronize()` make their point themselves, at once. Only a
/// process killed within the interval after its last write leaves that write without a point: it
/// survives anything but a power cut or operating-system crash, like every write in the page cache.
final class DurabilityPoints: Sendable {
    private struct Due {
        var deadline: ContinuousClock.Instant
        var interval: Duration
        var generation: UInt64
    }

    private let environment: Environment
    private let report: @Sendable (any Error) -> Void
    /// The point asked for and not yet made, if any.
    private let due = Mutex<Due?>(nil)
    private let generations = Atomic<UInt64>(0)
    /// Held while a point is made; true once `finish` ran (the environment may be closed then).
    private let making = Mutex<Bool>(false)

    init(environment: Environment, report: @escaping @Sendable (any Error) -> Void) {
        self.environment = environment
        self.report = report
        _ = Self.exitHookInstalled
    }

    /// A commit that was not flushed: a point within `interval`.
    func committed(within interval: Duration) {
        let scheduled = due.withLock { due -> UInt64? in
            // A point asked for earlier within no longer an interval comes soon enough (the common
            // case, a burst of writes: no clock read).
            if let due, due.interval <= interval { return nil }
            let deadline = ContinuousClock.now + interval
            if let due, due.deadline <= deadline { return nil }
            let generation = generations.add(1, ordering: .relaxed).newValue
            due = Due(deadline: deadline, interval: interval, generation: generation)
            return generation
        }
        guard let scheduled else { return }
        let nanoseconds = max(0, interval.components.seconds * 1_000_000_000 + interval.components.attoseconds / 1_000_000_000)
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) { [self] in
            making.withLock { finished in
                guard !finished, takeDue(ifGeneration: scheduled) else { return }
                make()
            }
        }
    }

    /// Makes the point asked for, if any, now (the process is exiting).
    func makeDuePoint() {
        making.withLock { finished in
            guard !finished, takeDue(ifGeneration: nil) else { return }
            make()
        }
    }

    /// The last handle of the process closes: makes the point asked for, if any; none after.
    func finish() {
        making.withLock { finished in
            guard !finished else { return }
            finished = true
            if takeDue(ifGeneration: nil) { make() }
        }
    }

    /// Clears the point asked for if there is one (of `generation`, if given); returns whether it did.
    private func takeDue(ifGeneration generation: UInt64?) -> Bool {
        due.withLock { due in
            guard let current = due, generation == nil || current.generation == generation else { return false }
            due = nil
            return true
        }
    }

    private func make() {
        do { try environment.makeDurabilityPoint() } catch { report(error) }
    }

    /// Every open suite of the process makes its due point when the process exits normally.
    private static let exitHookInstalled: Bool = {
        atexit { SuiteStore.makeDueDurabilityPoints() }
        return true
    }()
}
