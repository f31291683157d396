import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import Logging
import Metrics

/// `groupdefaults-server serve`: run the API until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the sync API (the default).",
        discussion: """
            Every option can also be set in a settings file (--config PATH) or the environment, as \
            GROUPDEFAULTS_SERVER_ and the option's name in capitals (GROUPDEFAULTS_SERVER_MAX_WAIT=30); \
            flags win over the environment, which wins over the file. `check-config` shows what \
            would be used.

            Example: groupdefaults-server serve --data-dir /var/lib/groupdefaults-server --port 8080
            """
    )

    @OptionGroup var options: ServeOptions

    func run() async throws {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = options.logLevel.level
            return handler
        }
        MetricsSystem.bootstrap(ServerMetrics.makeFactory())
        let configuration = try options.serverConfiguration()
        let scheme = configuration.tls == nil ? "http" : "https"
        let app = try await buildApplication(configuration: configuration) { host, port in
            output("listening on \(scheme)://\(host):\(port)")  // unbuffered: a script waits for this line
        }
        do {
            try await app.runService()
        } catch {
            // A port in use is one sentence, not NIO's `bind(…)` dump.
            guard let sentence = ListenFailure.sentence(for: error, host: configuration.host, port: configuration.port) else { throw error }
            throw CommandFailure(sentence)
        }
    }
}

/// The options of `serve` (and of `check-config`, which shows what they come to).
struct ServeOptions: ParsableArguments {
    @Option(help: "The address to listen on.") var host = "127.0.0.1"
    @Option(help: "The port to listen on; 0 picks a free one.") var port = 8080
    @OptionGroup var storage: StorageOptions
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.") var logLevel = LogLevel(.info)
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
    @Option(help: "How many versions of each key the history keeps (GET …/keys/{key}/history); 0 keeps none.") var history = 10
    @Option(help: "How many event streams and waiting long-polls one token may hold open at once; 429 beyond.")
    var maxStreamsPerToken = 100
    @Option(help: "The most connections open at once (lowered to what the open-file limit allows); more wait to be accepted.")
    var maxConnections = 10_000
    @Option(help: "Seconds a request's head may take to arrive in full; the connection is closed after that.")
    var requestHeadTimeout = 10
    @Option(help: "Seconds a kept-alive connection may stay quiet between requests before it is closed.")
    var idleTimeout = 120
    @Option(help: "Serve the operator console at /console (operators: `admin create`): on or off.") var console = "on"
    @Option(help: "How many hours a console sign-in lasts.") var consoleSessionHours = 12
    @Option(
        help: ArgumentHelp(
            "A file (mode 0600) whose first line is the bearer token GET /metrics then asks for; without it /metrics answers anyone who reaches the server.",
            valueName: "PATH"
        )
    ) var metricsTokenFile: String?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0 to 65535 (0 picks a free one), not \(port)") }
        guard maxWait >= 0 else { throw ValidationError("--max-wait must not be negative") }
        guard tombstoneDays >= 1 else { throw ValidationError("--tombstone-days must be at least 1") }
        guard tombstoneSeconds.map({ $0 >= 1 }) ?? true, purgeInterval >= 1 else {
            throw ValidationError("--tombstone-seconds and --purge-interval must be at least 1")
        }
        guard (1...15).contains(heartbeat) else { throw ValidationError("--heartbeat must be 1 to 15 seconds") }
        guard [maxValueBytes, maxKeysPerSuite, maxBytesPerSuite, maxOpsPerBatch].allSatisfy({ $0 >= 1 }) else {
            throw ValidationError("the --max-… limits must be at least 1")
        }
        guard history >= 0 else { throw ValidationError("--history must not be negative") }
        guard [maxStreamsPerToken, maxConnections, requestHeadTimeout, idleTimeout].allSatisfy({ $0 >= 1 }) else {
            throw ValidationError("--max-streams-per-token, --max-connections, --request-head-timeout and --idle-timeout must be at least 1")
        }
        guard ["on", "off"].contains(console) else { throw ValidationError("--console must be on or off") }
        guard (1...720).contains(consoleSessionHours) else { throw ValidationError("--console-session-hours must be 1 to 720") }
        guard rateLimit > 0, rateLimit.isFinite else { throw ValidationError("--rate-limit must be a positive number") }
        guard (tlsCertificate == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
    }

