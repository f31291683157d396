import Hummingbird

/// Runs the rest of a request's handling (every other middleware and the route) in a child task of
/// the connection's task, which awaits it.
///
/// A task keeps the memory its deepest chain of async calls ever needed until it ends (Swift's
/// task allocator reuses its slabs rather than freeing them). A connection's task lives as long
/// as the connection; without this, every kept-alive connection and open event stream would hold
/// the high-water mark of a whole request (middlewares, route, JSON, storage): measured at about
/// 24 KiB per connection. The child's memory goes when the request's handling returns.
struct RequestTaskMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        try await withoutActuallyEscaping(next) { next in
            let handler = Handler(next: next)
            return try await withThrowingTaskGroup(of: Response.self) { group in
                group.addTask { try await handler.next(request, context) }
                return try await group.next()!
            }
        }
    }

    /// The rest of the chain, handed to the child: it calls it once while this task awaits the
    /// child, so the closure never runs concurrently with anything that shares its state.
    private struct Handler: @unchecked Sendable {
        let next: (Request, Context) async throws -> Response
    }
}

/// `body`, run in a child task of the current one, which awaits it: the memory of its calls goes
/// when it returns, instead of staying with a long-lived task (`RequestTaskMiddleware`).
func inChildTask<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask(operation: body)
        return try await group.next()!
    }
}
