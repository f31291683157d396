import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import Logging

/// Where the server keeps its data: the embedded store's directory, or PostgreSQL. Every command
/// that uses storage takes these, and reads them from `--config` and the environment as `serve`
/// does (`SettingsSources`).
struct StorageOptions: ParsableArguments {
    static let commandLogger: Logger = {
        var logger = Logger(label: "groupdefaults-server")
        logger.logLevel = .error
        return logger
    }()

    @Option(help: ArgumentHelp("A settings file: one GROUPDEFAULTS_SERVER_NAME=value a line, as `serve --help` says.", valueName: "PATH"))
    var config: String?

    @Option(help: ServerSettings.dataDir.help) var dataDir: String?
    @Option(help: ServerSettings.postgresURL.help) var postgresURL: String?
    @Option(help: ServerSettings.postgresConnectTimeout.help) var postgresConnectTimeout: Int?

    /// The storage settings checked before the command runs (also within `serve`'s options, whose
    /// other settings `ServeOptions` checks).
    /// A bad flag is misuse; a bad value of the environment or the file a failure, said by the
    /// command when it opens the store (as `ServeOptions.validate()` leaves it to `serve`).
    func validate() throws {
        GivenLocation.record("--config", config)
        GivenLocation.record("--data-dir", dataDir)
        // A URL with a password is not repeated: the hints go to stderr, which logs may keep.
        GivenLocation.record("--postgres-url", postgresURL.flatMap { PostgresStorageConfiguration.redacted($0) == $0 ? $0 : nil })
        do { _ = try Self.configuration(try settings(scope: .storage)) } catch is CommandFailure {}
    }

    /// The settings of the flags, `--config`'s file, the environment and the defaults: a storage
    /// command checks them all, as `serve` does, and uses the storage ones.
    func settings(scope: SettingScope = .serve) throws -> ResolvedSettings {
        try SettingsSources.resolve(
            flags: ServerSettings.given(in: self),
            configPath: config,
            environment: ProcessInfo.processInfo.environment,
            scope: scope
        )
    }

    /// The storage the settings name.
    static func configuration(_ settings: ResolvedSettings) throws -> StorageConfiguration {
        guard let url = settings[ServerSettings.postgresURL] else {
            // An empty setting (`GROUPDEFAULTS_SERVER_DATA_DIR=`) names no folder: said before any
            // command, `check-config` included, tries to make one.
            if let directory = settings[ServerSettings.dataDir], directory.isEmpty {
                let source = settings.source(of: ServerSettings.dataDir.name) ?? "flag"
                let message =
                    "the data directory is empty (\(source == "flag" ? "--data-dir" : "\(source): \(ServerSettings.dataDir.variable)")): give a folder, or leave the setting out for the default"
                guard source != "flag" else { throw ValidationError(message) }
                throw CommandFailure(message)
            }
            return .embedded(directory: resolvedDataDirectory(settings))
        }
        do {
            var database = try PostgresStorageConfiguration(url: url)
            database.connectTimeout = .seconds(settings[defaulted: ServerSettings.postgresConnectTimeout])
            return .postgres(database)
        } catch {
            // A flag's is misuse; a file's or the environment's blamed on its line or variable.
            let source = settings.source(of: ServerSettings.postgresURL.name) ?? "flag"
            guard source != "flag" else { throw ValidationError("\(error)") }
            throw CommandFailure("\(source): \(ServerSettings.postgresURL.variable): \(error)")
        }
    }

    /// The embedded store's directory: the setting's, or the default under the data home.
    static func resolvedDataDirectory(_ settings: ResolvedSettings) -> String {
        if let directory = settings[ServerSettings.dataDir] { return directory }
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
        let settings = try self.settings()
        switch try Self.configuration(settings) {
        case .embedded(let directory):
            guard creating || LMDBSyncStorage.storeExists(in: directory) else {
                // Named as the person gave it: a flag, a setting (file or environment), or nothing.
                let which =
                    switch settings.source(of: ServerSettings.dataDir.name) {
                    case nil: "the default; is --data-dir missing?"
                    case "flag": "is --data-dir right?"
                    default: "is \(ServerSettings.dataDir.variable) right?"
                    }
                throw CommandFailure(
                    "no server store in \(directory) (\(which)): `groupdefaults-server serve` "
                        + "creates one there, as --create does on token create and admin create"
                )
            }
            return try LMDBSyncStorage(directory: directory)
        case .postgres(let database):
            do {
                return try await PostgresSyncStorage.start(database, logger: logger)
            } catch let error as SyncStorageError {
                throw CommandFailure("cannot use PostgreSQL at \(database.place): \(error.detail)")
            }
        }
    }

    /// Whether `openStorage(creating: true)` would make a new embedded store (there is none yet).
    func wouldCreateStore() throws -> Bool {
        guard case .embedded(let directory) = try Self.configuration(try settings()) else { return false }
        return !LMDBSyncStorage.storeExists(in: directory)
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
