import AsyncHTTPClient
import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsServer
import GroupDefaultsSync
import GroupDefaultsWire
import NIOCore
import TestSupport
import Testing

/// A real `groupdefaults-server` on loopback for sync tests (or, for settings no flag sets, the
/// server built in this process): its store (a fresh data directory or PostgreSQL database), one
/// token for the account, and an HTTP client to reach it in-process.
final class SyncServer: Sendable {
    let backend: StorageBackend
    /// `--data-dir DIR` or `--postgres-url URL`.
    let storage: [String]
    let token: String
    let http: HTTPClient
    /// Arguments of `serve` besides the storage and the port (limits).
    let serveArguments: [String]
    private let cleanup: @Sendable () -> Void
    private let current: ProcessBox
    /// The server built in this process, if it is one (`with(_:configure:_:)`), instead of the process.
    private let inProcess: InProcessServer?

    /// The rate limit is out of reach: the tests send many requests on one token, and 429s would
    /// only slow them down (backoff) without testing anything.
    static let baseArguments = ["--rate-limit", "1000000"]

    private init(
        backend: StorageBackend,
        storage: [String],
        token: String,
        serveArguments: [String],
        process: ServerProcess?,
        inProcess: InProcessServer? = nil,
        cleanup: @escaping @Sendable () -> Void
    ) throws {
        self.backend = backend
        self.storage = storage
        self.token = token
        self.serveArguments = serveArguments
        self.cleanup = cleanup
        current = ProcessBox(process)
        self.inProcess = inProcess
        http = try SyncClient.makeHTTPClient()
    }

    /// Starts a server on a fresh store of `backend` with `arguments`, and makes a token.
    static func start(_ backend: StorageBackend = .lmdb, _ arguments: [String] = []) async throws -> SyncServer {
        let (storage, cleanup) = try await backend.serverStorage("gds-sync")
        let serveArguments = baseArguments + arguments
        do {
            let process = try await ServerProcess(dataDirectory: nil, extraArguments: storage + serveArguments)
            let token = try await ServerTool.createToken(storage: storage)
            return try SyncServer(
                backend: backend,
                storage: storage,
                token: token,
                serveArguments: serveArguments,
                process: process,
                cleanup: cleanup
            )
        } catch {
            cleanup()
            throw error
        }
    }

    /// Runs `body` with a server started as `start` does; stops it and removes its store afterwards,
    /// also when `body` throws.
    static func with<T>(
        _ backend: StorageBackend = .lmdb,
        _ arguments: [String] = [],
        _ body: (SyncServer) async throws -> T
    ) async throws -> T {
        try await start(backend, arguments).running(body)
    }

    /// Runs `body` with the server built in this process (`buildApplication`) on a fresh store of
    /// `backend`, configured as `with(_:_:_:)` runs it but for deletions kept `tombstonesKept` and
    /// purged every `purgedEvery` (seconds, where `serve` takes days and purges hourly); stops it and
    /// removes its store afterwards.
    static func with<T>(
        _ backend: StorageBackend = .lmdb,
        tombstonesKept: Duration,
        purgedEvery: Duration,
        _ body: (SyncServer) async throws -> T
    ) async throws -> T {
        try await with(
            backend,
            configure: {
                $0.tombstoneLifetime = tombstonesKept
                $0.purgeInterval = purgedEvery
            },
            body
        )
    }

    /// Runs `body` with the server built in this process on a fresh store of `backend`, with the
    /// configuration `with(_:_:_:)` gives the executable and what `configure` changes; stops it and
    /// removes its store afterwards.
    private static func with<T>(
        _ backend: StorageBackend,
        configure: (inout ServerConfiguration) -> Void,
        _ body: (SyncServer) async throws -> T
    ) async throws -> T {
        let (storage, cleanup) = try await backend.serverStorage("gds-sync")
        let server: SyncServer
        do {
            var configuration = try ServerConfiguration.syncTests(storage: storage)
            configure(&configuration)
            let running = try await InProcessServer.start(configuration)
            do {
                let token = try await ServerTool.createToken(storage: storage)
                server = try SyncServer(
                    backend: backend,
                    storage: storage,
                    token: token,
                    serveArguments: [],
                    process: nil,
                    inProcess: running,
                    cleanup: cleanup
                )
            } catch {
                await running.stop()
                throw error
            }
        } catch {
            cleanup()
            throw error
        }
        return try await server.running(body)
    }

    /// Runs `body` with this server, then stops it, also when `body` throws.
    private func running<T>(_ body: (SyncServer) async throws -> T) async throws -> T {
        do {
            let result = try await body(self)
            await stop()
            return result
        } catch {
            await stop()
            throw error
        }
    }

    /// The server's process (not for a server built in this process).
    var process: ServerProcess {
        guard let process = current.process else { preconditionFailure("the server runs in this process") }
        return process
    }
    var port: Int { inProcess?.port ?? process.port }
    var url: URL { inProcess.map { URL(string: "http://127.0.0.1:\($0.port)")! } ?? process.url }

