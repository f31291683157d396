import Foundation

extension SharedDefaults {
    /// Posted on `NotificationCenter.default` for every change of a suite, from this process or
    /// another, while anything in this process observes that suite (`changes`, `updates`,
    /// `observe`, a `ChangeFeed`, or `postChangeNotifications()`). `object` is nil; `userInfo` holds
    /// the suite name, key, kind and sequence number under `ChangeNotificationKey`.
    public static let didChangeNotification = Notification.Name("GroupDefaultsSharedDefaultsDidChange")

    /// The `userInfo` keys of `didChangeNotification`.
    public enum ChangeNotificationKey {
        /// The suite's name, a `String`.
        public static let suiteName = "suiteName"
        /// The key changed, a `String` (empty for `cleared` and `reset`).
        public static let key = "key"
        /// The change's kind as its raw value, a `String`: "set", "removed", "cleared" or "reset".
        public static let kind = "kind"
        /// The change's position in the suite's log, a `UInt64`.
        public static let sequence = "sequence"
    }

    /// The sequence number of the last change committed to the suite (0 if none): pass it as
    /// `since` later to receive everything after it.
    public var lastSequence: UInt64 {
        get throws {
            do {
                return try store.readLog { try ChangeLog.tail($0).sequence }
            } catch {
                throw store.translate(error, key: nil)
            }
        }
    }

    /// Every committed change of the suite, from any process, in commit order, each exactly once.
    ///
    /// ```swift
    /// for await change in defaults.changes(forKeys: ["sound"]) {
    ///     print(change.key, change.value ?? "removed")
    /// }
    /// ```
    /// - Parameters:
    ///   - keys: Only changes of these keys (plus `cleared` and `reset`); nil for all.
    ///   - since: Start after this sequence number, replaying what the suite retains of the backlog
    ///     first; nil to start at the current end of the log (the moment of this call).
    /// The sequence ends when the task is cancelled, or on a storage error (reported in `lastError`).
    public func changes(forKeys keys: Set<String>? = nil, since: UInt64? = nil) -> Changes {
        var start = since
        if start == nil {
            do { start = try lastSequence } catch { report(error) }
        }
        return Changes(defaults: self, keys: keys, start: start)
    }

    /// The suite's own changes only (its log), without the other domains' (for the sync engine,
    /// which pushes what the suite holds and has no use for the search list).
    package func suiteChanges() -> Changes {
        var changes = changes()
        changes.withDomains = false
        return changes
    }

    /// A feed of the suite's changes for synchronous code (see `ChangeFeed`).
    public func changeFeed(forKeys keys: Set<String>? = nil, since: UInt64? = nil) throws -> ChangeFeed {
        try ChangeFeed(store: store, owner: self, keys: keys, since: since, subscribe: true)
    }

    /// The value of a typed key each time it changes (first its current value, with `initial`).
    ///
    /// ```swift
    /// for await sound in defaults.updates(for: .sound) { player.prepare(sound) }
    /// ```
    public func updates<Value>(for key: Key<Value>, initial: Bool = true) -> Updates<Value> {
        Updates(defaults: self, key: key, initial: initial, changes: changes(forKeys: [key.name]))
    }

    /// Calls `handler` with every change (on a background thread), until the returned token is
    /// cancelled or released.
    public func observe(
        keys: Set<String>? = nil,
        since: UInt64? = nil,
        handler: @escaping @Sendable (Change) -> Void
    ) -> ObservationToken {
        let changes = changes(forKeys: keys, since: since)
        // Watch from now, not from when the task first runs: notifications are posted for every
        // change after this call.
        let watching = HubSubscription(store.changeHub)
        return ObservationToken(
            Task.detached {
                for await change in changes { handler(change) }
                watching.end()
            }
        )
    }

    /// Keeps this process watching the suite, so that `didChangeNotification` is posted for every
    /// change, until the token is cancelled or released.
    public func postChangeNotifications() -> ObservationToken {
        observe(keys: []) { _ in }
    }

