import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// Whether PostgreSQL can be used at all, asked once before anything else starts, and which of its
/// hosts takes writes: one connection per host, all at once, opened, asked
/// `SHOW transaction_read_only` (as libpq's `target_session_attrs=read-write` asks) and closed
/// within the configuration's connect timeout. A database that refuses the connection is known at
/// once, one that does not answer after the timeout, a standby by its answer; each is one sentence
/// (`StorageStartError`, a line per host when there are several) instead of the pool's retries and
/// their logs. `PrimaryRouter` asks the same while serving, after a failover.
package enum PostgresReachability {
    /// The index of the one host that takes writes.
    ///
    /// - Throws: `StorageStartError` saying, in words, why PostgreSQL cannot be used: for one host
    ///   `cannot reach PostgreSQL at 127.0.0.1:1: connection refused` or `PostgreSQL at
    ///   127.0.0.1:5433 is read-only: …`; for several, a line per host, in the configured order;
    ///   and when several hosts take writes (a split brain), which.
    @discardableResult
    package static func check(_ configuration: PostgresStorageConfiguration) async throws(StorageStartError) -> Int {
        let answers = await self.answers(configuration, timeout: configuration.connectTimeout)
        let writers = answers.indices.filter { answers[$0] == nil }
        if writers.count == 1 { return writers[0] }
        if writers.count > 1 {
            throw StorageStartError(
                "several hosts of PostgreSQL take writes, so none is used (two primaries: stop the one that is not, or let the failover manager demote it):",
                details: writers.map { "PostgreSQL at \(configuration.hosts[$0]) takes writes" }
            )
        }
        let reasons = answers.compactMap { $0 }
        if reasons.count == 1 { throw StorageStartError(reasons[0]) }
        throw StorageStartError("no host of PostgreSQL takes writes (a failover may be under way):", details: reasons)
    }

    /// What a look at every host found, each asked within `timeout`, all at once.
    struct Look {
        /// The indexes of the hosts that take writes.
        var writers: [Int]
        /// The indexes of the hosts that answered but would not take the connection for a reason
        /// of their own (too many connections, a sign-in refused): alive, so not known to be lost.
        var busy: [Int]
    }

    /// Asks every host at once, each within `timeout`.
    static func look(_ configuration: PostgresStorageConfiguration, timeout: Duration) async -> Look {
        var look = Look(writers: [], busy: [])
        await withTaskGroup(of: (Int, Bool, Bool).self) { group in
            for (index, host) in configuration.hosts.enumerated() {
                group.addTask {
                    do throws(HostRefusal) {
                        try await takesWrites(configuration, host: host, timeout: timeout)
                        return (index, true, false)
                    } catch {
                        return (index, false, error.hostAnswered)
                    }
                }
            }
            for await (index, writes, busy) in group {
                if writes { look.writers.append(index) } else if busy { look.busy.append(index) }
            }
        }
        look.writers.sort()
        return look
    }

    /// For each host, in the configured order: nil when it takes writes, else why not.
    private static func answers(_ configuration: PostgresStorageConfiguration, timeout: Duration) async -> [String?] {
        await withTaskGroup(of: (Int, String?).self) { group in
            for (index, host) in configuration.hosts.enumerated() {
                group.addTask {
                    do throws(HostRefusal) {
                        try await takesWrites(configuration, host: host, timeout: timeout)
                        return (index, nil)
                    } catch {
                        return (index, error.reason)
                    }
                }
            }
            var answers = [String?](repeating: nil, count: configuration.hosts.count)
            for await (index, answer) in group { answers[index] = answer }
            return answers
        }
    }

    /// Why a host does not take writes: a sentence that names it, and whether the host itself
    /// answered so (a PostgreSQL error other than its shutting down or starting up).
    struct HostRefusal: Error {
        var reason: String
        var hostAnswered = false
    }

    /// Returns when `host` takes writes; else throws why not.
    static func takesWrites(
        _ configuration: PostgresStorageConfiguration,
        host: PostgresStorageConfiguration.Host,
        timeout: Duration
    ) async throws(HostRefusal) {
        let readOnly: String
        do {
            // Not a task group: a connection to a host that stopped answering may not end at once
            // when cancelled, and the router's look must not wait for it.
            readOnly = try await firstOf({
                let connection = try await PostgresConnection.connect(
                    configuration: configuration.connectionConfiguration(applicationName: "groupdefaults-check", host: host, connectTimeout: timeout),
                    id: 0,
                    logger: silentLogger
                )
                do {
                    var value = "on"
                    let rows = try await connection.query("SHOW transaction_read_only", logger: silentLogger)
                    for try await answer in rows.decode(String.self) { value = answer }
                    try? await connection.close()
                    return value
                } catch {
                    try? await connection.close()
                    throw error
                }
            }) { () async throws -> Never in
                try await Task.sleep(for: timeout)
                throw ConnectTimeout()
            }
        } catch is ConnectTimeout {
            throw HostRefusal(reason: "cannot reach PostgreSQL at \(host): no answer within \(seconds(timeout)) (the connect timeout)")
        } catch {
            throw HostRefusal(reason: reason(for: error, configuration: configuration, host: host), hostAnswered: hostAnswered(error))
        }
        guard readOnly == "off" else {
            throw HostRefusal(
                reason: "PostgreSQL at \(host) is read-only (a standby, or a primary set to refuse writes): the server needs the primary; "
                    + "give it, or every host in the URL (postgres://user@primary:port,standby:port/database)"
            )
        }
    }

    /// Whether `error` is PostgreSQL's own answer, other than that it is shutting down, starting
    /// up or recovering (SQLSTATE class 57P: the host is going or not yet there).
    private static func hostAnswered(_ error: any Error) -> Bool {
        guard let error = error as? PSQLError, error.code == .server else { return false }
        return !(error.serverInfo?[.sqlState] ?? "").hasPrefix("57P")
    }

    /// The sentence for a failed connection.
    static func reason(for error: any Error, configuration: PostgresStorageConfiguration, host: PostgresStorageConfiguration.Host) -> String {
        let place = "\(host)"
        if let error = error as? PSQLError {
            switch error.code {
            case .server:
                let state = error.serverInfo?[.sqlState] ?? ""
                let message = error.serverInfo?[.message] ?? "it refused the connection"
                switch state {
                case "28P01", "28000":
                    return "PostgreSQL at \(place) refused user \(configuration.username): \(message)"
                case "3D000":
                    return "PostgreSQL at \(place) has no database \(configuration.database): \(message)"
                default:
                    return "PostgreSQL at \(place) refused the connection: \(message)"
                }
            case .authMechanismRequiresPassword:
                return
                    "PostgreSQL at \(place) asks user \(configuration.username) for a password: give it in the URL (postgres://user:password@host:port/db)"
            case .unsupportedAuthMechanism, .saslError:
                return "PostgreSQL at \(place) asks for a sign-in method this server does not support"
            case .serverClosedConnection, .uncleanShutdown:
                return "cannot reach PostgreSQL at \(place): the connection was closed before it was ready"
            default:
                if let underlying = error.underlying { return reason(for: underlying, configuration: configuration, host: host) }
                return "cannot reach PostgreSQL at \(place): \(error.code)"
            }
        }
        if let error = error as? NIOConnectionError {
            if error.dnsAError != nil || error.dnsAAAAError != nil, error.connectionErrors.isEmpty {
                return "cannot reach PostgreSQL at \(place): the host name \(host.name) cannot be resolved"
            }
            if let first = error.connectionErrors.first { return reason(for: first.error, configuration: configuration, host: host) }
            return "cannot reach PostgreSQL at \(place): the host name \(host.name) has no address"
        }
        if let error = error as? IOError {
            return "cannot reach PostgreSQL at \(place): \(SystemErrorText.sentence(error.errnoCode))"
        }
        if let error = error as? ChannelError, case .connectTimeout = error {
            return "cannot reach PostgreSQL at \(place): no answer within \(seconds(configuration.connectTimeout)) (the connect timeout)"
        }
        return "cannot reach PostgreSQL at \(place): the connection failed"
    }

    /// `3 seconds`.
    private static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        if attoseconds != 0 { return "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms" }
        return seconds == 1 ? "1 second" : "\(seconds) seconds"
    }

    private struct ConnectTimeout: Error {}

    /// The probe's own failures are the sentence; its logs would repeat them.
    private static let silentLogger = Logger(label: "groupdefaults-check", factory: { _ in SwiftLogNoOpLogHandler() })
}

/// What a system call's error number means, in words a person reads in one line (not `strerror`'s
/// capitalised phrases, and never a function's name).
package enum SystemErrorText {
    /// `connection refused`, `the address is already in use`, …
    package static func sentence(_ code: Int32) -> String {
        switch code {
        case ECONNREFUSED: "connection refused"
        case ETIMEDOUT: "the connection timed out"
        case EHOSTUNREACH: "the host is unreachable"
        case ENETUNREACH: "the network is unreachable"
        case ECONNRESET: "the connection was reset"
        case EADDRINUSE: "the address is already in use"
        case EADDRNOTAVAIL: "the address is not one of this machine's"
        case EACCES, EPERM: "permission denied"
        default: String(cString: strerror(code)).lowercased()
        }
    }
}