    /// Each setting's value as an option takes it, in `SettingsSources.names`' order.
    var settingValues: [(name: String, value: String)] {
        let storage: [(String, String)] =
            self.storage.postgresURL.map { [("postgres-url", $0)] }
            ?? [("data-dir", self.storage.resolvedDataDirectory)]
        return [("host", host), ("port", String(port))] + storage
            + [
                ("log-level", logLevel.level.rawValue), ("max-wait", String(maxWait)), ("tombstone-days", String(tombstoneDays)),
                ("tls-cert", tlsCertificate ?? ""), ("tls-key", tlsKey ?? ""), ("rate-limit", String(rateLimit)),
                ("max-value-bytes", String(maxValueBytes)), ("max-keys-per-suite", String(maxKeysPerSuite)),
                ("max-bytes-per-suite", String(maxBytesPerSuite)), ("max-ops-per-batch", String(maxOpsPerBatch)),
                ("heartbeat", String(heartbeat)), ("history", String(history)), ("max-streams-per-token", String(maxStreamsPerToken)),
                ("max-connections", String(maxConnections)), ("request-head-timeout", String(requestHeadTimeout)),
                ("idle-timeout", String(idleTimeout)), ("console", console), ("console-session-hours", String(consoleSessionHours)),
                ("metrics-token-file", metricsTokenFile ?? ""),
            ].filter { !$0.1.isEmpty }
    }

    /// The server's configuration from the options.
    func serverConfiguration() throws -> ServerConfiguration {
        let tls = zip(tlsCertificate, tlsKey).map { TLSFiles(certificatePath: $0, keyPath: $1) }
        return ServerConfiguration(
            host: host,
            port: port,
            storage: try storage.configuration,
            limits: SyncLimits(
                maxValueBytes: maxValueBytes,
                maxKeysPerSuite: maxKeysPerSuite,
                maxBytesPerSuite: maxBytesPerSuite,
                maxOpsPerBatch: maxOpsPerBatch,
                maxBodyBytes: max(2 << 20, maxValueBytes + (64 << 10)),
                maxStreamsPerToken: maxStreamsPerToken
            ),
            maxWait: .seconds(maxWait),
            logLevel: logLevel.level,
            tombstoneLifetime: .seconds(Int64(tombstoneSeconds ?? tombstoneDays * 86_400)),
            purgeInterval: .seconds(purgeInterval),
            eventHeartbeat: .seconds(heartbeat),
            tls: tls,
            rateLimit: RateLimit(requestsPerSecond: rateLimit, burst: 2 * rateLimit),
            historyDepth: history,
            connections: ConnectionLimits(
                maxConnections: maxConnections,
                requestHeadTimeout: .seconds(requestHeadTimeout),
                idleTimeout: .seconds(idleTimeout)
            ),
            console: ConsoleConfiguration(enabled: console == "on", sessionLifetime: .seconds(consoleSessionHours * 3600)),
            metricsToken: try metricsTokenFile.map(Self.readMetricsToken)
        )
    }

    /// The first line of `--metrics-token-file`, which must not be readable by others.
    private static func readMetricsToken(_ path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0, let data = FileManager.default.contents(atPath: path) else {
            throw CommandFailure("--metrics-token-file: cannot read \(path)")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw CommandFailure(
                "--metrics-token-file: \(path) can be read by its group or others (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 \(path)"
            )
        }
        let token =
            String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init)?
            .trimmingCharacters(in: .whitespaces) ?? ""
        guard token.count >= 16 else {
            throw CommandFailure("--metrics-token-file: \(path) must hold a token of at least 16 characters on its first line")
        }
        return token
    }
}

/// A log level as `--log-level` takes it: trace, debug, info, notice, warning, error or critical.
struct LogLevel: ExpressibleByArgument {
    let level: Logger.Level

    init(_ level: Logger.Level) { self.level = level }

    init?(argument: String) {
        guard let level = Logger.Level(rawValue: argument) else { return nil }
        self.level = level
    }

    var defaultValueDescription: String { level.rawValue }

    static var allValueStrings: [String] { Logger.Level.allCases.map(\.rawValue) }
}

/// Both, or nil.
private func zip<A, B>(_ a: A?, _ b: B?) -> (A, B)? {
    guard let a, let b else { return nil }
    return (a, b)
}
