import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// Which of the configured hosts is the primary, and its connection pool.
///
/// There is one pool per host (postgres-nio's `PostgresClient`, which connects to one host; a pool
/// opens no connection until it is asked for one), all run as services; queries go to the pool of
/// the host found to take writes. A storage call that fails for any reason but our own refusals
/// makes the router look again (`suspect`; never with one host): every host is asked at once whether it takes writes,
/// and the router settles on a host only when exactly one does. Two that take writes (an old
/// primary back beside the one promoted since, before its failover manager demotes it) are a
/// split brain: the router picks neither, and keeps looking. Until it settles the router is
/// `switching`, and storage calls fail at once with `unavailable` (503 with `Retry-After`) instead
/// of waiting for a host that is gone; a push answered so may still commit, and the device sends
/// it again under the same batch id, which the server answers from its record. The listening
/// connection (`ChangeListener`) connects to the host the router names, and connects again when
/// the router settles on another.
///
/// The looks run in the router's own service (`run`), so that they end with the server.
final class PrimaryRouter: Service {
    private struct State {
        var current: Int
        var switching = false
    }

    let configuration: PostgresStorageConfiguration
    let pools: [PostgresClient]
    private let state: Mutex<State>
    private let logger: Logger
    /// Moved on each time the router settles on another host: the listener reconnects when it moved.
    private let settled = Atomic<Int>(0)
    /// Suspicions not looked into yet: at most one waits, since a look answers every suspicion
    /// made before it began.
    private let suspicions: AsyncStream<Void>
    private let suspicion: AsyncStream<Void>.Continuation

    /// How long one look at a host may take (its connection and `SHOW transaction_read_only`). Not
    /// the connect timeout (10 s by default): a healthy host answers in milliseconds, and a lost
    /// one that drops packets would hold every request that long. A primary too slow for it, while
    /// no other host takes writes, is taken for lost until it answers in time again, and requests
    /// meanwhile get 503s.
    static let lookTimeout: Duration = .seconds(2)
    /// How long the router waits between two rounds of looks while it has not settled.
    static let lookInterval: Duration = .milliseconds(250)

    /// Pools for every host of `configuration`; `primary` is the index of the host found to take
    /// writes at start (`PostgresReachability.check`).
    init(configuration: PostgresStorageConfiguration, primary: Int = 0, logger: Logger) {
        self.configuration = configuration
        pools = configuration.hosts.map { PostgresClient(configuration: configuration.clientConfiguration(for: $0), backgroundLogger: logger) }
        state = Mutex(State(current: primary))
        self.logger = logger
        (suspicions, suspicion) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// The pool of the host that takes writes (as last found).
    var client: PostgresClient { pools[state.withLock { $0.current }] }

    /// The host that takes writes, as last found.
    var primary: PostgresStorageConfiguration.Host { configuration.hosts[state.withLock { $0.current }] }

    /// Whether no host is known to take writes: storage calls fail at once until one does.
    var isSwitching: Bool { state.withLock { $0.switching } }

    /// How many times the router settled on another host after looking (the listener compares it).
    var settledCount: Int { settled.load(ordering: .acquiring) }

    /// A storage call failed: the router looks whether its host still takes writes. With one host
    /// there is nowhere else to go: nothing is looked at, and calls go on failing or not by
    /// themselves.
    func suspect() {
        guard pools.count > 1 else { return }
        suspicion.yield()
    }

    /// Looks into each suspicion in turn, until graceful shutdown or cancellation. A look that
    /// found the host where it was is not made again for `quietAfterLook`: a loaded primary's slow
    /// calls would otherwise bring looks one after another, each a new connection to every host.
    func run() async {
        await cancelWhenGracefulShutdown {
            for await _ in self.suspicions {
                if await self.look() { try? await Task.sleep(for: Self.quietAfterLook) }
            }
        }
    }

    /// How long after a look that found the host where it was the next suspicion waits.
    static let quietAfterLook: Duration = .seconds(1)

    /// Rounds of looks at every host, until exactly one takes writes (or the task is cancelled);
    /// whether the host stayed where it was. When none takes writes and the current host answered
    /// with a refusal of its own (too many connections, a sign-in refused), it is alive and no
    /// other host took over: the router stays on it rather than answer every request 503.
    private func look() async -> Bool {
        var rounds = 0
        while !Task.isCancelled {
            rounds += 1
            let look = await PostgresReachability.look(configuration, timeout: Self.lookTimeout)
            let writers = look.writers
            if writers.count == 1 {
                return settle(on: writers[0], rounds: rounds)
            }
            let current = state.withLock { $0.current }
            if writers.isEmpty, look.busy.contains(current), !state.withLock({ $0.switching }) {
                logger.warning(
                    "PostgreSQL at \(configuration.hosts[current]) refuses new connections but no other host takes writes: staying on it",
                    metadata: ["hosts": "\(configuration.place)"]
                )
                return true
            }
            let wasSwitching = state.withLock { state in
                defer { state.switching = true }
                return state.switching
            }
            if !wasSwitching {
                let current = configuration.hosts[state.withLock { $0.current }]
                logger.warning(
                    writers.isEmpty
                        ? "PostgreSQL at \(current) no longer takes writes: looking for the primary"
                        : "several PostgreSQL hosts take writes (\(writers.map { "\(configuration.hosts[$0])" }.joined(separator: ", "))): waiting until one does",
                    metadata: ["hosts": "\(configuration.place)"]
                )
            }
            try? await Task.sleep(for: Self.lookInterval)
        }
        return false
    }

    /// The host at `index` is the only one that takes writes: storage calls go to it from now on.
    /// Whether it was the host already in use, and no switch was under way.
    private func settle(on index: Int, rounds: Int) -> Bool {
        let (moved, wasSwitching) = state.withLock { state in
            defer {
                state.current = index
                state.switching = false
            }
            return (state.current != index, state.switching)
        }
        if moved { settled.add(1, ordering: .releasing) }  // the listener follows; no need when it is where it was
        if moved || wasSwitching {
            logger.notice("PostgreSQL's primary is \(configuration.hosts[index])", metadata: ["rounds": "\(rounds)"])
        }
        return !moved && !wasSwitching
    }
}
