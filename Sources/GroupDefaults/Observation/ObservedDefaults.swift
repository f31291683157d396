import GroupDefaultsWire
public import Observation
import Synchronization

/// A suite's typed keys as `Observable` state: reading a key inside `withObservationTracking` (or
/// in a SwiftUI view's `body`) tracks it, and each change of it, from this process, another
/// process or another device, triggers the observation once, on the actor you choose.
///
/// ```swift
/// @MainActor final class SettingsScreen {
///     let settings = ObservedDefaults(try SharedDefaults(suiteName: "group.com.example.chat"))
///
///     func render() {
///         withObservationTracking {
///             soundLabel.text = settings[.sound]
///         } onChange: {
///             Task { @MainActor in self.render() }   // the notification service chose another sound
///         }
///     }
///
///     func choose(_ sound: String) { settings[.sound] = sound }   // other processes see it at once
/// }
/// ```
///
/// It conforms to `Observation.Observable` through an `ObservationRegistrar` of its own (no macro),
/// with one tracked property per key name. Reads go to the suite, so a value is never stale; the
/// suite's change feed tells the registrar, in commit order, after each commit, so a write through
/// `settings[key] = value` is announced when its commit arrives there (at once in this process),
/// not twice. A `cleared` or `reset` of the suite is announced for every key read so far.
public final class ObservedDefaults: Observable, Sendable {
    /// The suite observed; writes through it are announced like any other.
    public let defaults: SharedDefaults
    private let registrar = ObservationRegistrar()
    /// Every key name read so far (a `cleared` or `reset` concerns them all).
    private let readNames = Mutex<Set<ExactName>>([])
    private let feed = Mutex<Task<Void, Never>?>(nil)

    /// Observes `defaults` from now on, announcing changes on `isolation` (the main actor unless
    /// another is given).
    public init(_ defaults: SharedDefaults, isolation: any Actor = MainActor.shared) {
        self.defaults = defaults
        let changes = defaults.changes()  // from this moment: nothing committed after it is missed
        feed.withLock { feed in
            feed = Task.detached { [weak self] in
                for await change in changes {
                    guard let self else { return }
                    let names = change.kind == .set || change.kind == .removed ? [change.key.exact] : self.readNames.withLock { Array($0) }
                    await self.announce(names, on: isolation)
                }
            }
        }
    }

    deinit {
        feed.withLock { $0?.cancel() }
    }

    /// Stops observing the suite: no change is announced after this returns.
    public func stop() async {
        let task = feed.withLock { feed in
            defer { feed = nil }
            return feed
        }
        task?.cancel()
        await task?.value
    }

    /// The value of `key` (tracked by a surrounding `withObservationTracking`); setting it writes
    /// the suite, as `defaults[key] = value` does.
    public subscript<Value>(key: SharedDefaults.Key<Value>) -> Value {
        get {
            readNames.withLock { _ = $0.insert(key.name.exact) }
            registrar.access(self, keyPath: \.[tracked: key.name.exact])
            return defaults[key]
        }
        set {
            defaults[key] = newValue
        }
    }

    /// The key path the registrar tracks for a key name (its value is nothing: the value is read
    /// from the suite). By the name's bytes: `"caf\u{E9}"` and `"cafe\u{301}"` are two keys.
    subscript(tracked name: ExactName) -> Int { 0 }

    /// Tells the registrar, on `actor`, that the keys `names` changed.
    private func announce(_ names: [ExactName], on actor: isolated any Actor) {
        for name in names {
            registrar.withMutation(of: self, keyPath: \.[tracked: name]) {}
        }
    }
}
