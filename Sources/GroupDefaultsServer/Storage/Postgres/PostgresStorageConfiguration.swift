import Foundation
import GroupDefaultsWire
import PostgresNIO

/// Where the PostgreSQL backend connects and how long it waits before answering `unavailable`.
package struct PostgresStorageConfiguration: Sendable {
    /// One host of the database: a server that may be the primary.
    package struct Host: Sendable, Equatable, CustomStringConvertible {
        package var name: String
        package var port: Int

        package init(_ name: String, port: Int = 5432) {
            self.name = name
            self.port = port
        }

        /// `host:port` (`[::1]:5432` for an IPv6 address).
        package var description: String { name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)" }
    }

    /// The hosts, in the order they are tried: one, or a primary and its standbys (the libpq
    /// multi-host form). The server uses the one that takes writes (`PrimaryRouter`) and moves to
    /// another when a failover makes it the primary.
    package var hosts: [Host]
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
        self.init(hosts: [Host(host, port: port)], username: username, password: password, database: database)
    }

    package init(hosts: [Host], username: String, password: String? = nil, database: String) {
        precondition(!hosts.isEmpty, "a PostgreSQL configuration names at least one host")
        self.hosts = hosts
        self.username = username
        self.password = password
        self.database = database
    }

    /// The hosts as a person names them: `127.0.0.1:5432,127.0.0.1:5433`.
    package var place: String { hosts.map(\.description).joined(separator: ",") }

    /// Parses `postgres://user[:password]@host[:port][,host[:port]…]/database[?parameters]`, the
    /// libpq URL with one host or several (a primary and its standbys, as a failover manager such
    /// as pg_auto_failover prints it). Of the parameters, `target_session_attrs` may be
    /// `read-write` or `primary` (the server always connects to the host that takes writes, so
    /// they change nothing), `sslmode` may be `disable`, `allow` or `prefer` (the server connects
    /// without TLS, which these allow); the others are ignored. TLS to the database is not
    /// supported yet.
    ///
    /// - Throws: `StorageConfigurationError`, saying what is wrong with the URL.
    package init(url text: String) throws(StorageConfigurationError) {
        let shown = Self.redacted(text)
        let notOne = StorageConfigurationError("not a PostgreSQL URL (postgres://user@host:port/database): \(shown)")
        guard let scheme = text.range(of: "://"), ["postgres", "postgresql"].contains(text[..<scheme.lowerBound]) else { throw notOne }
        var rest = Substring(text[scheme.upperBound...])
        var query = ""
        if let mark = rest.firstIndex(of: "?") {
            query = String(rest[rest.index(after: mark)...])
            rest = rest[..<mark]
        }
        var path = ""
        var authority = rest
        if let slash = rest.firstIndex(of: "/") {
            path = String(rest[rest.index(after: slash)...])
            authority = rest[..<slash]
        }
        var userInfo: Substring = ""
        if let at = authority.lastIndex(of: "@") {
            userInfo = authority[..<at]
            authority = authority[authority.index(after: at)...]
        }
        let user = userInfo.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard let name = user.first.flatMap({ String($0).removingPercentEncoding }), !name.isEmpty else {
            throw StorageConfigurationError("the PostgreSQL URL names no user (postgres://user@host:port/database): \(shown)")
        }
        var password: String?
        if user.count > 1 {
            guard let decoded = String(user[1]).removingPercentEncoding else {
                throw StorageConfigurationError("the PostgreSQL URL's password is not percent-encoded as a URL's must be: \(shown)")
            }
            password = decoded
        }
        var hosts: [Host] = []
        for part in authority.split(separator: ",", omittingEmptySubsequences: false) {
            guard let host = Self.host(part) else {
                throw StorageConfigurationError(
                    "the PostgreSQL URL's host \(part.isEmpty ? "(empty)" : String(part)) is not host[:port] with a port from 1 to 65535: \(shown)"
                )
            }
            // The same host twice would answer twice that it takes writes: a split brain that is not.
            // Compared as bytes: `h` and `H` may be the same machine, but are not the same text.
            if hosts.contains(where: { Array($0.name.utf8) == Array(host.name.utf8) && $0.port == host.port }) {
                throw StorageConfigurationError("the PostgreSQL URL names the host \(host) twice: \(shown)")
            }
            hosts.append(host)
        }
        guard !hosts.isEmpty, let database = path.removingPercentEncoding else { throw notOne }
        self.init(hosts: hosts, username: name, password: password, database: database.isEmpty ? name : database)
        for parameter in query.split(separator: "&") {
            let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = String(pair[0])
            let value = pair.count > 1 ? (String(pair[1]).removingPercentEncoding ?? "") : ""
            switch key {
            case "sslmode" where !["disable", "allow", "prefer"].contains(value):
                throw StorageConfigurationError("sslmode=\(value): TLS to PostgreSQL is not supported yet (\(shown))")
            case "target_session_attrs" where !["read-write", "primary"].contains(value):
                throw StorageConfigurationError(
                    "target_session_attrs=\(value): the server writes, so it connects to the primary (read-write or primary, the default here): \(shown)"
                )
            default: continue
            }
        }
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`; nil for anything else.
    private static func host(_ text: Substring) -> Host? {
        var name = text
        var port = 5432
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            name = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":"), let number = Int(after.dropFirst()) else { return nil }
                port = number
            }
        } else if text.filter({ $0 == ":" }).count > 1 {
            return nil  // an IPv6 address without its brackets: its port cannot be told apart
        } else if let colon = text.lastIndex(of: ":") {
            guard let number = Int(text[text.index(after: colon)...]) else { return nil }
            name = text[..<colon]
            port = number
        }
        guard !name.isEmpty, (1...65535).contains(port), let decoded = String(name).removingPercentEncoding else { return nil }
        return Host(decoded, port: port)
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

    /// The pool's configuration for one of the hosts.
    func clientConfiguration(for host: Host) -> PostgresClient.Configuration {
        var configuration = PostgresClient.Configuration(
            host: host.name,
            port: host.port,
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

    /// One connection's configuration, to one of the hosts.
    func connectionConfiguration(applicationName: String, host: Host, connectTimeout: Duration? = nil) -> PostgresConnection.Configuration {
        var configuration = PostgresConnection.Configuration(
            host: host.name,
            port: host.port,
            username: username,
            password: password,
            database: database,
            tls: .disable
        )
        configuration.options.connectTimeout = .init(connectTimeout ?? self.connectTimeout)
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }
}

extension PostgresStorageConfiguration: CustomStringConvertible {
    /// The database's URL without its password: a log line may print a configuration.
    package var description: String {
        "postgres://\(username)\(password == nil ? "" : ":redacted")@\(place)/\(database)"
    }
}
