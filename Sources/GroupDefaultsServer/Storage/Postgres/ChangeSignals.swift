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

/// The waiters of `waitForChange` on one storage instance, woken per suite. A waiter registers
/// before it reads the head, so a wake between the read and the wait is not lost.
final class ChangeSignals: Sendable {
    private struct Waiter {
        var suite: SuiteID
        var wake: ChangeWake?
        /// The deadline of `wait(_:until:)` passed.
        var expired = false
        var continuation: CheckedContinuation<ChangeWake?, Never>?
    }

    private struct State {
        var nextID = 0
        var waiters: [Int: Waiter] = [:]
    }

    private let state = Mutex(State())

    func register(_ suite: SuiteID) -> Int {
        state.withLock { state in
            state.nextID += 1
            state.waiters[state.nextID] = Waiter(suite: suite)
            return state.nextID
        }
    }

    func unregister(_ id: Int) {
        let continuation = state.withLock { $0.waiters.removeValue(forKey: id)?.continuation }
        continuation?.resume(returning: nil)
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
                    waiter.continuation = continuation
                    state.waiters[id] = waiter
                    return .none
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<ChangeWake?, Never>? in
                let continuation = state.waiters[id]?.continuation
                state.waiters[id]?.continuation = nil
                return continuation
            }
            continuation?.resume(returning: nil)
        }
    }

    /// `wait`, ending with nil at `deadline` at the latest: a timer ends it then, unless it was
    /// woken before.
    func wait(_ id: Int, until deadline: ContinuousClock.Instant) async -> ChangeWake? {
        // A dispatch timer rather than a task: a parked stream keeps a small block, not a task and
        // its memory. Ids are never reused, so a timer that fires after the wait ended does nothing.
        let remaining = max(.zero, deadline - ContinuousClock.now).components
        let nanoseconds = Int(clamping: remaining.seconds * 1_000_000_000 + remaining.attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in self?.expire(id) }
        return await wait(id)
    }

    /// Ends the wait of `id` with nil (now, or at once when it starts waiting).
    private func expire(_ id: Int) {
        let continuation = state.withLock { state -> CheckedContinuation<ChangeWake?, Never>? in
            guard state.waiters[id] != nil else { return nil }
            state.waiters[id]!.expired = true
            defer { state.waiters[id]!.continuation = nil }
            return state.waiters[id]!.continuation
        }
        continuation?.resume(returning: nil)
    }

    /// How many waiters are suspended now, waiting for a wake.
    var suspendedCount: Int { state.withLock { $0.waiters.values.count { $0.continuation != nil } } }

    /// Wakes every waiter of `suite`.
    func signal(_ suite: SuiteID, head: UInt64) {
        wake(where: { $0 == suite }, with: .head(head))
    }

    /// Wakes every waiter, of every suite.
    func signalAll() {
        wake(where: { _ in true }, with: .recheck)
    }

    private func wake(where matches: (SuiteID) -> Bool, with wake: ChangeWake) {
        let continuations = state.withLock { state in
            var continuations: [(CheckedContinuation<ChangeWake?, Never>, ChangeWake)] = []
            for (id, var waiter) in state.waiters where matches(waiter.suite) {
                let combined = Self.combine(waiter.wake, wake)
                if let continuation = waiter.continuation {
                    waiter.continuation = nil
                    waiter.wake = nil
                    continuations.append((continuation, combined))
                } else {
                    waiter.wake = combined
                }
                state.waiters[id] = waiter
            }
            return continuations
        }
        for (continuation, wake) in continuations { continuation.resume(returning: wake) }
    }

    private static func combine(_ pending: ChangeWake?, _ new: ChangeWake) -> ChangeWake {
        switch (pending, new) {
        case (nil, _): new
        case (.head(let a)?, .head(let b)): .head(max(a, b))
        default: .recheck
        }
    }
}
