import ArgumentParser
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Logging

/// Which commands take a setting: `serve` and `check-config` take every setting; the commands that
/// use storage (`token`, `devices`, `admin`, `suites`) take the storage ones, so that each finds
/// the store the server uses.
enum SettingScope: Sendable {
    case serve
    case storage
}

/// Where a setting's flag is read on a parsed command line: an option of `serve`'s own, or one of
/// the storage options that every command using storage takes (`serve` too). A key path, checked
/// by the compiler: the option's property need not be named after the setting.
enum SettingFlag<Value: SettingValue>: Sendable {
    case serve(any KeyPath<ServeOptions, Value?> & Sendable)
    case storage(any KeyPath<StorageOptions, Value?> & Sendable)
}

/// One server setting, declared once: its name (the long option `--NAME`, the variable
/// `GROUPDEFAULTS_SERVER_NAME` of the environment and the settings file), its type, its default,
/// its help, its option (and so which commands take it), and what a value must be beyond its type.
struct ServerSetting<Value: SettingValue>: Sendable {
    let name: String
    /// Nil: unset unless given (the TLS files, the metrics token file, the storage choice).
    let defaultValue: Value?
    let abstract: String
    let flag: SettingFlag<Value>
    /// The name of the value in help (`--metrics-token-file <PATH>`); the option's name if nil.
    var valueName: String?
    /// What is wrong with a value of the right type, as a sentence naming the option; nil if fine.
    var problem: @Sendable (Value) -> String? = { _ in nil }

    /// The option's help: the abstract, then the default as ArgumentParser shows one.
    var help: ArgumentHelp {
        let shown = defaultValue.map { "\(abstract) (default: \($0.settingText))" } ?? abstract
        return ArgumentHelp(shown, valueName: valueName)
    }
}

/// A setting of any type, for what goes over every setting: names, checks, `check-config`'s lines.
protocol AnyServerSetting: Sendable {
    var name: String { get }
    var scope: SettingScope { get }
    /// Its flag's value as text, if given on `serve`'s command line.
    func givenText(in options: ServeOptions) -> String?
    /// Its flag's value as text, if it is a storage setting given on a storage command's line.
    func givenText(in options: StorageOptions) -> String?
    /// The default as an option takes it; nil for a setting that is unset unless given.
    var defaultText: String? { get }
    /// What is wrong with `text` as this setting's value (its type, then its range); nil if fine.
    func problem(with text: String) -> String?
    /// A valid value as an option takes it (`5` → `5.0` for a number, `true` → `on` for a switch).
    func shown(_ text: String) -> String
}

extension ServerSetting: AnyServerSetting {
    var defaultText: String? { defaultValue?.settingText }

    var scope: SettingScope {
        switch flag {
        case .serve: .serve
        case .storage: .storage
        }
    }

    func givenText(in options: ServeOptions) -> String? {
        switch flag {
        case .serve(let path): options[keyPath: path]?.settingText
        case .storage(let path): options.storage[keyPath: path]?.settingText
        }
    }

    func givenText(in options: StorageOptions) -> String? {
        guard case .storage(let path) = flag else { return nil }
        return options[keyPath: path]?.settingText
    }

    func problem(with text: String) -> String? {
        guard let value = Value(settingText: text) else {
            return Value.invalidValueProblem(text, option: "--\(name)", valueName: valueName ?? name)
        }
        return problem(value)
    }

    func shown(_ text: String) -> String {
        Value(settingText: text)?.settingText ?? text
    }
}

extension AnyServerSetting {
    /// `GROUPDEFAULTS_SERVER_MAX_WAIT` for `max-wait`.
    var variable: String { ServerSettings.prefix + name.uppercased().replacingOccurrences(of: "-", with: "_") }
}

/// Every setting of the server, in the order `check-config` shows them. The defaults are those of
/// `ServerConfiguration` (and `PostgresStorageConfiguration`), so that the server run from code
/// and from the command line start alike.
enum ServerSettings {
    static let prefix = "GROUPDEFAULTS_SERVER_"
    private static let base = ServerConfiguration(storage: .embedded(directory: ""))

