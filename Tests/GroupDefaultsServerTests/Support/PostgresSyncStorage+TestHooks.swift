@testable import GroupDefaultsServer

// What the PostgreSQL tests watch and hold in a storage instance (its listening connection, its
// waiters, its group commit), kept here so that the production type carries none of it: the
// members it reaches are internal, open to this target through `@testable`.
extension PostgresSyncStorage {
    /// Suspends until this instance's listening connection has LISTENed more than `count` times in
    /// total (`listenCount` before a disruption); for tests.
    func waitUntilListening(moreThan count: Int = 0) async {
        await listener.waitUntilListening(moreThan: count)
    }

    /// Returns once at least `count` calls of `waitForChange` are suspended waiting for a change
    /// (tests use it to push only once a waiter waits).
    func waitUntilWaiting(count: Int = 1) async {
        await signals.waitUntilSuspended(count: count)
    }

    /// For tests of group commit: holds the suite as if a group of pushes were being written while
    /// `body` runs, so that the pushes made meanwhile wait (`waitUntilPushesWait` tells when they
    /// do); they then go as one group.
    func holdingPushes<T>(account: String, suite: String, _ body: () async throws -> T) async rethrows -> T {
        try await pushGroups.holding(SuiteID(account: account, suite: suite), body)
    }

    /// Returns once at least `count` pushes to the suite wait for its next group.
    func waitUntilPushesWait(account: String, suite: String, count: Int) async {
        await pushGroups.waitUntilWaiting(SuiteID(account: account, suite: suite), count: count)
    }

    /// How many groups of pushes this instance has written (each one statement, or a locked retry).
    var pushGroupsWritten: Int { pushGroups.groupsWritten }

    /// How many times the listening connection has started listening (1 + reconnects).
    var listenCount: Int { listener.listenCount }
}
