import AsyncHTTPClient
import Foundation
import GroupDefaults
import GroupDefaultsWire
import NIOCore
import NIOHTTP1

/// The sync API of one server instance, through a shared AsyncHTTPClient.
///
/// The client shares the machine's two cores with the server; the report prints the cores each
/// side keeps busy, so that a client-bound figure would show (none was: the benchmark process
/// stays well under one core).
struct SyncAPI: Sendable {
    let http: HTTPClient
    let baseURL: String
    let token: String

    /// A client whose pool keeps up to `connections` connections to one host open at once (each
    /// concurrent client of the benchmark, each open event stream, takes one).
    static func makeHTTPClient(connections: Int) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
        configuration.timeout = .init(connect: .seconds(10))
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    /// `POST /v1/suites/SUITE/push`; throws unless the answer is 200.
    func push(_ suite: String, _ request: PushRequest) async throws -> PushResponse {
        let body = try await send(.POST, "/v1/suites/\(suite)/push", body: try JSONEncoder().encode(request))
        return try JSONDecoder().decode(PushResponse.self, from: Data(body.readableBytesView))
    }

    /// A push whose answer is checked for 200 but not decoded (the throughput loop).
    func pushUnread(_ suite: String, _ request: PushRequest) async throws {
        _ = try await send(.POST, "/v1/suites/\(suite)/push", body: try JSONEncoder().encode(request))
    }

    /// `GET /v1/suites/SUITE/changes?since=…[&wait=…]`.
    func changes(_ suite: String, since: UInt64, wait: Int? = nil) async throws -> ChangesPage {
        let query = "since=\(since)" + (wait.map { "&wait=\($0)" } ?? "")
        let body = try await send(.GET, "/v1/suites/\(suite)/changes?\(query)")
        return try JSONDecoder().decode(ChangesPage.self, from: Data(body.readableBytesView))
    }

    /// `GET /v1/suites/SUITE/events`: the open stream's body, read as it arrives.
    func events(_ suite: String) async throws -> HTTPClientResponse.Body {
        var request = authorized(.GET, "/v1/suites/\(suite)/events")
        request.headers.add(name: "Accept", value: "text/event-stream")
        let response = try await http.execute(request, timeout: .hours(1))
        guard response.status == .ok else {
            throw BenchError("events: \(response.status) \(String(buffer: try await response.body.collect(upTo: 1 << 16)))")
        }
        return response.body
    }

    /// A sample's value from `GET /metrics` (no token), e.g. `groupdefaults_event_streams_open`.
    func metric(_ name: String) async throws -> Double? {
        try await metricsText().split(separator: "\n").first { $0.hasPrefix(name + " ") }
            .flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
    }

    /// `GET /metrics` (no token): the Prometheus text.
    func metricsText() async throws -> String {
        let response = try await http.execute(HTTPClientRequest(url: baseURL + "/metrics"), timeout: .seconds(30))
        return String(buffer: try await response.body.collect(upTo: 16 << 20))
    }

    private func authorized(_ method: HTTPMethod, _ path: String) -> HTTPClientRequest {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        return request
    }

    private func send(_ method: HTTPMethod, _ path: String, body: Data? = nil) async throws -> ByteBuffer {
        var request = authorized(method, path)
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        let response = try await http.execute(request, timeout: .seconds(120))
        let answer = try await response.body.collect(upTo: 16 << 20)
        guard response.status == .ok else {
            throw BenchError("\(method) \(path): \(response.status.code) \(String(buffer: answer))")
        }
        return answer
    }
}
