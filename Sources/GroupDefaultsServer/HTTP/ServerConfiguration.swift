package import GroupDefaultsWire
package import Logging

/// What the server runs with; the executable fills it from its settings. The defaults of `init`
/// are the only ones: `groupdefaults-server`'s settings (`ServerSettings`) take theirs from here.
package struct ServerConfiguration: Sendable {
    package var host: String
    package var port: Int
    /// Where the data is kept: the embedded store's directory, or PostgreSQL.
    package var storage: StorageConfiguration
    package var limits: SyncLimits
    /// The longest long-poll a client may ask for.
    package var maxWait: Duration
    /// The most entries one `changes` or `snapshot` page returns.
    package var maxPageSize: Int
    package var logLevel: Logger.Level
    /// How long tombstones are kept; older ones are purged (a cursor from before then gets 410).
    package var tombstoneLifetime: Duration
    /// How often the purge runs.
    package var purgeInterval: Duration
    /// How long the audit log keeps a record; the purge removes older ones.
    package var auditLifetime: Duration = .seconds(365 * 86_400)

    package init(
        host: String = "127.0.0.1",
        port: Int = 8080,
        storage: StorageConfiguration,
        limits: SyncLimits = SyncLimits(),
        maxWait: Duration = .seconds(60),
        maxPageSize: Int = 1000,
        logLevel: Logger.Level = .info,
        tombstoneLifetime: Duration = .seconds(30 * 86_400),
        purgeInterval: Duration = .seconds(3_600),
        eventHeartbeat: Duration = .seconds(15),
        tls: TLSFiles? = nil,
        rateLimit: RateLimit = RateLimit(requestsPerSecond: 200),
        historyDepth: Int = 10,
        connections: ConnectionLimits = ConnectionLimits(),
        console: ConsoleConfiguration = ConsoleConfiguration(),
        metricsToken: String? = nil
    ) {
        self.console = console
        self.metricsToken = metricsToken
        self.connections = connections
        self.historyDepth = historyDepth
        self.rateLimit = rateLimit
        self.eventHeartbeat = eventHeartbeat
        self.tls = tls
        self.host = host
        self.port = port
        self.storage = storage
        self.limits = limits
        self.maxWait = maxWait
        self.maxPageSize = maxPageSize
        self.logLevel = logLevel
        self.tombstoneLifetime = tombstoneLifetime
        self.purgeInterval = purgeInterval
    }

    /// The longest an event stream stays silent: a heartbeat comment after this much quiet (at most
    /// 15 s by default; the stream also re-checks its token then).
    package var eventHeartbeat: Duration
    /// How many requests one token may make (429 with `Retry-After` beyond); per server instance.
    package var rateLimit: RateLimit
    /// Serve HTTPS with this certificate and key, instead of HTTP.
    package var tls: TLSFiles?

    /// How many versions of each key the history keeps (the current one included); 0 keeps none.
    package var historyDepth: Int

    /// How many connections, and how long a request's head and a quiet connection may take.
    package var connections: ConnectionLimits

    /// The operator console.
    package var console: ConsoleConfiguration

    /// The bearer token `GET /metrics` asks for (`--metrics-token-file`); nil: it answers anyone.
    package var metricsToken: String?

    package var quota: SuiteQuota {
        SuiteQuota(maxKeys: limits.maxKeysPerSuite, maxBytes: limits.maxBytesPerSuite, historyDepth: historyDepth)
    }
}

/// A PEM certificate (chain) and its PEM private key, for HTTPS.
package struct TLSFiles: Sendable, Hashable {
    package var certificatePath: String
    package var keyPath: String

    package init(certificatePath: String, keyPath: String) {
        self.certificatePath = certificatePath
        self.keyPath = keyPath
    }
}

/// What keeps slow or greedy clients from holding the server's connections and file descriptors.
/// (Open event streams and waiting long-polls are limited per token by
/// `SyncLimits.maxStreamsPerToken`.)
package struct ConnectionLimits: Sendable, Hashable {
    /// The most connections open at once on this instance; beyond it, new connections wait in the
    /// listening socket's queue until one closes. Lowered at start to what the process's open-file
    /// limit allows.
    package var maxConnections: Int
    /// How long a request's head may take to arrive in full, from the connection's opening or from
    /// the first byte of a later request on it; the connection is closed after that.
    package var requestHeadTimeout: Duration
    /// How long a kept-alive connection may stay quiet between requests before it is closed (longer
    /// than the sync client keeps its idle connections, 90 s, so that the client closes first).
    package var idleTimeout: Duration

    package init(maxConnections: Int = 10_000, requestHeadTimeout: Duration = .seconds(10), idleTimeout: Duration = .seconds(120)) {
        self.maxConnections = maxConnections
        self.requestHeadTimeout = requestHeadTimeout
        self.idleTimeout = idleTimeout
    }
}

/// The operator console at `/console`: whether it is served, and how its sign-ins behave.
package struct ConsoleConfiguration: Sendable, Hashable {
    /// Serve `/console` (its pages need an operator: `groupdefaults-server admin create`).
    package var enabled: Bool
    /// How long a sign-in lasts.
    package var sessionLifetime: Duration
    /// Failed sign-ins allowed per `signInWindow` for one operator name from one client address (three
    /// times as many from one address across names: `SignInThrottle`).
    package var signInFailures: Int
    /// The window in which `signInFailures` are counted.
    package var signInWindow: Duration

    /// The console as `serve` runs it unless told otherwise: on, 12-hour sessions, 10 failed
    /// sign-ins per 10 minutes.
    package init(
        enabled: Bool = true,
        sessionLifetime: Duration = .seconds(12 * 3600),
        signInFailures: Int = 10,
        signInWindow: Duration = .seconds(600)
    ) {
        self.enabled = enabled
        self.sessionLifetime = sessionLifetime
        self.signInFailures = signInFailures
        self.signInWindow = signInWindow
    }
}

extension ServerConfiguration: CustomStringConvertible {
    /// Where the server listens and stores, and nothing secret (the metrics token, a database
    /// password): a log line may print a configuration, as swift-service-lifecycle's debug lines
    /// print each service.
    package var description: String {
        "ServerConfiguration(\(host):\(port), storage: \(storage))"
    }
}
