import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO

/// Whether PostgreSQL can be used at all, asked once before anything else starts: one connection,
/// opened and closed within the configuration's connect timeout. A database that refuses the
/// connection is known at once, one that does not answer after the timeout, and either is one
/// sentence (`StorageStartError`) instead of the pool's retries and their logs.
package enum PostgresReachability {
    /// Opens one connection (handshake and sign-in included) within `configuration.connectTimeout`,
    /// and closes it.
    ///
    /// - Throws: `StorageStartError` saying, in words, why PostgreSQL at the configured host and port
    ///   cannot be used: `cannot reach PostgreSQL at 127.0.0.1:1: connection refused`.
    package static func check(_ configuration: PostgresStorageConfiguration) async throws(StorageStartError) {
        let place = "\(configuration.host):\(configuration.port)"
        let timeout = configuration.connectTimeout
        do {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    let connection = try await PostgresConnection.connect(
                        configuration: configuration.connectionConfiguration(applicationName: "groupdefaults-check"),
                        id: 0,
                        logger: silentLogger
                    )
                    try? await connection.close()
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return false
                }
                defer { group.cancelAll() }
                guard try await group.next() == true else { throw ConnectTimeout() }
            }
        } catch is ConnectTimeout {
            throw StorageStartError("cannot reach PostgreSQL at \(place): no answer within \(seconds(timeout)) (the connect timeout)")
        } catch {
            throw StorageStartError(reason(for: error, configuration: configuration))
        }
    }

    /// The sentence for a failed connection.
    static func reason(for error: any Error, configuration: PostgresStorageConfiguration) -> String {
        let place = "\(configuration.host):\(configuration.port)"
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
                if let underlying = error.underlying { return reason(for: underlying, configuration: configuration) }
                return "cannot reach PostgreSQL at \(place): \(error.code)"
            }
        }
        if let error = error as? NIOConnectionError {
            if error.dnsAError != nil || error.dnsAAAAError != nil, error.connectionErrors.isEmpty {
                return "cannot reach PostgreSQL at \(place): the host name \(configuration.host) cannot be resolved"
            }
            if let first = error.connectionErrors.first { return reason(for: first.error, configuration: configuration) }
            return "cannot reach PostgreSQL at \(place): the host name \(configuration.host) has no address"
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
