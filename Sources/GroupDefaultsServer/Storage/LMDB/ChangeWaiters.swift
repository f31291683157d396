import Foundation
import Synchronization

/// Long-polls waiting on a suite's head revision, woken in-process after each committed push.
final class ChangeWaiters: Sendable {
    struct SuiteKey: Hashable, Sendable {
        var account: String
        var suite: String
    }

    private struct Waiter {
        var after: UInt64
        var continuation: CheckedContinuation<Void, Never>
    }

    private let state = Mutex<[SuiteKey: [UInt64: Waiter]]>([:])
    private let nextID = Atomic<UInt64>(0)

    /// Suspends until `notify` reports a head past `after` for `key`, `resumeIfHeadPassed` says so,
    /// or the task is cancelled. `registered(id)` runs once the waiter is registered (to re-check
    /// the stored head, closing the race with a push that committed just before).
    func wait(_ key: SuiteKey, after: UInt64, registered: @Sendable @escaping (UInt64) -> Void) async {
        let id = nextID.add(1, ordering: .relaxed).newValue
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let cancelled = state.withLock { waiters -> Bool in
                    if Task.isCancelled { return true }
                    waiters[key, default: [:]][id] = Waiter(after: after, continuation: continuation)
                    return false
                }
                if cancelled { continuation.resume() } else { registered(id) }
            }
        } onCancel: {
            resume(key, id: id)
        }
    }

    /// How many are waiting (tests wait for a long-poll to park).
    var count: Int { state.withLock { $0.values.reduce(0) { $0 + $1.count } } }

    /// Wakes one waiter (cancellation, or the head was already past when it registered).
    func resume(_ key: SuiteKey, id: UInt64) {
        let waiter = state.withLock { waiters -> Waiter? in
            let waiter = waiters[key]?.removeValue(forKey: id)
            if waiters[key]?.isEmpty == true { waiters[key] = nil }
            return waiter
        }
        waiter?.continuation.resume()
    }

    /// Wakes every waiter of `key` whose revision `head` has passed.
    func notify(_ key: SuiteKey, head: UInt64) {
        let woken = state.withLock { waiters -> [Waiter] in
            guard let suiteWaiters = waiters[key] else { return [] }
            let passed = suiteWaiters.filter { $0.value.after < head }
            for id in passed.keys { waiters[key]?.removeValue(forKey: id) }
            if waiters[key]?.isEmpty == true { waiters[key] = nil }
            return Array(passed.values)
        }
        for waiter in woken { waiter.continuation.resume() }
    }
}
