import Dispatch
import Foundation
import GroupDefaultsWire
import Synchronization

/// Long-polls and event streams waiting on a suite's head revision, woken in-process after each
/// committed push, at their deadline, or when waits are ended (graceful shutdown).
///
/// A wait is a continuation in a table and a timer on a dispatch queue: no child tasks, so that a
/// thousand waiting long-polls cost a thousand small records rather than a thousand task groups.
/// A watch (a parked event stream's) is a callback in the same table, with no timer.
final class ChangeWaiters: Sendable {
    /// A suite, equal and hashed by its names' bytes (`ExactName`): two spellings of one text are
    /// two suites.
    struct SuiteKey: Hashable, Sendable {
        var account: String
        var suite: String

        static func == (a: SuiteKey, b: SuiteKey) -> Bool { a.account.isSameName(as: b.account) && a.suite.isSameName(as: b.suite) }
        func hash(into hasher: inout Hasher) {
            hasher.combine(account.exact)
            hasher.combine(suite.exact)
        }
    }

    private struct Waiter {
        var after: UInt64
        /// Called once, outside the lock, by whoever takes the waiter out of the table.
        var wake: @Sendable (ChangeWatch.Wake) -> Void
    }

    private struct State {
        var waiters: [SuiteKey: [UInt64: Waiter]] = [:]
        /// After `endAll`, waits return at once.
        var ended = false
    }

    private let state = Mutex(State())
    private let nextID = Atomic<UInt64>(0)

    /// Suspends until `notify` reports a head past `after` for `key`, `resume` is called with its id
    /// (`registered` receives it once the waiter is in the table, to re-check the stored head and so
    /// close the race with a push that committed just before), `timeout` passes, the task is
    /// cancelled, or waits are ended.
    func wait(_ key: SuiteKey, after: UInt64, timeout: Duration, registered: @Sendable @escaping (UInt64) -> Void) async {
        let id = nextID.add(1, ordering: .relaxed).newValue
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                guard add(key, id: id, Waiter(after: after) { _ in continuation.resume() }, unless: Task.isCancelled) else {
                    return continuation.resume()
                }
                let nanoseconds = timeout.components.seconds * 1_000_000_000 + timeout.components.attoseconds / 1_000_000_000
                DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds))) { [weak self] in
                    self?.resume(key, id: id)
                }
                registered(id)
            }
        } onCancel: {
            resume(key, id: id)
        }
    }

    /// `wake` once `notify` reports a head past `after` for `key`, `resume` is called with its id
    /// (`registered`, as for `wait`), or waits are ended (`.ended`, at once if they are); no timer,
    /// no task. The watch's `cancel` takes the waiter out.
    func watch(
        _ key: SuiteKey,
        after: UInt64,
        registered: @Sendable @escaping (UInt64) -> Void,
        wake: @Sendable @escaping (ChangeWatch.Wake) -> Void
    ) -> ChangeWatch {
        let id = nextID.add(1, ordering: .relaxed).newValue
        guard add(key, id: id, Waiter(after: after, wake: wake), unless: false) else {
            wake(.ended)
            return ChangeWatch {}
        }
        registered(id)
        return ChangeWatch { [weak self] in _ = self?.take(key, id: id) }
    }

    /// Puts the waiter in the table, unless `cancelled` or waits are ended (then false).
    private func add(_ key: SuiteKey, id: UInt64, _ waiter: Waiter, unless cancelled: Bool) -> Bool {
        state.withLock { state in
            if cancelled || state.ended { return false }
            state.waiters[key, default: [:]][id] = waiter
            return true
        }
    }

    private func take(_ key: SuiteKey, id: UInt64) -> Waiter? {
        state.withLock { state in
            let waiter = state.waiters[key]?.removeValue(forKey: id)
            if state.waiters[key]?.isEmpty == true { state.waiters[key] = nil }
            return waiter
        }
    }

    /// How many are waiting (tests wait for a long-poll to park).
    var count: Int { state.withLock { $0.waiters.values.reduce(0) { $0 + $1.count } } }

    /// Wakes one waiter (its deadline, cancellation, or the head was already past when it
    /// registered); nothing if it was woken already.
    func resume(_ key: SuiteKey, id: UInt64) {
        take(key, id: id)?.wake(.changed)
    }

    /// Wakes every waiter of `key` whose revision `head` has passed.
    func notify(_ key: SuiteKey, head: UInt64) {
        let woken = state.withLock { state -> [Waiter] in
            guard let suiteWaiters = state.waiters[key] else { return [] }
            let passed = suiteWaiters.filter { $0.value.after < head }
            for id in passed.keys { state.waiters[key]?.removeValue(forKey: id) }
            if state.waiters[key]?.isEmpty == true { state.waiters[key] = nil }
            return Array(passed.values)
        }
        for waiter in woken { waiter.wake(.changed) }
    }

    /// Wakes every waiter, and makes every later wait return at once.
    func endAll() {
        let woken = state.withLock { state -> [Waiter] in
            state.ended = true
            defer { state.waiters = [:] }
            return state.waiters.values.flatMap(\.values)
        }
        for waiter in woken { waiter.wake(.ended) }
    }
}
