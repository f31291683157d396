import Foundation
import GroupDefaultsWire
package import Hummingbird
import HummingbirdCore
import HummingbirdTLS
package import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle

/// The server as `configuration` says: it opens the storage (the embedded store, or PostgreSQL,
/// whose connection pool and listening connection run as services of the application and whose
/// schema is migrated before the server accepts requests), runs the tombstone purge as a service,
/// and closes the storage after the server stops. `onListening` is told the bound address once
/// connections are accepted (the executable prints it).
///
/// - Throws: an LMDB error if the embedded store cannot be opened, `TLSFilesError` if the
///   certificate or key cannot be loaded, `StorageStartError` if PostgreSQL cannot be reached
///   (`PostgresReachability`). When the application runs, a database that fails the migration
///   makes it throw `StorageStartError` before it listens.
package func buildApplication(
    configuration: ServerConfiguration,
    logger: Logger? = nil,
    onListening: @escaping @Sendable (_ host: String, _ port: Int) -> Void = { _, _ in }
) async throws -> some ApplicationProtocol {
    let logger = logger ?? serverLogger(configuration)
    switch configuration.storage {
    case .embedded(let directory):
        // Taken before the store opens, held until the application stops (`ServerLock`).
        try LMDBSyncStorage.makeDirectory(directory)
        let serverLock = try ServerLock.take(in: directory)
        let storage = try LMDBSyncStorage(directory: directory)
        switch storage.eraseOnOpen {
        case .erased: logger.notice("erased the bytes of deleted accounts from the store's file (rebuilt it)")
        case .failed(let reason): logger.warning("deleted accounts' bytes are still in the store's file: \(reason); tried again at the next start")
        case .nothingPending, .othersUseTheStore: break
        }
        return try makeApplication(
            configuration: configuration,
            storage: storage,
            services: [HeldUntilStopped(lock: serverLock)],
            logger: logger,
            onListening: onListening
        )
    case .postgres(let database):
        let primary = try await PostgresReachability.check(database)  // one sentence at once, before any job starts
        let storage = PostgresSyncStorage(configuration: database, primary: primary, logger: logger)
        var app = try makeApplication(
            configuration: configuration,
            storage: storage,
            services: storage.services,
            logger: logger,
            onListening: onListening
        )
        app.beforeServerStarts {
            do {
                try await storage.migrate()
                try await storage.refuseWhileAuthorityKeptApart()
            } catch let error as SyncStorageError {
                throw StorageStartError("cannot use PostgreSQL at \(database.place): \(error.detail)")
            }
        }
        return app
    }
}

/// The server over `storage`, which it closes when it stops (tests give it a store they made).
/// With `configuration.tls` it serves HTTPS (HummingbirdTLS, NIOSSL); a certificate or key that
/// cannot be read is an error here, before anything listens.
package func buildApplication(
    configuration: ServerConfiguration,
    storage: any ServerStorage,
    onListening: @escaping @Sendable (_ host: String, _ port: Int) -> Void = { _, _ in }
) throws -> some ApplicationProtocol {
    try makeApplication(
        configuration: configuration,
        storage: storage,
        services: [],
        logger: serverLogger(configuration),
        onListening: onListening
    )
}

private func serverLogger(_ configuration: ServerConfiguration) -> Logger {
    var logger = Logger(label: "groupdefaults-server")
    logger.logLevel = configuration.logLevel
    return logger
}

/// The application: `storageServices` first (they must run while storage is used), then the
/// service that closes storage once the server has stopped, then the tombstone purge (services
/// stop in reverse order: the server, the purge, storage, its connections).
private func makeApplication(
    configuration: ServerConfiguration,
    storage: any ServerStorage,
    services storageServices: [any Service],
    logger: Logger,
    onListening: @escaping @Sendable (_ host: String, _ port: Int) -> Void
) throws -> Application<ChildTaskResponder<RouterResponder<ServerRequestContext>>> {
    let devices = DeviceTracker(storage: storage, logger: logger)
    let router = buildRouter(storage: storage, configuration: configuration, devices: devices)
    let host = configuration.host
    let limits = configuration.connections
    let http1 = HTTP1Channel.Configuration(
        additionalChannelHandlers: [
            SmallReceiveBuffers(), RequestHeadDeadline(timeout: limits.requestHeadTimeout),
            RequestBodyDeadline(grace: limits.requestHeadTimeout), ShutdownGrace(),
        ],
        idleTimeout: TimeAmount(limits.idleTimeout)
    )
    let maxConnections = OpenFileLimit.connectionsAllowed(wanted: limits.maxConnections, logger: logger)
    let responder = router.buildResponder()
    // An event stream that opens its connection is held by the connection, with no task.
    let respond: ParkedEventStream.Respond = { request, parking, channel in
        var context = ServerRequestContext(source: .init(channel: channel, logger: logger))
        context.streamParking = parking
        do {
            return try await responder.respond(to: request, context: context)
        } catch {
            return Response(status: .internalServerError)  // as Hummingbird answers what no middleware did
        }
    }
    let serverName = "groupdefaults-server"
    var server = HTTPServerBuilder { hummingbird in
        StreamHoldingHTTP1Channel(http1: HTTP1Channel(responder: hummingbird, configuration: http1), respond: respond, serverName: serverName)
    }
    if let tls = configuration.tls {
        server = try .tls(server, tlsConfiguration: TLSFilesError.serverConfiguration(tls))
    }
    // The purge starts once the server listens: before, PostgreSQL's schema may not exist yet.
    let (listening, listeningNow) = AsyncStream<Void>.makeStream()
    return Application(
        responder: ChildTaskResponder(inner: responder),  // each request's memory goes when it is answered
        server: server,
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port),
            serverName: serverName,
            availableConnectionsDelegate: MaximumAvailableConnections(maxConnections, logger: logger)
        ),
        services: storageServices + [
            StorageService(storage: storage, devices: devices),
            TombstonePurge(storage: storage, configuration: configuration, logger: logger, listening: listening),
        ],
        onServerRunning: { channel in
            listeningNow.finish()
            Task { await warnOfLookAlikeNames(storage, logger: logger) }
            onListening(host.contains(":") ? "[\(host)]" : host, channel.localAddress?.port ?? configuration.port)
        },
        logger: logger
    )
}