    static let host = ServerSetting<String>(name: "host", defaultValue: base.host, abstract: "The address to listen on.", flag: .serve(\.host))
    static let port = ServerSetting<Int>(
        name: "port",
        defaultValue: base.port,
        abstract: "The port to listen on; 0 picks a free one.",
        flag: .serve(\.port),
        problem: { (0...65535).contains($0) ? nil : "--port must be 0 to 65535 (0 picks a free one), not \($0)" }
    )
    static let dataDir = ServerSetting<String>(
        name: "data-dir",
        defaultValue: nil,
        abstract: "The embedded store's directory (default: $XDG_DATA_HOME/groupdefaults-server or ~/.local/share/groupdefaults-server).",
        flag: .storage(\.dataDir)
    )
    static let postgresURL = ServerSetting<String>(
        name: "postgres-url",
        defaultValue: nil,
        abstract: "Keep the data in PostgreSQL instead, postgres://user[:password]@host:port/db; several servers may share it.",
        flag: .storage(\.postgresURL)  // its problems are `StorageOptions.configuration`'s: a URL that cannot work fails, not misuses
    )
    static let postgresConnectTimeout = ServerSetting<Int>(
        name: "postgres-connect-timeout",
        defaultValue: seconds(PostgresStorageConfiguration(host: "", username: "", database: "").connectTimeout),
        abstract: "Seconds PostgreSQL may take to accept a connection (at start: the server and the commands fail after that).",
        flag: .storage(\.postgresConnectTimeout),
        problem: { $0 >= 1 ? nil : "--postgres-connect-timeout must be at least 1" }
    )
    static let logLevel = ServerSetting<LogLevel>(
        name: "log-level",
        defaultValue: LogLevel(base.logLevel),
        abstract: "How much the server logs.",
        flag: .serve(\.logLevel)
    )
    static let maxWait = ServerSetting<Int>(
        name: "max-wait",
        defaultValue: seconds(base.maxWait),
        abstract: "The longest long-poll, in seconds.",
        flag: .serve(\.maxWait),
        problem: { (0...86_400).contains($0) ? nil : "--max-wait must be 0 to 86400 seconds (a day), not \($0)" }
    )
    static let tombstoneDays = ServerSetting<Int>(
        name: "tombstone-days",
        defaultValue: seconds(base.tombstoneLifetime) / 86_400,
        abstract: "How many days deletions are kept for devices to catch up; older cursors get 410.",
        flag: .serve(\.tombstoneDays),
        problem: { (1...36_500).contains($0) ? nil : "--tombstone-days must be 1 to 36500 (a hundred years), not \($0)" }
    )
    static let auditDays = ServerSetting<Int>(
        name: "audit-days",
        defaultValue: seconds(base.auditLifetime) / 86_400,
        abstract: "How many days the audit log keeps a record of each administrative act.",
        flag: .serve(\.auditDays),
        problem: { (1...36_500).contains($0) ? nil : "--audit-days must be 1 to 36500 (a hundred years), not \($0)" }
    )
    static let tlsCert = ServerSetting<String>(
        name: "tls-cert",
        defaultValue: nil,
        abstract: "Serve HTTPS with this PEM certificate (chain); needs --tls-key.",
        flag: .serve(\.tlsCert)
    )
    static let tlsKey = ServerSetting<String>(
        name: "tls-key",
        defaultValue: nil,
        abstract: "The PEM private key of --tls-cert.",
        flag: .serve(\.tlsKey)
    )
    static let rateLimit = ServerSetting<Double>(
        name: "rate-limit",
        defaultValue: base.rateLimit.requestsPerSecond,
        abstract: "Requests per second one token may make (twice that in a burst); 429 beyond.",
        flag: .serve(\.rateLimit),
        problem: {
            // A burst holds `burstSeconds` of the rate, and a request takes one: below 0.5 a token
            // never gets one.
            guard $0 > 0 && $0.isFinite else { return "--rate-limit must be a positive number" }
            let least = 1 / RateLimit.burstSeconds
            return $0 >= least ? nil : "--rate-limit must be at least \(least) (a token's burst, twice the rate, must hold one request), not \($0)"
        }
    )
    static let maxValueBytes = ServerSetting<Int>(
        name: "max-value-bytes",
        defaultValue: base.limits.maxValueBytes,
        abstract: "The largest value, in bytes of its typed JSON.",
        flag: .serve(\.maxValueBytes),
        problem: atLeastOne
    )
    static let maxKeysPerSuite = ServerSetting<Int>(
        name: "max-keys-per-suite",
        defaultValue: base.limits.maxKeysPerSuite,
        abstract: "The most keys a suite may hold.",
        flag: .serve(\.maxKeysPerSuite),
        problem: atLeastOne
    )
    static let maxBytesPerSuite = ServerSetting<Int>(
        name: "max-bytes-per-suite",
        defaultValue: base.limits.maxBytesPerSuite,
        abstract: "The most bytes (keys and values) a suite may hold.",
        flag: .serve(\.maxBytesPerSuite),
        problem: atLeastOne
    )
    static let maxOpsPerBatch = ServerSetting<Int>(
        name: "max-ops-per-batch",
        defaultValue: base.limits.maxOpsPerBatch,
        abstract: "The most ops in one push.",
        flag: .serve(\.maxOpsPerBatch),
        problem: atLeastOne
    )
    static let heartbeat = ServerSetting<Int>(
        name: "heartbeat",
        defaultValue: seconds(base.eventHeartbeat),
        abstract: "The longest an event stream stays silent, in seconds (a heartbeat comment then; 1…15).",
        flag: .serve(\.heartbeat),
        problem: { (1...15).contains($0) ? nil : "--heartbeat must be 1 to 15 seconds" }
    )
    static let history = ServerSetting<Int>(
        name: "history",
        defaultValue: base.historyDepth,
        abstract: "How many versions of each key the history keeps (GET …/keys/{key}/history); 0 keeps none.",
        flag: .serve(\.history),
        problem: { $0 >= 0 ? nil : "--history must not be negative" }
    )
    static let maxStreamsPerToken = ServerSetting<Int>(
        name: "max-streams-per-token",
        defaultValue: base.limits.maxStreamsPerToken,
        abstract: "How many event streams and waiting long-polls one token may hold open at once; 429 beyond.",
        flag: .serve(\.maxStreamsPerToken),
        problem: atLeastOneOfTheConnectionLimits
    )
    static let maxConnections = ServerSetting<Int>(
        name: "max-connections",
        defaultValue: base.connections.maxConnections,
        abstract: "The most connections open at once (lowered to what the open-file limit allows); more wait to be accepted.",
        flag: .serve(\.maxConnections),
        problem: atLeastOneOfTheConnectionLimits
    )
    static let requestHeadTimeout = ServerSetting<Int>(
        name: "request-head-timeout",
        defaultValue: seconds(base.connections.requestHeadTimeout),
        abstract:
            "Seconds a request's head may take to arrive in full, and its body that again plus a second per 32 KiB arrived (at least 32 KiB/s once the grace is spent); the connection is closed after that.",
        flag: .serve(\.requestHeadTimeout),
        problem: atLeastOneOfTheConnectionLimits
    )
    static let idleTimeout = ServerSetting<Int>(
        name: "idle-timeout",
        defaultValue: seconds(base.connections.idleTimeout),
        abstract: "Seconds a kept-alive connection may stay quiet between requests before it is closed.",
        flag: .serve(\.idleTimeout),
        problem: atLeastOneOfTheConnectionLimits
    )
    static let console = ServerSetting<Bool>(
        name: "console",
        defaultValue: base.console.enabled,
        abstract: "Serve the operator console at /console (operators: `admin create`); in a file or the environment: on or off.",
        flag: .serve(\.console)
    )
    static let consoleSessionHours = ServerSetting<Int>(
        name: "console-session-hours",
        defaultValue: seconds(base.console.sessionLifetime) / 3600,
        abstract: "How many hours a console sign-in lasts.",
        flag: .serve(\.consoleSessionHours),
        problem: { (1...720).contains($0) ? nil : "--console-session-hours must be 1 to 720" }
    )
    static let metricsTokenFile = ServerSetting<String>(
        name: "metrics-token-file",
        defaultValue: nil,
        abstract:
            "A file (mode 0600) whose first line is the bearer token GET /metrics then asks for; without it /metrics answers anyone who reaches the server.",
        flag: .serve(\.metricsTokenFile),
        valueName: "PATH"
    )

