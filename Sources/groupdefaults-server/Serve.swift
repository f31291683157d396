import ArgumentParser
import Foundation
import GroupDefaultsWire
import GroupDefaultsServer
import Hummingbird
import Logging

/// `groupdefaults-server serve`: run the API until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve the sync API (the default).")

    @Option(help: "The address to listen on.") var host = "127.0.0.1"
    @Option(help: "The port to listen on; 0 picks a free one.") var port = 8080
    @OptionGroup var storage: StorageOptions
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel = "info"
    @Option(name: .customLong("max-wait"), help: "The longest long-poll, in seconds.") var maxWait = 60
    @Option(name: .customLong("tombstone-days"), help: "How many days deletions are kept for devices to catch up; older cursors get 410.")
    var tombstoneDays = 30
    // For tests of devices that come back after the purge: seconds instead of days, and how often
    // the purge runs.
    @Option(name: .customLong("tombstone-seconds"), help: .hidden) var tombstoneSeconds: Int?
    @Option(name: .customLong("purge-interval"), help: .hidden) var purgeInterval = 3_600
    @Option(name: .customLong("tls-cert"), help: "Serve HTTPS with this PEM certificate (chain); needs --tls-key.") var tlsCertificate: String?
    @Option(name: .customLong("tls-key"), help: "The PEM private key of --tls-cert.") var tlsKey: String?
    @Option(name: .customLong("rate-limit"), help: "Requests per second one token may make (twice that in a burst); 429 beyond.")
    var rateLimit = 200.0
    @Option(help: "The largest value, in bytes of its typed JSON.") var maxValueBytes = 1 << 20
    @Option(help: "The most keys a suite may hold.") var maxKeysPerSuite = 10_000
    @Option(help: "The most bytes (keys and values) a suite may hold.") var maxBytesPerSuite = 16 << 20
    @Option(help: "The most ops in one push.") var maxOpsPerBatch = 500
    @Option(help: "The longest an event stream stays silent, in seconds (a heartbeat comment then; 1…15).") var heartbeat = 15

    func run() async throws {
        do {
            guard let level = Logger.Level(rawValue: logLevel) else { throw CommandFailure("unknown log level \(logLevel)") }
            guard maxWait >= 0 else { throw CommandFailure("--max-wait must not be negative") }
            guard tombstoneDays >= 1 else { throw CommandFailure("--tombstone-days must be at least 1") }
            guard tombstoneSeconds.map({ $0 >= 1 }) ?? true, purgeInterval >= 1 else {
                throw CommandFailure("--tombstone-seconds and --purge-interval must be at least 1")
            }
            guard (1...15).contains(heartbeat) else { throw CommandFailure("--heartbeat must be 1 to 15 seconds") }
            guard [maxValueBytes, maxKeysPerSuite, maxBytesPerSuite, maxOpsPerBatch].allSatisfy({ $0 >= 1 }) else {
                throw CommandFailure("the --max-… limits must be at least 1")
            }
            guard rateLimit > 0, rateLimit.isFinite else { throw CommandFailure("--rate-limit must be a positive number") }
            let tls: TLSFiles?
            switch (tlsCertificate, tlsKey) {
            case (nil, nil): tls = nil
            case let (certificate?, key?): tls = TLSFiles(certificatePath: certificate, keyPath: key)
            default: throw CommandFailure("--tls-cert and --tls-key go together")
            }
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            let configuration = ServerConfiguration(
                host: host, port: port, dataDirectory: storage.resolvedDataDirectory,
                limits: SyncLimits(maxValueBytes: maxValueBytes, maxKeysPerSuite: maxKeysPerSuite, maxBytesPerSuite: maxBytesPerSuite,
                                   maxOpsPerBatch: maxOpsPerBatch, maxBodyBytes: max(2 << 20, maxValueBytes + (64 << 10))),
                maxWait: .seconds(maxWait), logLevel: level,
                tombstoneLifetime: .seconds(Int64(tombstoneSeconds ?? tombstoneDays * 86_400)), purgeInterval: .seconds(purgeInterval),
                eventHeartbeat: .seconds(heartbeat), tls: tls,
                rateLimit: RateLimit(requestsPerSecond: rateLimit, burst: 2 * rateLimit))
            let store = try await storage.openStorage(logger: Logger(label: "groupdefaults-server"))
            let scheme = tls == nil ? "http" : "https"
            let app = try await withTLSFailure(closing: store) {
                try buildApplication(configuration: configuration, storage: store) { host, port in
                    // Written straight to the file descriptor: nothing buffered for a script to wait on.
                    FileHandle.standardOutput.write(Data("listening on \(scheme)://\(host):\(port)\n".utf8))
                }
            }
            try await app.runService()
        } catch let failure as CommandFailure {
            FileHandle.standardError.write(Data("groupdefaults-server: \(failure)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// Runs `build`; a certificate or key that cannot be loaded becomes one line (the store closed).
private func withTLSFailure<App>(closing store: any SyncStorage, _ build: () throws -> App) async throws -> App {
    do {
        return try build()
    } catch let error as TLSFilesError {
        try? await store.shutdown()
        throw CommandFailure("\(error)")
    }
}
