import Foundation
import GroupDefaultsWire
import Synchronization

/// The domains one `SharedDefaults` handle reads through, in order: the managed settings, the
/// argument domain, the suite, the suites added with `addSuite(named:)` (the last added first), the
/// global domain, and the registered defaults. Writes go to the suite only.
///
/// The managed settings and the argument domain stand above the suite: a value an administrator
/// forces is not overridden by a command line either (Foundation's order, with the managed layer of
/// Apple's systems on top).
final class SearchList: Sendable {
    let suiteName: String
    let directory: URL
    let configuration: SharedDefaults.Configuration
    /// The managed settings of the suite (nil when `Configuration.managedDirectory` is nil).
    let managed: ManagedSettings?
    /// The global domain (nil for the global domain's own handles).
    let global: LowerSuite?
    private let state: Mutex<State>
    /// The lengths in bytes of the argument domain's keys, as bits (a key of 64 bytes or more sets
    /// bit 63): a read of a key whose length is not among them skips the lock, as every read does
    /// while the domain is empty.
    private let argumentLengths: Atomic<UInt64>

    struct State {
        /// The volatile domains but the registration domain (the store's registered defaults), the
        /// argument domain among them.
        var volatile: [ExactName: [ExactName: PropertyListValue]]
        /// The argument domain (also in `volatile`), apart for the reads.
        var arguments: [ExactName: PropertyListValue]
        /// The added suites, the last added first.
        var added: [LowerSuite] = []
    }

    init(suiteName: String, directory: URL, configuration: SharedDefaults.Configuration) throws {
        self.suiteName = suiteName
        self.directory = directory
        self.configuration = configuration
        managed = configuration.managedDirectory.map { ManagedSettings.for(directory: $0, suiteName: suiteName) }
        global =
            suiteName.isSameName(as: SharedDefaults.globalDomain)
            ? nil : try LowerSuite(name: SharedDefaults.globalDomain, directory: directory, configuration: configuration)
        let arguments = configuration.arguments.isEmpty ? [:] : ArgumentDomain.parse(configuration.arguments)
        state = Mutex(State(volatile: [SharedDefaults.argumentDomain.exact: arguments], arguments: arguments))
        argumentLengths = Atomic(Self.lengthBits(arguments.keys))
    }

    // MARK: Domains above the suite

    /// The managed entry of `key`, if an administrator forces it.
    func managedEntry(forKey key: ExactName) -> ManagedSettings.Entry? {
        managed?.entry(forKey: key)
    }

    /// The argument domain's value of `key`.
    func argumentValue(forKey key: ExactName) -> PropertyListValue? {
        guard argumentLengths.load(ordering: .relaxed) & Self.lengthBit(key.text) != 0 else { return nil }
        return state.withLock { $0.arguments[key] }
    }

    private static func lengthBit(_ key: String) -> UInt64 {
        1 << UInt64(min(key.utf8.count, 63))
    }

    private static func lengthBits(_ keys: some Sequence<ExactName>) -> UInt64 {
        keys.reduce(0) { $0 | lengthBit($1.text) }
    }

    // MARK: Domains below the suite

    /// The suites below this one, in the order they are read: the added suites, then the global
    /// domain.
    var lowerSuites: [LowerSuite] {
        state.withLock { $0.added } + (global.map { [$0] } ?? [])
    }

    /// Adds `name` at the top of the added suites (moving it there if it is already added).
    /// Adding the suite itself or the global domain does nothing, as on Apple's systems.
    func addSuite(named name: String) throws {
        guard !name.isSameName(as: suiteName), !name.isSameName(as: SharedDefaults.globalDomain) else { return }
        let suite = try LowerSuite(name: name, directory: directory, configuration: configuration)
        state.withLock { state in
            state.added.removeAll { $0.name.isSameName(as: name) }
            state.added.insert(suite, at: 0)
        }
    }

    /// Removes `name` from the added suites; true if it was there.
    @discardableResult
    func removeSuite(named name: String) -> Bool {
        state.withLock { state in
            let before = state.added.count
            state.added.removeAll { $0.name.isSameName(as: name) }
            return state.added.count != before
        }
    }

    /// The added suite named `name` (by its bytes), if added.
    func addedSuite(named name: String) -> LowerSuite? {
        state.withLock { $0.added.first { $0.name.isSameName(as: name) } }
    }

    // MARK: Volatile domains

    var volatileDomainNames: [String] {
        state.withLock { $0.volatile.keys.map(\.text) }
    }

    func volatileDomain(forName name: String) -> [ExactName: PropertyListValue]? {
        state.withLock { $0.volatile[name.exact] }
    }

    /// Replaces (or with nil removes) a volatile domain; returns what it held.
    func setVolatileDomain(_ domain: [ExactName: PropertyListValue]?, forName name: String) -> [ExactName: PropertyListValue] {
        state.withLock { state in
            let old = state.volatile[name.exact] ?? [:]
            state.volatile[name.exact] = domain
            if name.isSameName(as: SharedDefaults.argumentDomain) {
                state.arguments = domain ?? [:]
                argumentLengths.store(Self.lengthBits(state.arguments.keys), ordering: .relaxed)
            }
            return old
        }
    }
}