    /// Every setting, in `check-config`'s order.
    static let all: [any AnyServerSetting] = [
        host, port, dataDir, postgresURL, postgresConnectTimeout, logLevel, maxWait, tombstoneDays, auditDays, tlsCert, tlsKey, rateLimit,
        maxValueBytes, maxKeysPerSuite, maxBytesPerSuite, maxOpsPerBatch, heartbeat, history, maxStreamsPerToken, maxConnections,
        requestHeadTimeout, idleTimeout, console, consoleSessionHours, metricsTokenFile,
    ]

    /// The settings that name the store: one replaces the other (a flag for one drops the
    /// environment's and the file's other, the environment's drops the file's).
    static let storageChoice: Set = [dataDir.name, postgresURL.name]

    /// Settings given together or not at all.
    static let pairs = [(tlsCert.name, tlsKey.name)]

    /// The settings given as flags on `serve`'s command line, by name, as text: ArgumentParser has
    /// checked their types; what they come to with the environment, the file and the defaults is
    /// `SettingsSources.resolve`'s to say.
    static func given(in options: ServeOptions) -> [String: String] {
        all.reduce(into: [:]) { given, setting in given[setting.name] = setting.givenText(in: options) }
    }

    /// The storage settings given as flags on a storage command's line, by name, as text.
    static func given(in options: StorageOptions) -> [String: String] {
        all.reduce(into: [:]) { given, setting in given[setting.name] = setting.givenText(in: options) }
    }