    /// The changes of a suite as an `AsyncSequence`; see `SharedDefaults.changes(forKeys:since:)`.
    public struct Changes: AsyncSequence, Sendable {
        /// Each element is one committed change.
        public typealias Element = Change
        /// The sequence never throws: a storage error ends it and is reported in `lastError`.
        public typealias Failure = Never

        let defaults: SharedDefaults
        let keys: Set<String>?
        let start: UInt64?
        /// Whether the other domains' changes come too (see `ChangeFeed`).
        var withDomains = true

        init(defaults: SharedDefaults, keys: Set<String>?, start: UInt64?) {
            self.defaults = defaults
            self.keys = keys
            self.start = start
        }

        public func makeAsyncIterator() -> Iterator {
            var iterator = Iterator(defaults: defaults, keys: keys, start: start)
            iterator.withDomains = withDomains
            return iterator
        }

        /// Reads the suite's change log from its position, waiting for the next commit when it
        /// has caught up; the first call to `next()` starts watching the suite.
        public struct Iterator: AsyncIteratorProtocol {
            let defaults: SharedDefaults
            let keys: Set<String>?
            let start: UInt64?
            var withDomains = true
            var feed: ChangeFeed?
            var finished = false

            init(defaults: SharedDefaults, keys: Set<String>?, start: UInt64?) {
                self.defaults = defaults
                self.keys = keys
                self.start = start
            }

            public mutating func next() async -> Change? {
                guard !finished else { return nil }
                do {
                    if feed == nil {
                        feed = try ChangeFeed(
                            store: defaults.store,
                            owner: defaults,
                            keys: keys,
                            since: start,
                            subscribe: true,
                            withDomains: withDomains
                        )
                    }
                    let hub = defaults.store.changeHub
                    while !Task.isCancelled {
                        let seen = hub.currentGeneration
                        if let change = try feed!.nextAvailable() { return change }
                        await hub.wait(after: seen)
                    }
                } catch {
                    defaults.report(error)
                }
                finished = true
                feed = nil  // stops watching now, not when the iterator is released
                return nil
            }
        }
    }

    /// The values of a typed key as it changes; see `SharedDefaults.updates(for:initial:)`.
    public struct Updates<Value: Codable & Sendable>: AsyncSequence, Sendable {
        /// Each element is the key's value as `defaults[key]` reads it (its default when nothing is
        /// stored).
        public typealias Element = Value
        /// The sequence never throws: a storage error ends it and is reported in `lastError`.
        public typealias Failure = Never

        let defaults: SharedDefaults
        let key: Key<Value>
        let initial: Bool
        let changes: Changes

        public func makeAsyncIterator() -> Iterator {
            Iterator(defaults: defaults, key: key, pendingInitial: initial, changes: changes.makeAsyncIterator())
        }

        /// Yields the current value first (with `initial`), then reads the key again after each of
        /// its changes, and after a `cleared` or `reset` of the suite.
        public struct Iterator: AsyncIteratorProtocol {
            let defaults: SharedDefaults
            let key: Key<Value>
            var pendingInitial: Bool
            var changes: Changes.Iterator

            public mutating func next() async -> Value? {
                if pendingInitial {
                    pendingInitial = false
                    return defaults[key]
                }
                guard await changes.next() != nil else { return nil }
                return defaults[key]
            }
        }
    }

    /// A subscription to a suite's hub, ended once.
    final class HubSubscription: Sendable {
        private let hub: ChangeHub?

        init(_ hub: ChangeHub) {
            self.hub = (try? hub.subscribe()) != nil ? hub : nil
        }

        func end() {
            hub?.unsubscribe()
        }
    }

    /// Keeps an observation alive: cancelling or releasing it stops the observation.
    public final class ObservationToken: Sendable {
        private let task: Task<Void, Never>

        init(_ task: Task<Void, Never>) {
            self.task = task
        }

        deinit {
            task.cancel()
        }

        /// Stops the observation (it ends shortly after, on its own thread).
        public func cancel() {
            task.cancel()
        }

        /// Stops the observation and returns once it has ended: the handler is not called again,
        /// and if it was this process's last observation of the suite, its watch is closed.
        public func stop() async {
            task.cancel()
            await task.value
        }
    }
}
