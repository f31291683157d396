import Foundation
import GroupDefaultsWire
package import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import NIOCore
import ServiceLifecycle

/// The server: the embedded store in `configuration.dataDirectory` behind the `/v1` router.
/// `onListening` is told the bound address once connections are accepted (the executable prints it).
package func buildApplication(
    configuration: ServerConfiguration, onListening: @escaping @Sendable (_ host: String, _ port: Int) -> Void = { _, _ in }
) throws -> some ApplicationProtocol {
    try buildApplication(
        configuration: configuration, storage: try LMDBSyncStorage(directory: configuration.dataDirectory), onListening: onListening)
}

/// The server over `storage` (which it shuts down when it stops).
/// With `configuration.tls` it serves HTTPS (HummingbirdTLS, NIOSSL); a certificate or key that
/// cannot be read is an error here, before anything listens.
package func buildApplication(
    configuration: ServerConfiguration, storage: any SyncStorage,
    onListening: @escaping @Sendable (_ host: String, _ port: Int) -> Void = { _, _ in }
) throws -> some ApplicationProtocol {
    var logger = Logger(label: "groupdefaults-server")
    logger.logLevel = configuration.logLevel
    let router = buildRouter(storage: storage, configuration: configuration)
    let host = configuration.host
    var server = HTTPServerBuilder.http1()
    if let tls = configuration.tls {
        let certificates: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(tls.certificatePath)
            key = try NIOSSLPrivateKey(file: tls.keyPath, format: .pem)
        } catch {
            throw TLSFilesError(files: tls, underlying: "\(error)")
        }
        let tlsConfiguration = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificates.map { .certificate($0) }, privateKey: .privateKey(key))
        server = try .tls(.http1(), tlsConfiguration: tlsConfiguration)
    }
    return Application(
        router: router,
        server: server,
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

/// The certificate or key for HTTPS could not be loaded.
package struct TLSFilesError: Error, CustomStringConvertible {
    package let files: TLSFiles
    package let underlying: String
    package var description: String {
        "cannot load the TLS certificate \(files.certificatePath) or key \(files.keyPath) (PEM): \(underlying)"
    }
}
