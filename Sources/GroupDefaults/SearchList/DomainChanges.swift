import Foundation
internal import GroupDefaultsLMDB
import GroupDefaultsWire
import Synchronization

/// The changes of a handle's other domains (managed settings, the argument domain, added suites,
/// the global domain, registered defaults), for the observers of that handle: each `ChangeFeed` of
/// the handle (and so `changes`, `updates`, `observe`, `ObservedDefaults` and `groupdefaults
/// watch`) receives them between the suite's own changes, with `Change.domain` saying where.
///
/// A change of another domain is reported when it changes what the key reads: not when a domain
/// above it holds the key. (The suite's own changes are all reported, as its log holds them.)
/// While anyone listens, the handle watches its lower suites' logs and the managed files; a
/// listener is woken through the suite's hub, as for a commit.
final class DomainChanges: Sendable {
    private let store: SuiteStore
    private let searchList: SearchList
    private let state = Mutex(State())
    /// What a key reads now through the handle's search list (set once the handle is made).
    private let resolver = Mutex<(@Sendable (String) -> PropertyListValue?)?>(nil)

    private struct State {
        /// Each listener's keys (nil: all) and the changes not yet taken.
        var listeners: [UInt64: (keys: Set<ExactName>?, pending: [SharedDefaults.Change])] = [:]
        var nextListener: UInt64 = 0
        /// The tasks that follow the lower suites' logs, and the managed files' listener id.
        var lowerWatches: [Task<Void, Never>] = []
        var managedListener: UInt64?
    }

    init(store: SuiteStore, searchList: SearchList) {
        self.store = store
        self.searchList = searchList
    }

    /// Sets how a key is read through the handle's search list (`SharedDefaults.value(forKey:)`).
    func resolve(with body: @escaping @Sendable (String) -> PropertyListValue?) {
        resolver.withLock { $0 = body }
    }

    // MARK: Listeners

    func subscribe(keys: Set<ExactName>?) -> UInt64 {
        let (id, first) = state.withLock { state in
            state.nextListener += 1
            state.listeners[state.nextListener] = (keys, [])
            return (state.nextListener, state.listeners.count == 1)
        }
        if first { startWatching() }
        return id
    }

    func unsubscribe(_ id: UInt64) {
        let ending = state.withLock { state -> (tasks: [Task<Void, Never>], managed: UInt64?)? in
            state.listeners[id] = nil
            guard state.listeners.isEmpty else { return nil }
            defer { (state.lowerWatches, state.managedListener) = ([], nil) }
            return (state.lowerWatches, state.managedListener)
        }
        guard let ending else { return }
        for task in ending.tasks { task.cancel() }
        if let managed = ending.managed { searchList.managed?.stopListening(managed) }
    }

    /// The changes of other domains listener `id` has not taken yet.
    func take(_ id: UInt64) -> [SharedDefaults.Change] {
        state.withLock { state in
            guard let pending = state.listeners[id]?.pending, !pending.isEmpty else { return [] }
            state.listeners[id]?.pending = []
            return pending
        }
    }

    private var hasListeners: Bool { state.withLock { !$0.listeners.isEmpty } }

    // MARK: Watching

    private func startWatching() {
        if let managed = searchList.managed {
            let id = managed.listen { [weak self] changed in
                for (key, entries) in changed {
                    let file = entries.new?.file ?? entries.old?.file ?? ""
                    self?.publish(.managed(file: file), key: key, value: entries.new?.value)
                }
            }
            state.withLock { $0.managedListener = id }
        }
        searchListChanged()
    }

    /// The added suites changed: follows the lower suites as they are now, each from the end of
    /// its log at this moment.
    func searchListChanged() {
        guard hasListeners else { return }
        let tasks = searchList.lowerSuites.map { lower in
            let start = try? lower.defaults?.lastSequence
            return Task.detached { [weak self] () async -> Void in await self?.follow(lower, after: start) }
        }
        let old = state.withLock { state in
            defer { state.lowerWatches = tasks }
            return state.lowerWatches
        }
        for task in old { task.cancel() }
    }