    /// The setting of a name, if there is one.
    static func named(_ name: String) -> (any AnyServerSetting)? {
        all.first { $0.name == name }
    }

    private static func seconds(_ duration: Duration) -> Int { Int(duration.components.seconds) }

    private static let atLeastOne: @Sendable (Int) -> String? = { $0 >= 1 ? nil : "the --max-… limits must be at least 1" }
    private static let atLeastOneOfTheConnectionLimits: @Sendable (Int) -> String? = {
        $0 >= 1 ? nil : "--max-streams-per-token, --max-connections, --request-head-timeout and --idle-timeout must be at least 1"
    }
}

/// A setting's type: read from the text of a flag, a variable or a file line, and shown as an
/// option takes it.
protocol SettingValue: Sendable {
    init?(settingText: String)
    var settingText: String { get }
    /// Why `text` is not a value of this type, as ArgumentParser says it of an option.
    static func invalidValueProblem(_ text: String, option: String, valueName: String) -> String
}

extension SettingValue {
    static func invalidValueProblem(_ text: String, option: String, valueName: String) -> String {
        "The value '\(text)' is invalid for '\(option) <\(valueName)>'"
    }
}

extension String: SettingValue {
    init?(settingText: String) { self = settingText }
    var settingText: String { self }
}

extension Int: SettingValue {
    init?(settingText: String) { self.init(settingText) }
    var settingText: String { String(self) }
}

extension Double: SettingValue {
    init?(settingText: String) { self.init(settingText) }
    var settingText: String { String(self) }
}

/// A switch: `on` or `off` in a file or the environment (and `true` or `false`), `--NAME` or
/// `--no-NAME` as a flag.
extension Bool: SettingValue {
    init?(settingText: String) {
        switch settingText.lowercased() {
        case "on", "true": self = true
        case "off", "false": self = false
        default: return nil
        }
    }

    var settingText: String { self ? "on" : "off" }

    static func invalidValueProblem(_ text: String, option: String, valueName: String) -> String {
        "\(option) must be on or off (or true or false), not '\(text)'"
    }
}

/// A log level as `--log-level` takes it: trace, debug, info, notice, warning, error or critical.
struct LogLevel: ExpressibleByArgument, SettingValue {
    let level: Logger.Level

    init(_ level: Logger.Level) { self.level = level }

    init?(argument: String) {
        guard let level = Logger.Level(rawValue: argument) else { return nil }
        self.level = level
    }

    init?(settingText: String) { self.init(argument: settingText) }

    var settingText: String { level.rawValue }

    static var allValueStrings: [String] { Logger.Level.allCases.map(\.rawValue) }
}
