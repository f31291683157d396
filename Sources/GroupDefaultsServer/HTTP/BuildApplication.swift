import Foundation
import GroupDefaults
public import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The server: the embedded store in `configuration.dataDirectory` behind the `/v1` router.
/// `onListening` is told the bound address once connections are accepted (the executable prints it).
public func buildApplication(
    configuration: ServerConfiguration, onListening: @escaping @Sendable (_ host: String, _ port: Int) -> Void = { _, _ in }
) throws -> some ApplicationProtocol {
    buildApplication(
        configuration: configuration, storage: try LMDBSyncStorage(directory: configuration.dataDirectory), onListening: onListening)
}

/// The server over `storage` (which it shuts down when it stops).
public func buildApplication(
    configuration: ServerConfiguration, storage: any SyncStorage,
    onListening: @escaping @Sendable (_ host: String, _ port: Int) -> Void = { _, _ in }
) -> some ApplicationProtocol {
    var logger = Logger(label: "groupdefaults-server")
    logger.logLevel = configuration.logLevel
    let router = buildRouter(storage: storage, configuration: configuration)
    let host = configuration.host
    return Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "groupdefaults-server"),
        services: [StorageService(storage: storage), TombstonePurge(storage: storage, configuration: configuration, logger: logger)],
        onServerRunning: { channel in
            onListening(host.contains(":") ? "[\(host)]" : host, channel.localAddress?.port ?? configuration.port)
        },
        logger: logger)
}

/// Closes storage once the server has stopped (services shut down after the server).
struct StorageService: Service {
    let storage: any SyncStorage

    func run() async throws {
        try? await gracefulShutdown()
        try await storage.shutdown()
    }
}

/// Purges tombstones older than the configured lifetime, every `purgeInterval`, until shutdown.
struct TombstonePurge: Service {
    let storage: any SyncStorage
    let configuration: ServerConfiguration
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let lifetime = configuration.tombstoneLifetime.components.seconds * 1000
            let horizon = HLC(milliseconds: HLC.wallClockMilliseconds() &- UInt64(max(lifetime, 0)), counter: 0)
            do {
                let removed = try await storage.purgeTombstones(olderThan: horizon)
                if removed > 0 { logger.info("purged \(removed) tombstones") }
            } catch {
                logger.error("purging tombstones failed: \(error)")
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: configuration.purgeInterval) }
        }
    }
}
