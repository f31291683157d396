import AsyncHTTPClient
import Foundation
import GroupDefaultsWire
import NIOCore
import NIOPosix
import NIOSSL

/// Why a request got no answer, in words a person can act on: the one place that reads the
/// errors of AsyncHTTPClient, NIO and NIOSSL. What it says never contains a type's name, a
/// path of the build or unbalanced brackets: those errors' own descriptions are read to classify
/// them, never shown.
struct NetworkFailure {
    /// How long a connection may take to open (`SyncClient.makeHTTPClient(caFile:connectTimeout:)`).
    var connectTimeout: Duration
    /// How long an answer's head may take once the request is sent.
    var answerTimeout: Duration

    /// Why a request got no answer.
    struct Cause {
        /// What happened: "connection refused", "unknown host sync.example", "the server does not
        /// speak TLS…", "it accepted the connection but did not answer within 30 seconds".
        var words: String
        /// Whether the server was never reached at all (or answered nothing in time), which a
        /// one-shot step reports at once.
        var unreached: Bool
        /// Whether waiting will not help: the host name is unknown, or TLS cannot work with this URL
        /// (a plain server, a certificate that does not verify or is not made out for the host). The
        /// message then says to check the URL rather than to try again later.
        var lasting = false
    }

    /// Why `error` left a request without an answer.
    func cause(of error: any Error) -> Cause {
        switch error {
        case let error as HTTPClientError:
            return cause(of: error)
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return cause(of: first.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil {
                return Cause(words: "unknown host \(error.host)", unreached: true, lasting: true)
            }
            return Cause(words: "no address found for \(error.host)", unreached: true, lasting: true)
        case let error as SocketAddressError.UnknownHost:
            return Cause(words: "unknown host \(error.host)", unreached: true, lasting: true)
        case ChannelError.connectTimeout:
            return Cause(words: noConnection, unreached: true)
        case let error as IOError:
            return Cause(words: Self.words(errno: error.errnoCode), unreached: true)
        case let error as NIOSSLError:
            return Self.cause(tls: error)
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return Cause(words: "its TLS certificate is not made out for this host name", unreached: true, lasting: true)
        case is CancellationError:
            return Cause(words: "cancelled", unreached: false)
        default:
            return Cause(words: "the connection failed", unreached: false)
        }
    }

    private var noConnection: String { "no connection within \(Self.seconds(connectTimeout))" }

    private func cause(of error: HTTPClientError) -> Cause {
        switch error {
        case .connectTimeout, .getConnectionFromPoolTimeout: Cause(words: noConnection, unreached: true)
        case .tlsHandshakeTimeout:
            Cause(words: "the TLS handshake did not finish within \(Self.seconds(connectTimeout))", unreached: true)
        case .deadlineExceeded, .readTimeout:
            Cause(words: "it accepted the connection but did not answer within \(Self.seconds(answerTimeout))", unreached: true)
        case .remoteConnectionClosed: Cause(words: "the server closed the connection before it answered", unreached: false)
        case .cancelled: Cause(words: "cancelled", unreached: false)
        default: Cause(words: "the request failed", unreached: false)
        }
    }

    /// "5 seconds", "1 second", "0.5 seconds".
    static func seconds(_ duration: Duration) -> String {
        let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        let text = value == value.rounded() ? String(Int(value)) : String(value)
        return "\(text) second\(value == 1 ? "" : "s")"
    }

    private static func words(errno code: CInt) -> String {
        switch code {
        case ECONNREFUSED: "connection refused"
        case ECONNRESET: "the connection was reset"
        case ENETUNREACH: "the network is unreachable"
        case EHOSTUNREACH: "no route to the host"
        case ETIMEDOUT: "the connection timed out"
        default: String(cString: strerror(code)).lowercased()
        }
    }

    private static func cause(tls error: NIOSSLError) -> Cause {
        guard case .handshakeFailed(let inner) = error else { return Cause(words: "the TLS connection failed", unreached: true) }
        let text = "\(inner)"
        if text.contains("WRONG_VERSION_NUMBER") || text.contains("HTTP_REQUEST") || text.contains("PACKET_LENGTH") {
            return Cause(words: "the server does not speak TLS (its URL may be http://, not https://)", unreached: true, lasting: true)
        }
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return Cause(
                words: "its TLS certificate does not verify: it is not signed by an authority this device trusts",
                unreached: true,
                lasting: true
            )
        }
        return Cause(words: "the TLS handshake failed", unreached: true)
    }
}
