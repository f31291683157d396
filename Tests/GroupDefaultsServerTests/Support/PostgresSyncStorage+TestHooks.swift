import Synchronization

@testable import GroupDefaultsServer

// What the PostgreSQL tests watch and hold in a storage instance (its listening connection, its
// waiters, its group commit), kept here so that the production types carry none of it: they
// only count (listens, suspended waiters, waiting pushes, groups written), and the waits and the
// hold below read or set those internal members through `@testable`.
extension PostgresSyncStorage {
    /// Suspends until this instance's listening connection has LISTENed more than `count` times in
    /// total (`listenCount` before a disruption).
    func waitUntilListening(moreThan count: Int = 0) async {
        await poll { self.listener.listenCount > count }
    }

    /// Returns once at least `count` calls of `waitForChange` are suspended waiting for a change
    /// (tests use it to push only once a waiter waits).
    func waitUntilWaiting(count: Int = 1) async {
        await poll { self.signals.suspendedCount >= count }
    }

    /// Holds the suite as if a group of pushes were being written while `body` runs, so that the
    /// pushes made meanwhile wait (`waitUntilPushesWait` tells when they do); they then go as one
    /// group.
    func holdingPushes<T>(account: String, suite: String, _ body: () async throws -> T) async rethrows -> T {
        let id = SuiteID(account: account, suite: suite)
        pushGroups.state.withLock { state in
            precondition(state.waiting[id] == nil, "the suite has a group in flight")
            state.waiting[id] = []
        }
        defer { pushGroups.handOver(id) }
        return try await body()
    }

    /// Returns once at least `count` pushes to the suite wait for its next group.
    func waitUntilPushesWait(account: String, suite: String, count: Int) async {
        await poll { self.pushGroups.waitingCount(SuiteID(account: account, suite: suite)) >= count }
    }

    /// How many groups of pushes this instance has written (each one statement, or a locked retry).
    var pushGroupsWritten: Int { pushGroups.groupsWritten }

    /// How many times the listening connection has started listening (1 + reconnects).
    var listenCount: Int { listener.listenCount }

    /// Returns once `condition` holds, looking every millisecond (the suites' time limits end a
    /// wait that never does).
    private func poll(_ condition: () -> Bool) async {
        while !condition(), !Task.isCancelled { try? await Task.sleep(for: .milliseconds(1)) }
    }
}
