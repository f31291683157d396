import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import Logging
import Metrics
import SystemCalls

/// `groupdefaults-server serve`: run the API until SIGTERM or SIGINT.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve the sync API (the default).",
        discussion: """
            Every option can also be set in a settings file (--config PATH) or the environment, as \
            GROUPDEFAULTS_SERVER_ and the option's name in capitals (GROUPDEFAULTS_SERVER_MAX_WAIT=30; \
            --console/--no-console as GROUPDEFAULTS_SERVER_CONSOLE=on or off); flags win over the \
            environment, which wins over the file. `check-config` shows what would be used.

            Example: groupdefaults-server serve --data-dir /var/lib/groupdefaults-server --port 8080
            """
    )

    @OptionGroup var options: ServeOptions

    func run() async throws {
        let configuration = try options.serverConfiguration()
        LoggingSystem.bootstrap { label in PrintableLogHandler.standardError(label: label, level: configuration.logLevel) }
        MetricsSystem.bootstrap(ServerMetrics.makeFactory())
        let scheme = configuration.tls == nil ? "http" : "https"
        // What would refuse the start is said before the store is opened, as `check-config` says it:
        // a serve refused for its TLS files or its address leaves no new data directory behind.
        if let tls = configuration.tls {
            do { try TLSFilesError.check(tls) } catch { throw CommandFailure("\(error)") }
        }
        if let refusal = await ListenFailure.probe(host: configuration.host, port: configuration.port) {
            throw CommandFailure(refusal)
        }
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

/// The options of `serve` (and of `check-config`, which shows what they come to): one for each
/// setting of `ServerSettings`, without a default (nil: not given), so that a setting not given as a
/// flag comes from the environment, the settings file or its default (`SettingsSources`).
struct ServeOptions: ParsableArguments {
    @Option(help: ServerSettings.host.help) var host: String?
    @Option(help: ServerSettings.port.help) var port: Int?
    @OptionGroup var storage: StorageOptions
    @Option(help: ServerSettings.logLevel.help) var logLevel: LogLevel?
    @Option(help: ServerSettings.maxWait.help) var maxWait: Int?
    @Option(help: ServerSettings.tombstoneDays.help) var tombstoneDays: Int?
    @Option(help: ServerSettings.auditDays.help) var auditDays: Int?
    @Option(help: ServerSettings.tlsCert.help) var tlsCert: String?
    @Option(help: ServerSettings.tlsKey.help) var tlsKey: String?
    @Option(help: ServerSettings.rateLimit.help) var rateLimit: Double?
    @Option(help: ServerSettings.maxValueBytes.help) var maxValueBytes: Int?
    @Option(help: ServerSettings.maxKeysPerSuite.help) var maxKeysPerSuite: Int?
    @Option(help: ServerSettings.maxBytesPerSuite.help) var maxBytesPerSuite: Int?
    @Option(help: ServerSettings.maxOpsPerBatch.help) var maxOpsPerBatch: Int?
    @Option(help: ServerSettings.heartbeat.help) var heartbeat: Int?
    @Option(help: ServerSettings.history.help) var history: Int?
    @Option(help: ServerSettings.maxStreamsPerToken.help) var maxStreamsPerToken: Int?
    @Option(help: ServerSettings.maxConnections.help) var maxConnections: Int?
    @Option(help: ServerSettings.requestHeadTimeout.help) var requestHeadTimeout: Int?
    @Option(help: ServerSettings.idleTimeout.help) var idleTimeout: Int?
    @Flag(inversion: .prefixedNo, help: ServerSettings.console.help) var console: Bool?
    @Option(help: ServerSettings.consoleSessionHours.help) var consoleSessionHours: Int?
    @Option(help: ServerSettings.metricsTokenFile.help) var metricsTokenFile: String?

    /// A bad flag is misuse, said as ArgumentParser says it; a bad value of the environment or the
    /// file is a failure (`CommandFailure`), said by `run()` as it is.
    func validate() throws {
        do { _ = try settings() } catch is CommandFailure {}
    }

    /// The settings of the flags, `--config`'s file, the environment and the defaults.
    func settings() throws -> ResolvedSettings {
        try SettingsSources.resolve(
            flags: ServerSettings.given(in: self),
            configPath: storage.config,
            environment: ProcessInfo.processInfo.environment
        )
    }

    /// The server's configuration from the settings.
    func serverConfiguration() throws -> ServerConfiguration {
        try Self.serverConfiguration(try settings())
    }

    /// The server's configuration from resolved settings.
    static func serverConfiguration(_ settings: ResolvedSettings) throws -> ServerConfiguration {
        typealias S = ServerSettings
        let tls = zip(settings[S.tlsCert], settings[S.tlsKey]).map { TLSFiles(certificatePath: $0, keyPath: $1) }
        let maxValueBytes = settings[defaulted: S.maxValueBytes]
        let rateLimit = settings[defaulted: S.rateLimit]
        var configuration = ServerConfiguration(
            host: settings[defaulted: S.host],
            port: settings[defaulted: S.port],
            storage: try StorageOptions.configuration(settings),
            limits: SyncLimits(
                maxValueBytes: maxValueBytes,
                maxKeysPerSuite: settings[defaulted: S.maxKeysPerSuite],
                maxBytesPerSuite: settings[defaulted: S.maxBytesPerSuite],
                maxOpsPerBatch: settings[defaulted: S.maxOpsPerBatch],
                maxStreamsPerToken: settings[defaulted: S.maxStreamsPerToken]
            ),
            maxWait: .seconds(settings[defaulted: S.maxWait]),
            logLevel: settings[defaulted: S.logLevel].level,
            tombstoneLifetime: .seconds(Int64(settings[defaulted: S.tombstoneDays] * 86_400)),
            eventHeartbeat: .seconds(settings[defaulted: S.heartbeat]),
            tls: tls,
            rateLimit: RateLimit(requestsPerSecond: rateLimit),
            historyDepth: settings[defaulted: S.history],
            connections: ConnectionLimits(
                maxConnections: settings[defaulted: S.maxConnections],
                requestHeadTimeout: .seconds(settings[defaulted: S.requestHeadTimeout]),
                idleTimeout: .seconds(settings[defaulted: S.idleTimeout])
            ),
            console: ConsoleConfiguration(
                enabled: settings[defaulted: S.console],
                sessionLifetime: .seconds(settings[defaulted: S.consoleSessionHours] * 3600)
            ),
            metricsToken: try settings[S.metricsTokenFile].map(readMetricsToken)
        )
        configuration.auditLifetime = .seconds(Int64(settings[defaulted: S.auditDays] * 86_400))
        return configuration
    }

    /// The first line of `--metrics-token-file`, which must not be readable by others.
    private static func readMetricsToken(_ path: String) throws -> String {
        var info = stat()
        guard stat(path, &info) == 0, let data = FileManager.default.contents(atPath: path) else {
            throw CommandFailure("--metrics-token-file: cannot read \(path)")
        }
        if let exposure = PrivateFileRule.exposure(of: path, mode: info.st_mode) { throw CommandFailure("--metrics-token-file: \(exposure)") }
        let token =
            String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init)?
            .trimmingCharacters(in: .whitespaces) ?? ""
        guard token.count >= 16 else {
            throw CommandFailure("--metrics-token-file: \(path) must hold a token of at least 16 characters on its first line")
        }
        return token
    }
}

/// Both, or nil.
private func zip<A, B>(_ a: A?, _ b: B?) -> (A, B)? {
    guard let a, let b else { return nil }
    return (a, b)
}