/// Logs, at start, the stored account and operator names that look alike (made before new names
/// were checked against existing ones, `NewNames`), with what to do.
private func warnOfLookAlikeNames(_ storage: any ServerStorage, logger: Logger) async {
    do {
        let accounts = try await storage.accountSummaries().map(\.account)
        let operators = try await Operators(storage: storage).list().map(\.name)
        for note in NewNames.lookAlikeNotes(accounts, kind: .account) + NewNames.lookAlikeNotes(operators, kind: .operator) {
            logger.warning("\(note)")
        }
    } catch {
        logger.warning("could not check the names of accounts and operators for look-alikes: \(error)")
    }
}

/// Holds the data directory's `ServerLock` until the application stops: the first service, so the
/// last to stop, after storage is closed.
struct HeldUntilStopped: Service {
    let lock: ServerLock

    func run() async throws {
        try? await gracefulShutdown()
        lock.release()
    }
}

/// Closes storage once the server has stopped (services shut down after the server), after
/// writing the device sightings not written yet (the last turns of the event streams that
/// shutdown ended among them).
struct StorageService: Service {
    let storage: any ServerStorage
    let devices: DeviceTracker

    func run() async throws {
        try? await gracefulShutdown()
        await devices.close()
        try await storage.shutdown()
    }
}

/// Purges tombstones older than the configured lifetime, and audit records older than theirs
/// (`auditLifetime`), every `purgeInterval`, until shutdown.
struct TombstonePurge: Service {
    let storage: any SyncStore & AuditStore
    let configuration: ServerConfiguration
    let logger: Logger
    /// Ends when the server listens (its storage is ready by then: migrated, for PostgreSQL); a
    /// storage already ready (a test's) needs no wait.
    var listening = AsyncStream<Void> { $0.finish() }

    func run() async throws {
        // A server that never listens (it failed to start, or a test drives its router alone) still
        // ends this service at shutdown.
        await cancelWhenGracefulShutdown { for await _ in listening {} }
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            let lifetime = configuration.tombstoneLifetime.components.seconds * 1000
            let horizon = HLC(milliseconds: HLC.wallClockMilliseconds() &- UInt64(max(lifetime, 0)), counter: 0)
            do {
                let removed = try await storage.purgeTombstones(olderThan: horizon)
                if removed > 0 { logger.info("purged \(removed) tombstones") }
                let auditHorizon = Date().addingTimeInterval(-Double(configuration.auditLifetime.components.seconds))
                let records = try await storage.purgeAudit(olderThan: auditHorizon)
                if records > 0 { logger.info("purged \(records) audit records") }
            } catch {
                // Stopping (the server could not start, or is shutting down) closes the storage
                // under a purge in flight: no news for the log.
                if Task.isCancelled || Task.isShuttingDownGracefully { return }
                logger.error("purging tombstones failed: \(error)")
            }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: configuration.purgeInterval) }
        }
    }
}

/// The certificate or key for HTTPS could not be loaded: which file, and why, in one sentence.
package struct TLSFilesError: Error, CustomStringConvertible {
    /// The sentence: `the TLS key /etc/ssl/server.key is not a PEM private key`.
    package let description: String

    init(_ description: String) { self.description = description }

    /// HTTPS from `tls`'s files, loaded and checked as the server loads them: each file readable, a
    /// PEM certificate (chain) and a PEM private key that belongs to it. `check-config` and `serve`
    /// ask this one place, so that a configuration one accepts the other starts with.
    static func serverConfiguration(_ tls: TLSFiles) throws(TLSFilesError) -> TLSConfiguration {
        for (path, what) in [(tls.certificatePath, "certificate"), (tls.keyPath, "key")] {
            try checkReadable(path, what: what)
        }
        let certificates: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(tls.certificatePath)
        } catch {
            throw TLSFilesError("the TLS certificate \(tls.certificatePath) is not a PEM certificate (chain)")
        }
        do {
            key = try NIOSSLPrivateKey(file: tls.keyPath, format: .pem)
        } catch {
            throw TLSFilesError("the TLS key \(tls.keyPath) is not a PEM private key (or needs a passphrase)")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: certificates.map { .certificate($0) },
            privateKey: .privateKey(key)
        )
        // A context is what checks that the key belongs to the certificate.
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw TLSFilesError("the TLS key \(tls.keyPath) does not belong to the certificate \(tls.certificatePath)")
        }
        return configuration
    }

    /// Checks `tls`'s files as `serverConfiguration(_:)` does, for `check-config`.
    package static func check(_ tls: TLSFiles) throws(TLSFilesError) {
        _ = try serverConfiguration(tls)
    }

    /// Refuses a file that cannot be read, saying why.
    static func checkReadable(_ path: String, what: String) throws(TLSFilesError) {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw TLSFilesError("cannot read the TLS \(what) \(path): no such file")
        }
        guard !isDirectory.boolValue, FileManager.default.isReadableFile(atPath: path) else {
            throw TLSFilesError("cannot read the TLS \(what) \(path): \(isDirectory.boolValue ? "it is a directory" : "permission denied")")
        }
    }
}
