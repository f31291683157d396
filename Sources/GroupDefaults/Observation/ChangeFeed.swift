import Foundation
internal import GroupDefaultsLMDB
import GroupDefaultsWire
import Logging

extension SharedDefaults {
    /// A suite's change feed for code that is not async: a cursor into the log, read in order.
    ///
    /// ```swift
    /// let feed = try defaults.changeFeed(forKeys: ["sound"])
    /// while let change = try feed.next() { print(change) }     // blocks between changes
    /// ```
    /// It belongs to one thread at a time. While it exists, this process watches the suite (the
    /// async `changes`, `updates` and `observe` are built on it), and the handle's other domains:
    /// a change of a managed settings file, the argument domain, an added suite, the global domain
    /// or the registered defaults that changes what a key reads comes between the suite's own, with
    /// its `Change.domain`.
    public final class ChangeFeed {
        let store: SuiteStore
        /// The handle this feed came from: it keeps the suite open while the feed lives.
        private let owner: SharedDefaults?
        /// The keys followed, by their bytes (nil: all).
        private let keys: Set<ExactName>?
        private let subscribed: Bool
        /// The handle's other domains this feed listens to (see `DomainChanges`).
        private let domainListener: (changes: DomainChanges, id: UInt64)?
        /// The last sequence number delivered (or skipped by the key filter).
        public private(set) var cursor: UInt64
        private var pending: [SharedDefaults.Change] = []
        private var pendingIndex = 0

        /// A feed after `since` (or after the current end of the log).
        init(store: SuiteStore, owner: SharedDefaults?, keys: Set<String>?, since: UInt64?, subscribe: Bool, withDomains: Bool = true) throws {
            self.store = store
            self.owner = owner
            self.keys = keys.map { Set($0.map(\.exact)) }
            if let since {
                cursor = since
            } else {
                cursor = try store.readLog { try ChangeLog.tail($0).sequence }
            }
            if subscribe { try store.changeHub.subscribe() }
            subscribed = subscribe
            if subscribe, withDomains, let owner {
                domainListener = (owner.domainChanges, owner.domainChanges.subscribe(keys: self.keys))
            } else {
                domainListener = nil
            }
        }

        deinit {
            if let domainListener { domainListener.changes.unsubscribe(domainListener.id) }
            if subscribed { store.changeHub.unsubscribe() }
        }

        /// The next change, waiting for one; nil if `timeout` passes first.
        public func next(timeout: Duration? = nil) throws -> SharedDefaults.Change? {
            let deadline = timeout.map { Date(timeIntervalSinceNow: Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18) }
            while true {
                let seen = store.changeHub.currentGeneration
                if let change = try nextAvailable() { return change }
                if !store.changeHub.wait(after: seen, until: deadline) { return try nextAvailable() }
            }
        }

        /// The next change already committed, without waiting.
        public func nextAvailable() throws -> SharedDefaults.Change? {
            if pendingIndex == pending.count {
                pending = domainListener.map { $0.changes.take($0.id) } ?? []
                pending += try available(limit: 256, withValues: true)
                pendingIndex = 0
                if pending.isEmpty { return nil }
            }
            defer { pendingIndex += 1 }
            return pending[pendingIndex]
        }

        /// Up to `limit` changes after the cursor, advancing it only when they are returned. A gap
        /// (the log was trimmed past the cursor), or a cursor past the end of the log (the suite was
        /// recreated), yields one `reset` and moves the cursor to the end of the log; a gap that ends
        /// at a `restored` change yields that change. A value that
        /// does not decode comes as nil, and is reported in the store's log.
        func available(limit: Int, withValues: Bool) throws -> [SharedDefaults.Change] {
            let read = { [self] (txn: LMDBTransaction) throws -> ([SharedDefaults.Change], UInt64) in
                let records = try ChangeLog.records(txn, after: self.cursor, limit: limit)
                let cursor = self.cursor
                // A restore's record follows a gap of its own (the log's numbers jump past those lost
                // with the writes after the point), and says more than `reset`: it comes as itself.
                let fellBehind = records.first.map { $0.sequence > cursor + 1 && $0.kind != .restored } ?? false
                let pastTheEnd = try records.isEmpty && ChangeLog.tail(txn).sequence < cursor
                if fellBehind || pastTheEnd {
                    let tail = try ChangeLog.tail(txn)
                    let reset = SharedDefaults.Change(
                        sequence: tail.sequence,
                        kind: .reset,
                        key: "",
                        value: nil,
                        isValueNotKept: false,
                        origin: store.origin,
                        hlc: tail.hlc,
                        isRemote: false,
                        isConflict: false,
                        source: .anotherProcess
                    )
                    return ([reset], tail.sequence)
                }
                var changes: [SharedDefaults.Change] = []
                for record in records {
                    if record.kind != .cleared && record.kind != .restored, let keys, !keys.contains(record.key.exact) { continue }
                    var value: PropertyListValue?
                    var notKept = false
                    if withValues && record.kind == .set {
                        (value, notKept) = changedValue(record, in: txn)
                    }
                    changes.append(
                        SharedDefaults.Change(
                            sequence: record.sequence,
                            kind: SharedDefaults.Change.Kind(record.kind),
                            key: record.key,
                            value: value,
                            isValueNotKept: notKept,
                            origin: record.stamp.origin,
                            hlc: record.stamp.hlc,
                            isRemote: record.isRemote,
                            isConflict: record.isConflict,
                            source: record.isRemote
                                ? try Transaction.remoteSource(origin: record.stamp.origin, in: txn)
                                : store.ownCommits.contains(record.sequence) ? .thisProcess : .anotherProcess
                        )
                    )
                }
                return (changes, records.last?.sequence ?? cursor)
            }
            do {
                let (changes, newCursor) = try store.readLog(read)
                cursor = newCursor
                return changes
            } catch {
                throw store.translate(error, key: nil)
            }
        }

        /// The value a `set` wrote, as the log kept it; when it did not (a large value), the value
        /// stored under the key now, and `notKept`. nil if that is not stored, or does not decode
        /// (reported).
        private func changedValue(_ record: ChangeLog.Record, in txn: LMDBTransaction) -> (PropertyListValue?, notKept: Bool) {
            do {
                if let kept = record.keptValue { return (kept, false) }
                let stored = try withKeyBytes(record.key) { k in
                    try txn.get(.values, k).map { try StoredRecord.decode($0).value }
                }
                return (stored, true)
            } catch {
                store.logger.error("\(store.translate(error, key: record.key))")
                return (nil, false)
            }
        }
    }
}

@available(*, unavailable)
extension SharedDefaults.ChangeFeed: Sendable {}

extension SharedDefaults.Change.Kind {
    init(_ kind: ChangeLog.Kind) {
        switch kind {
        case .set: self = .set
        case .removed: self = .removed
        case .cleared: self = .cleared
        case .restored: self = .restored
        }
    }
}
