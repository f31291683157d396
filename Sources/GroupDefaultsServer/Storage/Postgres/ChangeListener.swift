import Foundation
import Logging
import PostgresNIO
import ServiceLifecycle
import Synchronization

/// What a push announces on the `groupdefaults` channel, as JSON (account and suite names may hold
/// any character, so no separators).
struct ChangeNotice: Codable, Sendable {
    var account: String
    var suite: String
    var head: UInt64

    static let channel = "groupdefaults"
    /// The payload of a write to the tokens table (migration 4's trigger).
    static let tokensWritten = "tokens"
}

/// One dedicated connection per storage instance that LISTENs on the channel and wakes the
/// instance's waiters. When the connection is lost it reconnects by itself (at once, then with
/// backoff) and, once listening again, wakes every waiter: notifications sent meanwhile are lost,
/// and the table is the truth. It connects to the host the router names (`PrimaryRouter`: only
/// the primary delivers what its commits notify), and connects again when the router settles on
/// another host, even if the old one still answers (a standby since a switchover).
final class ChangeListener: Service {
    private let router: PrimaryRouter
    private let applicationName: String
    private let signals: ChangeSignals
    private let logger: Logger
    /// How many times LISTEN has succeeded.
    private let listens = Atomic<Int>(0)
    /// Moved on by every token write announced, and by every (re)start of listening (writes made
    /// while nobody listened were not announced); odd while listening, even while not.
    private let tokenWrites = Atomic<UInt64>(0)

    /// The token generation (`TokenStore.tokenGeneration`): nil while the connection is not
    /// listening, when a token write could go unseen.
    var tokenGeneration: UInt64? {
        let generation = tokenWrites.load(ordering: .acquiring)
        return generation % 2 == 1 ? generation : nil
    }

    /// Whether the connection is listening now (the console's health).
    var isListening: Bool { tokenGeneration != nil }

    init(router: PrimaryRouter, applicationName: String, signals: ChangeSignals, logger: Logger) {
        self.router = router
        self.applicationName = applicationName
        self.signals = signals
        self.logger = logger
    }

    /// Listens until graceful shutdown or cancellation.
    func run() async {
        await cancelWhenGracefulShutdown { await self.listen() }
    }

    /// Listens until the task is cancelled.
    private func listen() async {
        var failures = 0
        var connectionID = 0
        while !Task.isCancelled {
            connectionID += 1
            let settled = router.settledCount
            let listened = listenCount
            do {
                let connection = try await PostgresConnection.connect(
                    configuration: router.configuration.connectionConfiguration(applicationName: applicationName, host: router.primary),
                    id: connectionID,
                    logger: logger
                )
                do {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            try await connection.listen(on: ChangeNotice.channel) { notifications in
                                self.didStartListening()
                                for try await notification in notifications {
                                    self.deliver(notification.payload)
                                }
                            }
                        }
                        group.addTask {
                            // A listening connection to a host that froze, or behind a partition, never
                            // fails by itself (no keepalive): a statement a second, answered within the
                            // router's look timeout, or the connection counts as lost. The statement is
                            // the LISTEN already made (a no-op), so that the connection still shows as
                            // listening in pg_stat_activity, whose `query` is the last statement.
                            let again = PostgresQuery(unsafeSQL: "LISTEN \"\(ChangeNotice.channel)\";")
                            while true {
                                try await Task.sleep(for: Self.heartbeat)
                                try await firstOf({
                                    _ = try await connection.query(again, logger: self.logger).collect()
                                    return ()
                                }) { () async throws -> Never in
                                    try await Task.sleep(for: PrimaryRouter.lookTimeout)
                                    throw ListenerSilent()
                                }
                            }
                        }
                        group.addTask {
                            // The router's look is its own task; checked four times a second.
                            while self.router.settledCount == settled { try await Task.sleep(for: .milliseconds(250)) }
                            throw PrimaryMoved()
                        }
                        defer { group.cancelAll() }
                        try await group.next()
                    }
                } catch is PrimaryMoved {
                    logger.notice("the change listener follows the primary to \(router.primary)")
                } catch {
                    if !Task.isCancelled {
                        logger.warning("the change listener lost its connection", metadata: ["error": "\(String(reflecting: error))"])
                        router.suspect()
                    }
                }
                stoppedListening()
                if listenCount > listened { failures = 0 }  // it listened: the next try at once
                try? await connection.close()
            } catch {
                if !Task.isCancelled {
                    logger.warning("the change listener cannot connect", metadata: ["error": "\(String(reflecting: error))"])
                    router.suspect()
                }
            }
            guard !Task.isCancelled else { break }
            // The first retry at once (a killed backend), then 50 ms doubling up to 2 s.
            if failures > 0 {
                let delay = Duration.milliseconds(min(2000, 50 << min(failures - 1, 6)))
                try? await Task.sleep(for: delay)
            }
            failures += 1
        }
    }

    private struct PrimaryMoved: Error {}

    /// The listening connection did not answer its heartbeat in time.
    private struct ListenerSilent: Error, CustomStringConvertible {
        var description: String { "the listening connection did not answer within \(PrimaryRouter.lookTimeout)" }
    }

    /// How often the listening connection is asked whether it is still there.
    static let heartbeat: Duration = .seconds(1)

    /// How many times LISTEN has succeeded: 1, then one more after each reconnection.
    var listenCount: Int { listens.load(ordering: .acquiring) }

    private func stoppedListening() {
        if tokenWrites.load(ordering: .acquiring) % 2 == 1 { tokenWrites.add(1, ordering: .releasing) }
    }

    private func didStartListening() {
        // Even (not listening) → odd, a generation no cached verification was read under.
        tokenWrites.add(tokenWrites.load(ordering: .acquiring) % 2 == 0 ? 1 : 2, ordering: .releasing)
        listens.add(1, ordering: .releasing)
        signals.signalAll()
    }

    private func deliver(_ payload: String) {
        if payload == ChangeNotice.tokensWritten {
            tokenWrites.add(2, ordering: .releasing)  // stays odd: still listening
            return
        }
        guard let notice = try? JSONDecoder().decode(ChangeNotice.self, from: Data(payload.utf8)) else {
            logger.warning("ignoring a malformed change notification", metadata: ["payload": "\(payload)"])
            return
        }
        signals.signal(SuiteID(account: notice.account, suite: notice.suite), head: notice.head)
    }
}
