import Foundation

/// The change notifications of one suite in this process: one signal (one inotify watch and its
/// thread) shared by every observer, started by the first and stopped with the last.
///
/// Observers never receive changes from here: they read them from the log, from their own cursor.
/// The hub only counts wake-ups (`generation`) and wakes the observers waiting for the next one,
/// so a burst of commits costs a sleeping observer one wake-up, and nothing can be lost between a
/// signal and a read: an observer notes the generation, reads the log, and sleeps only if the
/// generation has not moved since.
final class ChangeHub: @unchecked Sendable {  // state guarded by `condition` and `lifecycle`, as marked
    private unowned let store: SuiteStore

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var generation: UInt64 = 0
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextWaiterID: UInt64 = 0

    // Guarded by `lifecycle`.
    private let lifecycle = NSLock()
    private var subscribers = 0
    private var signal: (any ChangeSignal)?
    /// This process's watcher slot in the sidecar, while inotify serves the hub.
    private var slot: Int?

    /// How often a suite on a file system without inotify is polled (unless configured).
    static let pollingInterval: Duration = .milliseconds(10)

    init(store: SuiteStore) {
        self.store = store
    }

    var currentGeneration: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return generation
    }

    /// Whether any observer of this process is subscribed (writers then wake it directly).
    var isActive: Bool {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        return subscribers > 0
    }

    // MARK: Subscribers

    func subscribe() throws {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        if subscribers == 0 { try start() }
        subscribers += 1
    }

    func unsubscribe() {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        subscribers -= 1
        if subscribers == 0 { stop() }
    }

    private func start() throws {
        let poster = try NotificationPoster(store: store)
        var interval = Self.pollingInterval
        if case .polling(let requested) = store.changeDetection {
            interval = requested
        } else if let slot = store.environment.sidecar.register() {
            // Listening starts before the first read of the log: no commit after it goes unsignalled.
            let sidecar = store.environment.sidecar
            let wake: @Sendable () -> Void = { [weak self] in
                sidecar.acknowledge(slot)  // before reading the log: later commits signal again
                poster.postPendingChanges()
                self?.bump()
            }
            if let inotify = InotifySignal(sidecarPath: store.path + "-notify", onSignal: wake) {
                signal = inotify
                self.slot = slot
                sidecar.acknowledge(slot)  // the watch exists: from now on, commits signal it
            } else {
                sidecar.unregister(slot)
            }
        }
        if signal == nil {
            let store = self.store
            signal = try PollingSignal(
                interval: interval, probe: { try? store.read { try ChangeLog.tail($0).sequence } },
                onSignal: { [weak self] in
                    poster.postPendingChanges()
                    self?.bump()
                })
        }
    }

    private func stop() {
        if let slot { store.environment.sidecar.unregister(slot) }
        slot = nil
        signal?.stop()  // joins its thread: nothing reads the suite for this hub after this
        signal = nil
    }

    // MARK: Wake-ups

    /// Something may have been committed: wake every waiting observer.
    func bump() {
        condition.lock()
        generation += 1
        let ready = waiters
        waiters.removeAll()
        condition.broadcast()
        condition.unlock()
        for continuation in ready.values { continuation.resume() }
    }

    /// Returns once the generation is past `seen`, or the task is cancelled.
    func wait(after seen: UInt64) async {
        let id = makeWaiterID()
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if !enqueue(id, continuation, unlessPast: seen) { continuation.resume() }
            }
        } onCancel: {
            dequeue(id)?.resume()
        }
    }

    private func makeWaiterID() -> UInt64 {
        condition.lock()
        defer { condition.unlock() }
        nextWaiterID += 1
        return nextWaiterID
    }

    /// Queues `continuation` unless the generation is already past `seen` or the task is cancelled
    /// (then returns false, and the caller resumes it).
    private func enqueue(_ id: UInt64, _ continuation: CheckedContinuation<Void, Never>, unlessPast seen: UInt64) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if generation > seen || Task.isCancelled { return false }
        waiters[id] = continuation
        return true
    }

    private func dequeue(_ id: UInt64) -> CheckedContinuation<Void, Never>? {
        condition.lock()
        defer { condition.unlock() }
        return waiters.removeValue(forKey: id)
    }

    /// Blocks until the generation is past `seen`; false if `deadline` passed first.
    func wait(after seen: UInt64, until deadline: Date?) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while generation <= seen {
            if let deadline {
                if !condition.wait(until: deadline) { return generation > seen }
            } else {
                condition.wait()
            }
        }
        return true
    }
}

/// Posts `SharedDefaults.didChangeNotification` for every change, from the hub's signal thread
/// (the only thread that uses it), from a cursor of its own.
private final class NotificationPoster: @unchecked Sendable {  // used by one thread only
    private let feed: SharedDefaults.ChangeFeed
    private let suiteName: String

    init(store: SuiteStore) throws {
        feed = try SharedDefaults.ChangeFeed(store: store, owner: nil, keys: nil, since: nil, subscribe: false)
        suiteName = store.location.suiteName
    }

    func postPendingChanges() {
        while let changes = try? feed.available(limit: 512, withValues: false), !changes.isEmpty {
            for change in changes {
                NotificationCenter.default.post(
                    name: SharedDefaults.didChangeNotification, object: nil,
                    userInfo: [
                        SharedDefaults.ChangeNotificationKey.suiteName: suiteName,
                        SharedDefaults.ChangeNotificationKey.key: change.key,
                        SharedDefaults.ChangeNotificationKey.kind: change.kind.rawValue,
                        SharedDefaults.ChangeNotificationKey.sequence: change.sequence,
                    ])
            }
        }
    }
}
