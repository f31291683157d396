import Foundation
import GroupDefaultsServer
import Hummingbird
import Logging
import ServiceLifecycle

/// A sync server built in this process with `buildApplication`, for settings no flag sets: tests of
/// devices that come back after the tombstone purge keep deletions for seconds, not days, and purge
/// every second (`ServerConfiguration.tombstoneLifetime`, `purgeInterval`).
final class InProcessServer: Sendable {
    let port: Int
    private let group: ServiceGroup
    private let running: Task<Void, any Error>

    private init(port: Int, group: ServiceGroup, running: Task<Void, any Error>) {
        self.port = port
        self.group = group
        self.running = running
    }

    /// Builds the application for `configuration` and runs it until `stop()`; returns once it listens.
    static func start(_ configuration: ServerConfiguration) async throws -> InProcessServer {
        let (listening, announce) = AsyncStream.makeStream(of: Int.self)
        let app = try await buildApplication(configuration: configuration) { _, port in
            announce.yield(port)
            announce.finish()
        }
        // As `runService()` runs it, without signal handlers (the test runner's signals are its
        // own): `stop()` shuts it down as SIGTERM does.
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(services: [app], logger: Logger(label: "groupdefaults-server"))
        )
        let running = Task { try await group.run() }
        var ports = listening.makeAsyncIterator()
        guard let port = await ports.next() else {
            await group.triggerGracefulShutdown()
            _ = await running.result
            throw ServerStartError()
        }
        return InProcessServer(port: port, group: group, running: running)
    }

    /// Shuts the server down gracefully (the purge and storage stop after it) and waits for it.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = await running.result
    }

    /// The application stopped before it listened.
    struct ServerStartError: Error, CustomStringConvertible {
        var description: String { "the in-process server stopped before it listened" }
    }
}

extension ServerConfiguration {
    /// The configuration of `serve STORAGE` (`--data-dir DIR` or `--postgres-url URL`), as the sync
    /// tests' servers run it: the rate limit out of reach, errors logged only (its warnings at
    /// shutdown, a device not recorded, are no news here).
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
            logLevel: .error,
            rateLimit: RateLimit(requestsPerSecond: 1_000_000, burst: 2_000_000)
        )
    }
}
