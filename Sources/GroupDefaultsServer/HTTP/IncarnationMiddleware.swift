import GroupDefaultsWire
import Hummingbird
import Synchronization

/// Adds the storage's incarnation (`StorageIncarnation`) to every `/v1` answer, errors included, as
/// the `Server-Incarnation` header. Read from storage at the first request (PostgreSQL's schema is
/// migrated only once the server starts) and kept: a restore happens while no server runs.
struct IncarnationMiddleware<Context: RequestContext>: RouterMiddleware {
    let storage: any StorageIncarnation
    private let known = KnownIncarnation()

    init(storage: any StorageIncarnation) { self.storage = storage }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.uri.path.hasPrefix("/v1/") else { return try await next(request, context) }
        // Read before the request's work (the first request reads storage): an answer that waited
        // (a long-poll, woken by a push) goes out as soon as it is woken. Storage that cannot be
        // read now (PostgreSQL down) leaves the header out: a device compares only the ids it is given.
        let incarnation = await current()
        var response = try await next(request, context)
        if let incarnation { response.headers[.init(IncarnationHeader.name)!] = incarnation }
        return response
    }

    private func current() async -> String? {
        if let id = known.id.withLock({ $0 }) { return id }
        guard let read = try? await storage.incarnation() else { return nil }
        known.id.withLock { $0 = read }
        return read
    }
}

/// The incarnation once read, shared by the middleware's copies.
private final class KnownIncarnation: Sendable {
    let id = Mutex<String?>(nil)
}
