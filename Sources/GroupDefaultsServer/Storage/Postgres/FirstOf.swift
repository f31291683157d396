import Synchronization

/// Runs `work` and `watch` in tasks of their own and returns what comes first: `work`'s value,
/// or the error either throws. The other task is cancelled and not awaited, unlike a task group's
/// children: a call stuck where cancellation does not reach (a pool's wait for a connection to a
/// host that is gone) cannot hold its caller, whose request would hang and, for a push, every push
/// of its suite queued behind it (`PushGroups`). The caller's cancellation ends the wait too.
func firstOf<T: Sendable>(
    _ work: @escaping @Sendable () async throws -> T,
    or watch: @escaping @Sendable () async throws -> Never
) async throws -> T {
    let race = Race<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.wait(continuation)
            race.run(
                Task {
                    do { race.finish(.success(try await work())) } catch { race.finish(.failure(error)) }
                },
                Task {
                    do { try await watch() } catch { race.finish(.failure(error)) }
                }
            )
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The state of one `firstOf`: the continuation, the result if it came first, the two tasks.
private final class Race<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var result: Result<T, any Error>?
        var tasks: [Task<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// The caller waits; a result that came before (a cancellation) is given at once.
    func wait(_ continuation: CheckedContinuation<T, any Error>) {
        let early = state.withLock { state -> Result<T, any Error>? in
            if let result = state.result { return result }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    /// The tasks to cancel once there is a result (at once, if there is one already).
    func run(_ tasks: Task<Void, Never>...) {
        let finished = state.withLock { state -> Bool in
            if state.result != nil { return true }
            state.tasks = tasks
            return false
        }
        if finished { for task in tasks { task.cancel() } }
    }

    /// The first result is given to the caller and the tasks are cancelled; later ones are dropped.
    func finish(_ result: Result<T, any Error>) {
        let (continuation, tasks) = state.withLock { state -> (CheckedContinuation<T, any Error>?, [Task<Void, Never>]) in
            guard state.result == nil else { return (nil, []) }
            state.result = result
            defer {
                state.continuation = nil
                state.tasks = []
            }
            return (state.continuation, state.tasks)
        }
        continuation?.resume(with: result)
        for task in tasks { task.cancel() }
    }
}
