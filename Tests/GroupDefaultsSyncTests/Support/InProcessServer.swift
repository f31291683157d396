import Foundation
import GroupDefaultsServer
import Hummingbird
import Logging

/// A sync server built in this process with `buildApplication`, for settings no flag sets: tests of
/// devices that come back after the tombstone purge keep deletions for seconds, not days, and purge
/// every second (`ServerConfiguration.tombstoneLifetime`, `purgeInterval`).
final class InProcessServer: Sendable {
    let port: Int
    private let running: Task<Void, any Error>

    private init(port: Int, running: Task<Void, any Error>) {
        self.port = port
        self.running = running
    }

    /// Builds the application for `configuration` and runs it until `stop()`; returns once it listens.
    static func start(_ configuration: ServerConfiguration) async throws -> InProcessServer {
        let (listening, announce) = AsyncStream.makeStream(of: Int.self)
        let app = try await buildApplication(configuration: configuration) { _, port in
            announce.yield(port)
            announce.finish()
        }
        // No signal handlers: the test runner's signals are its own; `stop()` cancels the task.
        let running = Task { try await app.runService(gracefulShutdownSignals: []) }
        var ports = listening.makeAsyncIterator()
        guard let port = await ports.next() else {
            running.cancel()
            _ = await running.result
            throw ServerStartError()
        }
        return InProcessServer(port: port, running: running)
    }

    /// Shuts the server down gracefully (the purge and storage stop after it) and waits for it.
    func stop() async {
        running.cancel()
        _ = await running.result
    }

    /// The application stopped before it listened.
    struct ServerStartError: Error, CustomStringConvertible {
        var description: String { "the in-process server stopped before it listened" }
    }
}

extension ServerConfiguration {
    /// The configuration of `serve STORAGE` (`--data-dir DIR` or `--postgres-url URL`), as the sync
    /// tests' servers run it: the rate limit out of reach, warnings and errors logged only.
    static func syncTests(storage: [String]) throws -> ServerConfiguration {
        let store: StorageConfiguration =
            switch (storage.first, storage.last) {
            case ("--postgres-url", let url?): .postgres(try PostgresStorageConfiguration(url: url))
            case (_, let directory?): .embedded(directory: directory)
            default: preconditionFailure("no storage in \(storage)")
            }
        return ServerConfiguration(
            port: 0,
            storage: store,
            logLevel: .warning,
            rateLimit: RateLimit(requestsPerSecond: 1_000_000, burst: 2_000_000)
        )
    }
}
