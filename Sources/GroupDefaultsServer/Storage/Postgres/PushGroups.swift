import GroupDefaultsWire
import Synchronization

/// A push as it waits for its suite's next group.
struct GroupedPush: Sendable {
    var account: String
    var suite: String
    var push: PreparedPush
    var quota: SuiteQuota
    var serverTime: String

    var suiteID: SuiteID { SuiteID(account: account, suite: suite) }
}

/// Group commit per suite, on one server instance.
///
/// The first push to a suite leads: it writes at once, as a group of one. Pushes to the same suite
/// that arrive while a group is being written wait, and the first of them leads the next group,
/// which takes every push waiting by then (up to `maxOps` ops), in arrival order. So one suite has
/// at most one group in flight per instance, and the group's size follows the load: one push when
/// pushes are rare, many when they queue. Each push of a group keeps its own outcome (`commit`
/// answers one result per push, in order); the leader hands each waiter its answer, and the
/// leadership to the next waiter, directly (no task of its own in between).
final class PushGroups: Sendable {
    enum Turn: Sendable {
        case answered(Result<PushResponse, any Error>)
        case lead
    }

    struct Waiting {
        var push: GroupedPush
        var continuation: CheckedContinuation<Turn, Never>
    }

    struct State {
        /// Per suite that has a group in flight: the pushes waiting for the next group.
        var waiting: [SuiteID: [Waiting]] = [:]
        /// How many groups have been written.
        var groups = 0
    }

    /// Internal, not private: the group commit tests hold a suite through it (their extension).
    let state = Mutex(State())
    /// The most ops a group takes (beyond the leader's own push).
    let maxOps: Int

    init(maxOps: Int = 2_000) {
        self.maxOps = maxOps
    }

    /// Applies `push` in its suite's next group; `commit` writes one group and answers one result per
    /// push, in order.
    func push(
        _ push: GroupedPush,
        commit: @escaping @Sendable ([GroupedPush]) async -> [Result<PushResponse, any Error>]
    ) async throws -> PushResponse {
        let id = push.suiteID
        let turn = await withCheckedContinuation { (continuation: CheckedContinuation<Turn, Never>) in
            let leads = state.withLock { state in
                if state.waiting[id] != nil {
                    state.waiting[id]!.append(Waiting(push: push, continuation: continuation))
                    return false
                }
                state.waiting[id] = []
                return true
            }
            if leads { continuation.resume(returning: .lead) }
        }
        guard case .lead = turn else {
            guard case .answered(let result) = turn else { preconditionFailure("a turn is answered or leads") }
            return try result.get()
        }
        let followers = state.withLock { state in
            state.groups += 1
            var ops = push.push.request.ops.count
            var taken = 0
            for follower in state.waiting[id]! {
                ops += follower.push.push.request.ops.count
                if taken > 0 && ops > maxOps { break }
                taken += 1
            }
            defer { state.waiting[id]!.removeFirst(taken) }
            return Array(state.waiting[id]!.prefix(taken))
        }
        let group = [push] + followers.map(\.push)
        // A task of its own: the request that leads may be cancelled, the group's write may not.
        let results = await Task { await commit(group) }.value
        for (follower, result) in zip(followers, results.dropFirst()) {
            follower.continuation.resume(returning: .answered(result))
        }
        handOver(id)
        return try results[0].get()
    }

    /// Ends the group in flight of suite `id`: the first push waiting leads the next one.
    func handOver(_ id: SuiteID) {
        let next = state.withLock { state -> Waiting? in
            guard let first = state.waiting[id]!.first else {
                state.waiting[id] = nil
                return nil
            }
            state.waiting[id]!.removeFirst()
            return first
        }
        next?.continuation.resume(returning: .lead)
    }

    /// How many groups have been written.
    var groupsWritten: Int { state.withLock { $0.groups } }

    /// How many pushes to suite `id` wait for its next group.
    func waitingCount(_ id: SuiteID) -> Int { state.withLock { $0.waiting[id]?.count ?? 0 } }
}
