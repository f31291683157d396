import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import Metrics
import Testing

/// A temporary data directory with its own store, tokens made in it, and an app over it.
struct Fixture {
    let directory: URL
    let storage: LMDBSyncStorage
    var configuration: ServerConfiguration

    init(limits: SyncLimits = SyncLimits(), maxWait: Duration = .seconds(10)) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("gds-test-\(UUID().uuidString)")
        storage = try LMDBSyncStorage(directory: directory.path)
        configuration = ServerConfiguration(port: 0, storage: .embedded(directory: directory.path), limits: limits, maxWait: maxWait)
        _ = Self.metrics
    }

    /// What the server executable does at start, once for the test process: metrics reported to the
    /// registry `/metrics` emits.
    static let metrics: Void = MetricsSystem.bootstrap(ServerMetrics.makeFactory())

    func token(
        account: String = "alice",
        suites: [String] = ["*"],
        readOnly: Bool = false,
        device: String? = nil,
        expires: Date? = nil
    ) async throws -> String {
        let made = Tokens.make(account: account, suitePatterns: suites, readOnly: readOnly, device: device, expires: expires)
        try await storage.createToken(made.stored)
        return made.token
    }

    /// Runs `body` against the router in-process; the store is closed and removed afterwards (the
    /// router alone runs no service that would close it: left open, each test's store kept five
    /// descriptors for the whole run, and past about 1,300 of them Foundation's `Process.run`,
    /// which reads `/proc/self/fd`, crashed the test process).
    func test(_ body: @escaping @Sendable (any TestClientProtocol) async throws -> Void) async throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let app = try buildApplication(configuration: configuration, storage: storage)
        do {
            try await app.test(.router, body)
        } catch {
            try? await storage.shutdown()
            throw error
        }
        try await storage.shutdown()
    }
}

/// Building requests and reading answers.
enum API {
    static func auth(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

    static func hlc(offsetMilliseconds: Int64 = 0, counter: UInt16 = 0) -> HLC {
        HLC(milliseconds: UInt64(Int64(HLC.wallClockMilliseconds()) + offsetMilliseconds), counter: counter)
    }

    static func body(_ request: PushRequest) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONEncoder().encode(request))
    }

    static func push(device: UInt64 = 1, batch: String = UUID().uuidString, _ ops: [PushOp]) throws -> ByteBuffer {
        try body(PushRequest(deviceID: device, batchID: batch, ops: ops))
    }

    static func set(_ key: String, _ value: String, hlc: HLC = API.hlc()) -> PushOp {
        PushOp(key: key, value: .string(value), hlc: hlc)
    }

    static func delete(_ key: String, hlc: HLC = API.hlc()) -> PushOp {
        PushOp(key: key, value: nil, hlc: hlc)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(response.body.readableBytesView))
    }

    static func error(_ response: TestResponse) throws -> SyncErrorBody {
        try decode(SyncErrorBody.self, response)
    }
}

extension TestClientProtocol {
    func push(_ suite: String, token: String, _ body: ByteBuffer) async throws -> TestResponse {
        try await execute(uri: "/v1/suites/\(suite)/push", method: .post, headers: API.auth(token), body: body)
    }

    func get(_ uri: String, token: String) async throws -> TestResponse {
        try await execute(uri: uri, method: .get, headers: API.auth(token))
    }
}
