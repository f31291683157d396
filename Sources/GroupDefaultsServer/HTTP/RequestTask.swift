import Hummingbird

/// Answers each request in a child task of the connection's task, which awaits it.
///
/// A task keeps the memory its deepest chain of async calls ever needed until it ends (Swift's
/// task allocator reuses its slabs rather than freeing them). A connection's task lives as long
/// as the connection; without this, every kept-alive connection and open event stream would hold
/// the high-water mark of a whole request (middlewares, route, JSON, storage): measured at about
/// 24 KiB per connection. The child's memory goes when the request's handling returns. Wrapping the
/// router's responder, rather than being the router's outermost middleware, leaves the router's own
/// frames to the child too; with the stream's loop written as separate steps (`ChangeStreamLoop`),
/// an open event stream went from 23.3 to 21.4 KiB (VmRSS over 1,000 streams; in heaptrack, the
/// task allocator's slabs from 11.3 to 9.4 KiB per stream).
struct ChildTaskResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context: Sendable {
    let inner: Inner

    @Sendable func respond(to request: Request, context: Inner.Context) async throws -> Response {
        let inner = self.inner
        return try await withThrowingTaskGroup(of: Response.self) { group in
            group.addTask { try await inner.respond(to: request, context: context) }
            return try await group.next()!
        }
    }
}

/// `body`, run in a child task of the current one, which awaits it: the memory of its calls goes
/// when it returns, instead of staying with a long-lived task (`ChildTaskResponder`).
func inChildTask<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask(operation: body)
        return try await group.next()!
    }
}
