import ArgumentParser
import Foundation
import GroupDefaultsServer

/// Where the server keeps its data: the embedded store's directory (or, later, PostgreSQL).
struct StorageOptions: ParsableArguments {
    @Option(name: .customLong("data-dir"), help: "The embedded store's directory (default: $XDG_DATA_HOME/groupdefaults-server or ~/.local/share/groupdefaults-server).")
    var dataDirectory: String?

    @Option(name: .customLong("postgres-url"), help: "A PostgreSQL URL, postgres://user@host:port/db (not built in this version).")
    var postgresURL: String?

    var resolvedDataDirectory: String {
        if let dataDirectory { return dataDirectory }
        let environment = ProcessInfo.processInfo.environment
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty { return xdg + "/groupdefaults-server" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/share/groupdefaults-server"
    }

    /// The store, or a one-line error when PostgreSQL is asked for.
    func openStorage() throws -> LMDBSyncStorage {
        try refusePostgres()
        return try LMDBSyncStorage(directory: resolvedDataDirectory)
    }

    func refusePostgres() throws {
        if postgresURL != nil { throw CommandFailure("PostgreSQL storage is not built in this version") }
    }
}

/// A failure the command reports as one line on stderr, exit status 1.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