    /// Follows a lower suite's log after `start` (a suite that did not exist yet: from its
    /// creation, once its file appears), publishing each change that changes what a key reads here.
    private func follow(_ lower: LowerSuite, after start: UInt64?) async {
        var defaults = lower.defaults
        while defaults == nil {
            try? await Task.sleep(for: .seconds(1))
            if Task.isCancelled { return }
            defaults = lower.defaults
        }
        guard let defaults,
            let feed = try? SharedDefaults.ChangeFeed(
                store: defaults.store,
                owner: defaults,
                keys: nil,
                since: start ?? 0,
                subscribe: true,
                withDomains: false
            )
        else { return }
        let domain: SharedDefaults.Domain = lower === searchList.global ? .global : .addedSuite(lower.name)
        let hub = defaults.store.changeHub
        while !Task.isCancelled {
            let seen = hub.currentGeneration
            while let change = try? feed.nextAvailable() {
                switch change.kind {
                case .set, .removed: publish(domain, key: change.key.exact, value: change.value, source: change.source)
                case .cleared, .reset, .restored: publish(domain, kind: .reset, source: change.source)
                }
            }
            await hub.wait(after: seen)
        }
    }

    /// A volatile domain in the search list (the argument domain, or the registered defaults) was
    /// replaced: publishes each key whose value differs.
    func domainChanged(
        _ domain: SharedDefaults.Domain,
        old: [ExactName: PropertyListValue],
        new: [ExactName: PropertyListValue],
        registration: Bool = false
    ) {
        guard hasListeners else { return }
        for key in Set(old.keys).union(new.keys) where old[key] != new[key] {
            publish(domain, key: key, value: new[key], source: .thisProcess)
        }
    }

    // MARK: Publishing

    /// Queues a change of `key` in `domain` for every listener that follows the key, unless a
    /// domain above `domain` holds the key; then wakes them.
    private func publish(
        _ domain: SharedDefaults.Domain,
        key: ExactName? = nil,
        value: PropertyListValue? = nil,
        kind: SharedDefaults.Change.Kind? = nil,
        source: SharedDefaults.Change.Source = .anotherProcess
    ) {
        if let key, isHidden(key, below: domain) { return }
        // What the key reads now: after a removal in one domain, perhaps another domain's value
        // (a managed file gone, the suite's own value read again).
        var reads = value
        if let key, let resolve = resolver.withLock({ $0 }) { reads = resolve(key.text) }
        let sequence = (try? store.readLog { try ChangeLog.tail($0).sequence }) ?? 0
        let change = SharedDefaults.Change(
            sequence: sequence,
            kind: kind ?? (reads == nil ? .removed : .set),
            key: key?.text ?? "",
            value: reads,
            isValueNotKept: false,
            origin: 0,
            hlc: HLC(rawValue: 0),
            isRemote: false,
            isConflict: false,
            source: source,
            domain: domain
        )
        let any = state.withLock { state in
            var any = false
            for (id, listener) in state.listeners where key == nil || listener.keys == nil || listener.keys!.contains(key!) {
                state.listeners[id]?.pending.append(change)
                any = true
            }
            return any
        }
        if any { store.changeHub.bump() }
    }

    /// Whether a domain above `domain` holds `key`, so that a change of it in `domain` does not
    /// change what the key reads.
    private func isHidden(_ key: ExactName, below domain: SharedDefaults.Domain) -> Bool {
        if case .managed = domain { return false }
        if searchList.managedEntry(forKey: key) != nil { return true }
        if domain == .arguments { return false }
        if searchList.argumentValue(forKey: key) != nil { return true }
        if (try? storedValue(key)) != nil { return true }
        for lower in searchList.lowerSuites {
            // Where the change was made, by the suite's bytes (`Domain`'s `==` is Swift's).
            if case .addedSuite(let name) = domain, lower !== searchList.global, lower.name.isSameName(as: name) { return false }
            if domain == .global && lower === searchList.global { return false }
            if (try? lower.storedValue(forKey: key.text)) != nil { return true }
        }
        return false
    }

    private func storedValue(_ key: ExactName) throws -> PropertyListValue? {
        try withKeyBytes(key.text) { k in
            try store.read { txn in try txn.get(.values, k).map { try StoredRecord.decode($0).value } }
        }
    }
}