    /// A client of the server's API for `suite`, with this server's token.
    func client(_ suite: String, token: String? = nil) -> SyncClient {
        let token = token ?? self.token
        return SyncClient(server: url, suite: suite, http: http) { token }
    }

    /// What the server holds for `suite`, read page by page through the snapshot endpoint: live
    /// entries by key (tombstones left out), and the head revision of the first page.
    func snapshot(_ suite: String) async throws -> (entries: [String: SyncEntry], head: UInt64) {
        let client = client(suite)
        var entries: [String: SyncEntry] = [:]
        var after: String?
        var head: UInt64?
        repeat {
            let page = try await client.snapshot(after: after, limit: 1000)
            head = head ?? page.headRev
            for entry in page.entries where !entry.isDeleted { entries[entry.key] = entry }
            after = page.next
        } while after != nil
        return (entries, head ?? 0)
    }

    /// `snapshot(_:)`, with an encrypted suite's entries opened with `keys` (by key name).
    func snapshot(_ suite: String, keys: SuiteKeys?) async throws -> (entries: [String: SyncEntry], head: UInt64) {
        let (entries, head) = try await snapshot(suite)
        guard let keys else { return (entries, head) }
        let sealer = EntrySealer(keys: keys)
        return (
            Dictionary(
                uniqueKeysWithValues: try entries.values.map {
                    let entry = try sealer.open($0)
                    return (entry.key, entry)
                }
            ), head
        )
    }

    /// Every entry of the changes feed after `since` (latest per key, in revision order).
    func changes(_ suite: String, since: UInt64 = 0) async throws -> (entries: [SyncEntry], lastRev: UInt64) {
        let client = client(suite)
        var entries: [SyncEntry] = []
        var since = since
        while true {
            let page = try await client.changes(since: since, limit: 1000)
            entries += page.entries
            since = page.lastRev
            if !page.hasMore { return (entries, since) }
        }
    }

    /// SIGKILL, `whileDown`, then a new server process on the same store and the same port (devices
    /// keep their configured URL). Binding may fail for a moment after the kill: it is tried for 10 s.
    func killAndRestart(whileDown: () async throws -> Void = {}) async throws {
        let old = process
        old.signal(SIGKILL)
        _ = await old.waitForExit()
        try await whileDown()
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                current.process = try await ServerProcess(dataDirectory: nil, port: old.port, extraArguments: storage + serveArguments)
                return
            } catch  where ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    /// `groupdefaults-server token …` on this server's store.
    func tokenCommand(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await ServerTool.run(["token"] + arguments + storage)
    }

    /// `GET /metrics`: Prometheus' text.
    func metricsText() async throws -> String {
        let request = HTTPClientRequest(url: url.appendingPathComponent("metrics").absoluteString)  // GET
        let response = try await http.execute(request, timeout: .seconds(10))
        return String(buffer: try await response.body.collect(upTo: 16 << 20))
    }

    /// The request counts of `GET /metrics` (`hb_requests`), summed over statuses, by route.
    func requestCounts() async throws -> [String: Int] {
        Metrics.requestCounts(try await metricsText())
    }

    /// SIGTERM (SIGKILL after a grace period), then the store is removed and the client shut down.
    func stop() async {
        if let inProcess { await inProcess.stop() } else { await process.stop() }
        try? await http.shutdown()
        cleanup()
    }
}

/// The current server process (replaced by `killAndRestart`).
private final class ProcessBox: @unchecked Sendable {  // replaced only by the test's own task
    var process: ServerProcess?
    init(_ process: ServerProcess?) { self.process = process }
}

/// Reading the Prometheus text of `/metrics`.
enum Metrics {
    /// `hb_requests{…,http_route="ROUTE",…} N` summed by route (over methods and statuses).
    static func requestCounts(_ text: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("hb_requests{") {
            guard let route = label("http_route", in: line), let count = line.split(separator: " ").last.flatMap({ Double($0) }) else {
                continue
            }
            counts[route, default: 0] += Int(count)
        }
        return counts
    }

    /// The counts for a status (`http_status_code`) only.
    static func requestCounts(_ text: String, status: String) -> [String: Int] {
        requestCounts(text.split(separator: "\n").filter { label("http_status_code", in: $0) == status }.joined(separator: "\n"))
    }

    /// A counter without labels, or with the given labels (`name{a="b"} N`).
    static func value(_ text: String, _ name: String, labels: [String: String] = [:]) -> Double {
        var total = 0.0
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            guard labels.allSatisfy({ label($0.key, in: line) == $0.value }),
                let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            total += value
        }
        return total
    }

    static func label(_ name: String, in line: Substring) -> String? {
        guard let start = line.range(of: name + "=\"") else { return nil }
        let rest = line[start.upperBound...]
        guard let end = rest.firstIndex(of: "\"") else { return nil }
        return String(rest[..<end])
    }

    static let pushRoute = "/v1/suites/{suite}/push"
    static let changesRoute = "/v1/suites/{suite}/changes"
    static let snapshotRoute = "/v1/suites/{suite}/snapshot"
    static let eventsRoute = "/v1/suites/{suite}/events"
}
