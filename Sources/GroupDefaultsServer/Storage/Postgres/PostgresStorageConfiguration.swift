import Foundation
import GroupDefaultsWire
import PostgresNIO

/// Where the PostgreSQL backend connects and how long it waits before answering `unavailable`.
package struct PostgresStorageConfiguration: Sendable {
    package var host: String
    package var port: Int
    package var username: String
    package var password: String?
    package var database: String
    /// The longest a connection attempt may take (PostgresNIO's own default: 3 s was once too
    /// little for a live database while every test ran at once on two cores).
    package var connectTimeout: Duration = .seconds(10)
    /// The longest one storage call may take before it fails with `unavailable` (the database is
    /// unreachable or overloaded): the HTTP layer answers 503 instead of hanging.
    package var operationTimeout: Duration = .seconds(10)
    /// The longest the schema's migrations may take at start, once the database answered within
    /// `operationTimeout`: a migration may rewrite a large table, and many instances (or every test
    /// at once) may migrate together.
    package var migrationTimeout: Duration = .seconds(300)
    /// Connections in the pool (the listening connection comes on top).
    package var maximumConnections: Int = 20

    package init(host: String, port: Int = 5432, username: String, password: String? = nil, database: String) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
    }

    /// Parses `postgres://user[:password]@host[:port]/database`. TLS to the database is not
    /// supported yet: `?sslmode=` other than `disable` is refused.
    ///
    /// - Throws: `StorageConfigurationError`, saying what is wrong with the URL.
    package init(url text: String) throws(StorageConfigurationError) {
        guard let components = URLComponents(string: text),
            components.scheme == "postgres" || components.scheme == "postgresql",
            let host = components.host, !host.isEmpty,
            let user = components.user, !user.isEmpty
        else {
            throw StorageConfigurationError("not a PostgreSQL URL (postgres://user@host:port/database): \(Self.redacted(text))")
        }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        self.init(
            host: host,
            port: components.port ?? 5432,
            username: user,
            password: components.password,
            database: path.isEmpty ? user : path
        )
        if let mode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value, mode != "disable" {
            throw StorageConfigurationError("sslmode=\(mode): TLS to PostgreSQL is not supported yet (\(Self.redacted(text)))")
        }
    }

    /// A database URL as it may be shown: its password, if any, replaced by `redacted`, also in
    /// text that does not parse as a URL (everything between the user's `:` and the last `@`).
    package static func redacted(_ url: String) -> String {
        if var components = URLComponents(string: url), components.password != nil {
            components.password = "redacted"
            if let text = components.string { return text }
        }
        guard let scheme = url.range(of: "://"), let at = url.range(of: "@", options: .backwards), scheme.upperBound < at.lowerBound,
            let colon = url[scheme.upperBound..<at.lowerBound].firstIndex(of: ":")
        else { return url }
        return String(url[..<url.index(after: colon)]) + "redacted" + String(url[at.lowerBound...])
    }

    var clientConfiguration: PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host,
            port: port,
            username: username,
            password: password,
            database: database,
            tls: .disable
        )
        configuration.options.connectTimeout = connectTimeout
        configuration.options.maximumConnections = maximumConnections
        // Prepared statements take PostgreSQL's default plan caching; large push groups are planned
        // at each run (`PlannedStatement`).
        return configuration
    }

    func connectionConfiguration(applicationName: String) -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: host,
            port: port,
            username: username,
            password: password,
            database: database,
            tls: .disable
        )
        configuration.options.connectTimeout = .init(connectTimeout)
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }
}

extension PostgresStorageConfiguration: CustomStringConvertible {
    /// The database's URL without its password: a log line may print a configuration.
    package var description: String {
        "postgres://\(username)\(password == nil ? "" : ":redacted")@\(host):\(port)/\(database)"
    }
}
