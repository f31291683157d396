extension SharedDefaults {
    /// A typed key's value as `changes(for:)` yields it: the value, and the change that made it.
    public struct KeyChange<Value: Codable & Sendable>: Sendable {
        /// The key's value as `defaults[key]` read it after the change.
        public let value: Value
        /// The change that made it, with its source and whether it replaced a local value; nil for
        /// the first element, the value when iteration began.
        public let change: Change?

        /// Where the change came from (nil for the first element).
        public var source: Change.Source? { change?.source }
        /// Whether a value from another device replaced a local one, now kept in the conflict
        /// journal (``SharedDefaults/conflicts(forKey:)``).
        public var isConflict: Bool { change?.isConflict ?? false }
    }

    /// Several typed keys' values as `changes(for:_:)` yields them: the values, read together
    /// after each change of any of them, and that change.
    public struct KeysChange<Values: Sendable>: Sendable {
        /// The keys' values, as a tuple in the order the keys were given.
        public let values: Values
        /// The change that made them, or nil for the first element.
        public let change: Change?
    }

    /// A typed key's value now, then after every change of it, from any process or device, each
    /// with where it came from.
    ///
    /// ```swift
    /// for await update in defaults.changes(for: .sound) {
    ///     if case .anotherDevice(let device)? = update.source { log("sound chosen on \(device)") }
    ///     player.prepare(update.value)
    /// }
    /// ```
    /// A `cleared` or `reset` of the suite yields the value again. The sequence ends when the task
    /// is cancelled, or on a storage error (reported in `lastError`).
    public func changes<Value>(for key: Key<Value>) -> KeyChanges<Value> {
        KeyChanges(defaults: self, key: key, changes: changes(forKeys: [key.name]))
    }

    /// Two typed keys' values now, then after every change of either.
    ///
    /// ```swift
    /// for await update in defaults.changes(for: .sound, .volume) {
    ///     let (sound, volume) = update.values
    /// }
    /// ```
    public func changes<A, B>(for a: Key<A>, _ b: Key<B>) -> KeysChanges<(A, B)> {
        KeysChanges(defaults: self, changes: changes(forKeys: [a.name, b.name])) { defaults in (defaults[a], defaults[b]) }
    }

    /// Three typed keys' values now, then after every change of any of them.
    public func changes<A, B, C>(for a: Key<A>, _ b: Key<B>, _ c: Key<C>) -> KeysChanges<(A, B, C)> {
        KeysChanges(defaults: self, changes: changes(forKeys: [a.name, b.name, c.name])) { defaults in
            (defaults[a], defaults[b], defaults[c])
        }
    }

    /// The values of a typed key with their changes; see ``SharedDefaults/changes(for:)``.
    public struct KeyChanges<Value: Codable & Sendable>: AsyncSequence, Sendable {
        /// The value, and the change that made it.
        public typealias Element = KeyChange<Value>
        /// The sequence never throws: a storage error ends it and is reported in `lastError`.
        public typealias Failure = Never

        let defaults: SharedDefaults
        let key: Key<Value>
        let changes: Changes

        public func makeAsyncIterator() -> Iterator {
            Iterator(defaults: defaults, key: key, changes: changes.makeAsyncIterator())
        }

        /// Yields the current value first, then the value after each change.
        public struct Iterator: AsyncIteratorProtocol {
            let defaults: SharedDefaults
            let key: Key<Value>
            var changes: Changes.Iterator
            var started = false

            public mutating func next() async -> KeyChange<Value>? {
                guard started else {
                    started = true
                    return KeyChange(value: defaults[key], change: nil)
                }
                guard let change = await changes.next() else { return nil }
                return KeyChange(value: defaults[key], change: change)
            }
        }
    }

    /// The values of several typed keys with their changes; see ``SharedDefaults/changes(for:_:)``.
    public struct KeysChanges<Values: Sendable>: AsyncSequence, Sendable {
        /// The values, and the change that made them.
        public typealias Element = KeysChange<Values>
        /// The sequence never throws: a storage error ends it and is reported in `lastError`.
        public typealias Failure = Never

        let defaults: SharedDefaults
        let changes: Changes
        let read: @Sendable (SharedDefaults) -> Values

        public func makeAsyncIterator() -> Iterator {
            Iterator(defaults: defaults, changes: changes.makeAsyncIterator(), read: read)
        }

        /// Yields the current values first, then the values after each change of any of the keys.
        public struct Iterator: AsyncIteratorProtocol {
            let defaults: SharedDefaults
            var changes: Changes.Iterator
            let read: @Sendable (SharedDefaults) -> Values
            var started = false

            public mutating func next() async -> KeysChange<Values>? {
                var change: Change?
                if started {
                    guard let next = await changes.next() else { return nil }
                    change = next
                }
                started = true
                return KeysChange(values: read(defaults), change: change)
            }
        }
    }
}
