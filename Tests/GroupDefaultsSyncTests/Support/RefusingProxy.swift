import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Synchronization
import TestSupport

/// A loopback HTTP proxy in front of a real server that answers chosen requests itself with a
/// refusal for a while (429 or 503 with a `Retry-After`), passes every other one on, and records
/// when each request arrived and how it was answered: what a test of a client's retries needs
/// that the real server does not do on cue.
final class RefusingProxy: Sendable {
    /// A request as the proxy saw it.
    struct Seen: Sendable {
        var method: String
        var path: String
        var status: Int
        var at: ContinuousClock.Instant
    }

    /// A refusal to give: to the next `count` requests whose path ends with `pathSuffix`.
    struct Refusal: Sendable {
        var pathSuffix: String
        var status: Int
        /// The `Retry-After` value, made when the refusal is given (an HTTP date is of that moment).
        var retryAfter: @Sendable () -> String
        var count: Int
    }

    let port: Int
    private let seen = Mutex<[Seen]>([])
    private let refusals = Mutex<[Refusal]>([])
    private let group: ServiceGroup
    private let running: Task<Void, any Error>
    private let http: HTTPClient

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Every request so far, in the order they arrived.
    var requests: [Seen] { seen.withLock { $0 } }

    /// Refuses the next `count` requests whose path ends with `pathSuffix`.
    func refuse(_ pathSuffix: String, status: Int = 429, count: Int = 1, retryAfter: @escaping @Sendable () -> String) {
        refusals.withLock { $0.append(Refusal(pathSuffix: pathSuffix, status: status, retryAfter: retryAfter, count: count)) }
    }

    private init(port: Int, group: ServiceGroup, running: Task<Void, any Error>, http: HTTPClient) {
        self.port = port
        self.group = group
        self.running = running
        self.http = http
    }

    /// Starts a proxy to `upstream` on a free loopback port; returns once it listens.
    static func start(to upstream: URL) async throws -> RefusingProxy {
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        let box = Box()
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            guard let proxy = box.proxy else { return Response(status: .serviceUnavailable) }
            return try await proxy.answer(request, upstream: upstream)
        }
        let (listening, announce) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            responder: responder,
            configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                announce.yield(channel.localAddress?.port ?? 0)
                announce.finish()
            },
            logger: Logger(label: "refusing-proxy", factory: { _ in SwiftLogNoOpLogHandler() })
        )
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [app], logger: Logger(label: "refusing-proxy")))
        let running = Task { try await group.run() }
        var ports = listening.makeAsyncIterator()
        guard let port = await ports.next(), port > 0 else {
            await group.triggerGracefulShutdown()
            _ = await running.result
            try await http.shutdown()
            throw FixtureError("the proxy did not listen")
        }
        let proxy = RefusingProxy(port: port, group: group, running: running, http: http)
        box.proxy = proxy
        return proxy
    }

    /// Stops the proxy and waits for it.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = await running.result
        try? await http.shutdown()
    }

    private func answer(_ request: Request, upstream: URL) async throws -> Response {
        let path = request.uri.path
        let method = request.method.rawValue
        let arrived = ContinuousClock.now
        let refusal = refusals.withLock { refusals -> Refusal? in
            guard let index = refusals.firstIndex(where: { path.hasSuffix($0.pathSuffix) && $0.count > 0 }) else { return nil }
            refusals[index].count -= 1
            return refusals[index]
        }
        if let refusal {
            seen.withLock { $0.append(Seen(method: method, path: path, status: refusal.status, at: arrived)) }
            let code = refusal.status == 429 ? "rate_limited" : "unavailable"
            let body = #"{"error":"\#(code)","detail":"refused by the test's proxy"}"#
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            headers[.retryAfter] = refusal.retryAfter()
            return Response(
                status: .init(code: refusal.status),
                headers: headers,
                body: ResponseBody(byteBuffer: ByteBuffer(string: body))
            )
        }
        var outgoing = HTTPClientRequest(url: upstream.absoluteString + request.uri.description)
        outgoing.method = .init(rawValue: method)
        for field in request.headers where !["host", "content-length", "connection", "transfer-encoding"].contains(field.name.canonicalName) {
            outgoing.headers.add(name: field.name.canonicalName, value: field.value)
        }
        let body = try await request.body.collect(upTo: 64 << 20)
        if body.readableBytes > 0 { outgoing.body = .bytes(body) }
        let answer = try await http.execute(outgoing, timeout: .seconds(60))
        let bytes = try await answer.body.collect(upTo: 64 << 20)
        var headers = HTTPFields()
        for (name, value) in answer.headers where !["content-length", "connection", "transfer-encoding", "date"].contains(name.lowercased()) {
            if let name = HTTPField.Name(name) { headers.append(HTTPField(name: name, value: value)) }
        }
        seen.withLock { $0.append(Seen(method: method, path: path, status: Int(answer.status.code), at: arrived)) }
        return Response(status: .init(code: Int(answer.status.code)), headers: headers, body: ResponseBody(byteBuffer: bytes))
    }

    /// Lets the responder, made before the proxy, reach it.
    private final class Box: @unchecked Sendable {  // set once, before the first request can arrive
        var proxy: RefusingProxy?
    }

    /// Runs `body` with a proxy to `upstream`, stopped afterwards, also when `body` throws.
    static func with<T>(to upstream: URL, _ body: (RefusingProxy) async throws -> T) async throws -> T {
        let proxy = try await start(to: upstream)
        do {
            let result = try await body(proxy)
            await proxy.stop()
            return result
        } catch {
            await proxy.stop()
            throw error
        }
    }
}

/// `date` as an HTTP date (RFC 9110's IMF-fixdate), as `Retry-After` may carry it.
func httpDate(_ date: Date) -> String {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter.string(from: date)
}
