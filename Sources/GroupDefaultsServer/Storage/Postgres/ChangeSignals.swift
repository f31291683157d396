import Dispatch
import GroupDefaultsWire
import Synchronization

/// The account and suite a change belongs to.
struct SuiteID: Hashable, Sendable {
    var account: String
    var suite: String

    /// By the names' bytes (`ExactName`): two spellings of one text are two accounts, two suites.
    static func == (a: SuiteID, b: SuiteID) -> Bool { a.account.isSameName(as: b.account) && a.suite.isSameName(as: b.suite) }
    func hash(into hasher: inout Hasher) {
        hasher.combine(account.exact)
        hasher.combine(suite.exact)
    }
}

/// Why a waiter was woken.
enum ChangeWake: Sendable {
    /// The suite's head moved to this revision.
    case head(UInt64)
    /// Something may have changed (the listener reconnected and may have missed notifications):
    /// read the table.
    case recheck
}

/// The waiters of `waitForChange` on one storage instance, and the watches of parked event
/// streams (`watchForChange`), woken per suite. A waiter registers before it reads the head, so a
/// wake between the read and the wait is not lost.
final class ChangeSignals: Sendable {
    private struct Waiter {
        var suite: SuiteID
        var wake: ChangeWake?
        /// The deadline of `wait(_:until:)` passed.
        var expired = false
        /// Called once, outside the lock, at the next wake (nil: the deadline or cancellation): a
        /// suspended `wait`'s continuation, or a watch's callback.
        var onWake: (@Sendable (ChangeWake?) -> Void)?
        /// A watch: it leaves the table when it is woken.
        var isWatch = false
    }

    private struct State {
        var nextID = 0
        var waiters: [Int: Waiter] = [:]
        /// The ids in `waiters` per suite, so that a suite's change finds its waiters without
        /// looking at every other suite's (10,000 parked streams, each on a suite of its own).
        var bySuite: [SuiteID: Set<Int>] = [:]

        mutating func remove(_ id: Int) {
            guard let waiter = waiters.removeValue(forKey: id) else { return }
            if bySuite[waiter.suite]?.remove(id) != nil, bySuite[waiter.suite]?.isEmpty == true {
                bySuite[waiter.suite] = nil
            }
        }
    }

    private let state = Mutex(State())

    func register(_ suite: SuiteID) -> Int {
        add(Waiter(suite: suite))
    }

    /// A watch of `suite`: `wake` is called once, at its next wake (`fire`, `signal`,
    /// `signalAll`), unless `unregister` took it out before.
    func watch(_ suite: SuiteID, wake: @escaping @Sendable (ChangeWake?) -> Void) -> Int {
        add(Waiter(suite: suite, onWake: wake, isWatch: true))
    }

    private func add(_ waiter: Waiter) -> Int {
        state.withLock { state in
            state.nextID += 1
            state.waiters[state.nextID] = waiter
            state.bySuite[waiter.suite, default: []].insert(state.nextID)
            return state.nextID
        }
    }

    /// Takes the registration out; a suspended `wait` has returned by then, a watch is not woken.
    func unregister(_ id: Int) {
        state.withLock { $0.remove(id) }
    }

    /// Suspends until the registration is woken (at once if it already was); nil when cancelled.
    func wait(_ id: Int) async -> ChangeWake? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ChangeWake?, Never>) in
                let resumeNow: ChangeWake?? = state.withLock { state in
                    guard var waiter = state.waiters[id], !waiter.expired else { return .some(nil) }
                    if let wake = waiter.wake {
                        waiter.wake = nil
                        state.waiters[id] = waiter
                        return .some(wake)
                    }
                    if Task.isCancelled { return .some(nil) }
                    waiter.onWake = { continuation.resume(returning: $0) }
                    state.waiters[id] = waiter
                    return .none
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            takeOnWake(id)?(nil)
        }
    }

    /// `wait`, ending with nil at `deadline` at the latest: a timer ends it then, unless it was
    /// woken before.
    func wait(_ id: Int, until deadline: ContinuousClock.Instant) async -> ChangeWake? {
        // A dispatch timer rather than a task: a waiting long-poll keeps a small block, not a task
        // and its memory. Ids are never reused, so a timer that fires after the wait ended does nothing.
        let remaining = max(.zero, deadline - ContinuousClock.now).components
        let nanoseconds = Int(clamping: remaining.seconds * 1_000_000_000 + remaining.attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.expire(id) }
        return await wait(id)
    }

    /// Wakes the watch or waiter `id` now, as a change (a watch that found the head already past).
    func fire(_ id: Int) {
        guard let (onWake, wake) = state.withLock({ Self.wake(id, in: &$0, with: .recheck) }) else { return }
        onWake(wake)
    }

    /// Ends the wait of `id` with nil (now, or at once when it starts waiting).
    private func expire(_ id: Int) {
        let onWake = state.withLock { state -> (@Sendable (ChangeWake?) -> Void)? in
            guard state.waiters[id] != nil else { return nil }
            state.waiters[id]!.expired = true
            defer { state.waiters[id]!.onWake = nil }
            return state.waiters[id]!.onWake
        }
        onWake?(nil)
    }

    /// The waiter's `onWake`, taken out (a cancelled wait's).
    private func takeOnWake(_ id: Int) -> (@Sendable (ChangeWake?) -> Void)? {
        state.withLock { state in
            let onWake = state.waiters[id]?.onWake
            state.waiters[id]?.onWake = nil
            return onWake
        }
    }

    /// How many waiters are suspended now, waiting for a wake, and watches wait.
    var suspendedCount: Int { state.withLock { $0.waiters.values.count { $0.onWake != nil } } }

    /// Wakes every waiter of `suite`.
    func signal(_ suite: SuiteID, head: UInt64) {
        wake({ $0.bySuite[suite].map(Array.init) ?? [] }, with: .head(head))
    }

    /// Wakes every waiter, of every suite.
    func signalAll() {
        wake({ Array($0.waiters.keys) }, with: .recheck)
    }

    private func wake(_ ids: (State) -> [Int], with wake: ChangeWake) {
        let woken = state.withLock { state in ids(state).compactMap { Self.wake($0, in: &state, with: wake) } }
        for (onWake, wake) in woken { onWake(wake) }
    }

    /// Wakes the waiter `id` in `state`: returns its `onWake` and what to call it with, to be
    /// called outside the lock; or keeps the wake for its next `wait`.
    private static func wake(_ id: Int, in state: inout State, with wake: ChangeWake) -> (@Sendable (ChangeWake?) -> Void, ChangeWake)? {
        guard let waiter = state.waiters[id] else { return nil }
        let combined = combine(waiter.wake, wake)
        guard let onWake = waiter.onWake else {
            state.waiters[id]!.wake = combined
            return nil
        }
        if waiter.isWatch {
            state.remove(id)
        } else {
            state.waiters[id]!.onWake = nil
            state.waiters[id]!.wake = nil
        }
        return (onWake, combined)
    }

    private static func combine(_ pending: ChangeWake?, _ new: ChangeWake) -> ChangeWake {
        switch (pending, new) {
        case (nil, _): new
        case (.head(let a)?, .head(let b)): .head(max(a, b))
        default: .recheck
        }
    }
}
