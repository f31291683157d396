import Foundation
import Logging
import Synchronization

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

    // Guarded by `lifecycle`, which is never held while waiting for the signal's thread.
    private let lifecycle = NSLock()
    private var subscribers = 0
    private var signal: (any ChangeSignal)?
    /// This process's watcher slot in the sidecar, while inotify serves the hub.
    private var slot: Int?
    /// `subscribers`, readable without the lock (writers check it after every commit).
    private let activeSubscribers = Atomic<Int>(0)

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
    var isActive: Bool { activeSubscribers.load(ordering: .relaxed) > 0 }

    // MARK: Subscribers

    func subscribe() throws {
        lifecycle.lock()
        defer { lifecycle.unlock() }
        if subscribers == 0 { try start() }
        subscribers += 1
        activeSubscribers.store(subscribers, ordering: .relaxed)
    }

    func unsubscribe() {
        lifecycle.lock()
        subscribers -= 1
        activeSubscribers.store(subscribers, ordering: .relaxed)
        var ending: (signal: (any ChangeSignal)?, slot: Int?)?
        if subscribers == 0 {
            ending = (signal, slot)
            (signal, slot) = (nil, nil)
        }
        lifecycle.unlock()
        // Outside the lock: a handler on the signal's thread may subscribe, or write, meanwhile.
        if let ending {
            if let slot = ending.slot { store.sidecar.unregister(slot) }
            ending.signal?.stop()
        }
    }

    private func start() throws {
        // The signal's thread reads the suite until it ends, perhaps after every handle of this
        // process is gone (a handler dropped the last one): it holds a handle of its own.
        store.retain()
        var started = false
        defer { if !started { store.release() } }
        let release: @Sendable () -> Void = { [store] in store.release() }
        let poster = try NotificationPoster(store: store)
        let wakeObservers: @Sendable () -> Void = { [weak self] in
            self?.bump()  // observers first: posting notifications must not delay them
            poster.postPendingChanges()
        }
        var interval = Self.pollingInterval
        if case .polling(let requested) = store.changeDetection {
            interval = requested
        } else if let slot = store.sidecar.register() {
            let sidecar = store.sidecar
            let wake: @Sendable () -> Void = {
                sidecar.acknowledge(slot)  // before reading the log: later commits signal again
                wakeObservers()
            }
            if let inotify = InotifySignal(sidecarPath: store.path + "-notify", onSignal: wake, cleanup: release) {
                signal = inotify
                self.slot = slot
                // Listening starts before the first read of the log: no commit after it goes unseen.
                sidecar.acknowledge(slot)
            } else {
                sidecar.unregister(slot)
            }
        }
        if signal == nil {
            let store = self.store
            signal = try PollingSignal(
                interval: interval,
                probe: { try? store.readLog { try ChangeLog.tail($0).sequence } },
                onSignal: wakeObservers,
                cleanup: release
            )
        }
        started = true
        // Commits made while the slot was being set up signalled no one: post what they changed.
        poster.postPendingChanges()
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

/// Posts `SharedDefaults.didChangeNotification` for every change, from a cursor of its own.
private final class NotificationPoster: @unchecked Sendable {  // `feed` is used under `lock` only
    private let feed: SharedDefaults.ChangeFeed
    private let suiteName: String
    private let lock = NSLock()

    init(store: SuiteStore) throws {
        feed = try SharedDefaults.ChangeFeed(store: store, owner: nil, keys: nil, since: nil, subscribe: false)
        suiteName = store.location.suiteName
    }

    func postPendingChanges() {
        lock.lock()
        defer { lock.unlock() }
        while true {
            let changes: [SharedDefaults.Change]
            do {
                changes = try feed.available(limit: 512, withValues: false)
            } catch {
                feed.store.logger.error("GroupDefaults: cannot post change notifications: \(error)")
                return
            }
            if changes.isEmpty { return }
            for change in changes {
                NotificationCenter.default.post(
                    name: SharedDefaults.didChangeNotification,
                    object: nil,
                    userInfo: [
                        SharedDefaults.ChangeNotificationKey.suiteName: suiteName,
                        SharedDefaults.ChangeNotificationKey.key: change.key,
                        SharedDefaults.ChangeNotificationKey.kind: change.kind.rawValue,
                        SharedDefaults.ChangeNotificationKey.sequence: change.sequence,
                    ]
                )
            }
        }
    }
}
