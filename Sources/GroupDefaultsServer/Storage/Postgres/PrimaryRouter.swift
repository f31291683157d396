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
/// makes the router look again (`suspect`), at most one look at a time: the current host first,
/// and if it no longer takes writes (gone, restarting, or a standby since a failover), every host
/// until one does. Meanwhile the router is `switching`, and storage calls fail at once with
/// `unavailable` (503 with `Retry-After`) instead of waiting for a host that is gone. The
/// listening connection (`ChangeListener`) connects to the host the router names, and wakes every
/// waiter once it listens again.
final class PrimaryRouter: Sendable {
    private struct State {
        var current: Int
        var switching = false
        var looking = false
    }

    let configuration: PostgresStorageConfiguration
    let pools: [PostgresClient]
    private let state: Mutex<State>
    private let logger: Logger
    /// Moved on each time the router settles on a host: the listener reconnects when it moved.
    private let settled = Atomic<Int>(0)

    /// How long one look at a host may take (its connection and `SHOW transaction_read_only`).
    static let lookTimeout: Duration = .seconds(2)
    /// How long the router waits between two rounds of looks while no host takes writes.
    static let lookInterval: Duration = .milliseconds(250)

    /// Pools for every host of `configuration`; `primary` is the index of the host found to take
    /// writes at start (`PostgresReachability.primary`).
    init(configuration: PostgresStorageConfiguration, primary: Int = 0, logger: Logger) {
        self.configuration = configuration
        pools = configuration.hosts.map { PostgresClient(configuration: configuration.clientConfiguration(for: $0), backgroundLogger: logger) }
        state = Mutex(State(current: primary))
        self.logger = logger
    }

    /// The pool of the host that takes writes (as last found).
    var client: PostgresClient { pools[state.withLock { $0.current }] }

    /// The host that takes writes, as last found.
    var primary: PostgresStorageConfiguration.Host { configuration.hosts[state.withLock { $0.current }] }

    /// Whether no host is known to take writes: storage calls fail at once until one does.
    var isSwitching: Bool { state.withLock { $0.switching } }

    /// How many times the router settled on another host after looking (the listener compares it).
    var settledCount: Int { settled.load(ordering: .acquiring) }

    /// A storage call failed: looks whether the host still takes writes, in a task of its own (one
    /// at a time).
    func suspect() {
        let start = state.withLock { state -> Bool in
            if state.looking { return false }
            state.looking = true
            return true
        }
        guard start else { return }
        Task { await self.look() }
    }

    private func look() async {
        let current = state.withLock { $0.current }
        if await PostgresReachability.takesWrites(configuration, host: configuration.hosts[current], timeout: Self.lookTimeout) == nil {
            state.withLock { $0.looking = false }
            return
        }
        state.withLock { $0.switching = true }
        logger.warning(
            "PostgreSQL at \(configuration.hosts[current]) no longer takes writes: looking for the primary",
            metadata: ["hosts": "\(configuration.place)"]
        )
        var rounds = 0
        while !Task.isCancelled {
            rounds += 1
            for (index, host) in configuration.hosts.enumerated() {
                guard await PostgresReachability.takesWrites(configuration, host: host, timeout: Self.lookTimeout) == nil else { continue }
                let moved = state.withLock { state in
                    defer {
                        state.current = index
                        state.switching = false
                        state.looking = false
                    }
                    return state.current != index
                }
                if moved { settled.add(1, ordering: .releasing) }  // the listener follows; no need when it is where it was
                logger.notice("PostgreSQL's primary is \(host)", metadata: ["rounds": "\(rounds)"])
                return
            }
            try? await Task.sleep(for: Self.lookInterval)
        }
        state.withLock { $0.looking = false }
    }
}
