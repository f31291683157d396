import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import Logging

/// Where the server keeps its data: the embedded store's directory, or PostgreSQL. Every command
/// that uses storage takes these, and reads them from `--config` and the environment as `serve`
/// does (`SettingsSources` puts the file's and the environment's before the command line's own).
struct StorageOptions: ParsableArguments {
    static let commandLogger: Logger = {
        var logger = Logger(label: "groupdefaults-server")
        logger.logLevel = .error
        return logger
    }()

    @Option(help: ArgumentHelp("A settings file: one GROUPDEFAULTS_SERVER_NAME=value a line, as `serve --help` says.", valueName: "PATH"))
    var config: String?

    @Option(
        name: .customLong("data-dir"),
        help: "The embedded store's directory (default: $XDG_DATA_HOME/groupdefaults-server or ~/.local/share/groupdefaults-server)."
    )
    var dataDirectory: String?

    @Option(
        name: .customLong("postgres-url"),
        help: "Keep the data in PostgreSQL instead, postgres://user[:password]@host:port/db; several servers may share it."
    )
    var postgresURL: String?

    // For tests that tell a refused connection (at once) from one that waits for the connect
    // timeout: the timeout in seconds (10 unless given).
    @Option(name: .customLong("postgres-connect-timeout"), help: .hidden) var postgresConnectTimeout: Int?

    func validate() throws {
        if postgresURL != nil && dataDirectory != nil { throw ValidationError("--data-dir and --postgres-url exclude each other") }
        _ = try configuration
    }

    /// The storage the options name.
    var configuration: StorageConfiguration {
        get throws {
            guard let postgresURL else { return .embedded(directory: resolvedDataDirectory) }
            do {
                var database = try PostgresStorageConfiguration(url: postgresURL)
                if let postgresConnectTimeout { database.connectTimeout = .seconds(max(1, postgresConnectTimeout)) }
                return .postgres(database)
            } catch {
                throw CommandFailure(error.description)  // a setting that cannot work: status 1, not a usage error
            }
        }
    }

    var resolvedDataDirectory: String {
        if let dataDirectory { return dataDirectory }
        let environment = ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty { return xdg + "/groupdefaults-server" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/share/groupdefaults-server"
    }

    /// The store, opened for a token, devices, admin or suites command: PostgreSQL (its schema
    /// created or migrated), or the embedded store, which must exist unless `creating` (a mistyped
    /// `--data-dir` would otherwise make a new, empty store). Failures are one line (`CommandFailure`,
    /// `StorageStartError`). PostgresNIO logs errors only: its warning that a query waits for the
    /// pool to start (the commands query at once) is no news to a person, whose answer is the
    /// command's one line.
    func openStorage(creating: Bool = false, logger: Logger = Self.commandLogger) async throws -> any ServerStorage {
        switch try configuration {
        case .embedded(let directory):
            guard creating || LMDBSyncStorage.storeExists(in: directory) else {
                // Named as the person gave it: a flag, a setting (file or environment), or nothing.
                let typed = CommandLine.arguments.contains { $0 == "--data-dir" || $0.hasPrefix("--data-dir=") }
                let which =
                    dataDirectory == nil
                    ? "the default; is --data-dir missing?"
                    : typed ? "is --data-dir right?" : "is \(SettingsSources.prefix)DATA_DIR right?"
                throw CommandFailure(
                    "no server store in \(directory) (\(which)): `groupdefaults-server serve` "
                        + "creates one there, as --create does on `token create` and `admin create`"
                )
            }
            return try LMDBSyncStorage(directory: directory)
        case .postgres(let database):
            do {
                return try await PostgresSyncStorage.start(database, logger: logger)
            } catch let error as SyncStorageError {
                throw CommandFailure("cannot use PostgreSQL at \(database.host):\(database.port): \(error.detail)")
            }
        }
    }

    /// Runs `body` on the store the options name, and closes it afterwards, whatever happens.
    func withStorage<T>(creating: Bool = false, _ body: (any ServerStorage) async throws -> T) async throws -> T {
        let store = try await openStorage(creating: creating)
        do {
            let result = try await body(store)
            try await store.shutdown()
            return result
        } catch {
            try? await store.shutdown()
            throw error
        }
    }
}
