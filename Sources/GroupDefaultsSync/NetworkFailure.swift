import AsyncHTTPClient
import Foundation
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

    /// What happened: "connection refused", "unknown host sync.example", "the server does not
    /// speak TLS…", "it accepted the connection but did not answer within 30 seconds"; and whether the server was never
    /// reached at all (or answered nothing in time), which a one-shot step reports at once.
    func cause(of error: any Error) -> (words: String, unreached: Bool) {
        let (words, unreached, _) = described(error)
        return (words, unreached)
    }

    /// Whether waiting will not help: the host name is unknown, or TLS cannot work with this URL
    /// (a plain server, a certificate that does not verify or is not made out for the host). The
    /// message then says to check the URL rather than to try again later.
    func isLasting(_ error: any Error) -> Bool { described(error).lasting }

    private func described(_ error: any Error) -> (words: String, unreached: Bool, lasting: Bool) {
        let (words, unreached) = classified(error)
        let lasting =
            words.hasPrefix("unknown host") || words.hasPrefix("no address found") || words.hasPrefix("the server does not speak TLS")
            || words.hasPrefix("its TLS certificate")
        return (words, unreached, lasting)
    }

    private func classified(_ error: any Error) -> (words: String, unreached: Bool) {
        switch error {
        case let error as HTTPClientError:
            return classified(error)
        case let error as NIOConnectionError:
            if let first = error.connectionErrors.first { return classified(first.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return ("unknown host \(error.host)", true) }
            return ("no address found for \(error.host)", true)
        case let error as SocketAddressError.UnknownHost:
            return ("unknown host \(error.host)", true)
        case ChannelError.connectTimeout:
            return (noConnection, true)
        case let error as IOError:
            return (Self.words(errno: error.errnoCode), true)
        case let error as NIOSSLError:
            return (Self.words(tls: error), true)
        case let error as NIOSSLExtraError where error == .failedToValidateHostname:
            return ("its TLS certificate is not made out for this host name", true)
        case is CancellationError:
            return ("cancelled", false)
        default:
            return ("the connection failed", false)
        }
    }

    private var noConnection: String { "no connection within \(Self.seconds(connectTimeout))" }

    private func classified(_ error: HTTPClientError) -> (words: String, unreached: Bool) {
        switch error {
        case .connectTimeout, .getConnectionFromPoolTimeout: (noConnection, true)
        case .tlsHandshakeTimeout: ("the TLS handshake did not finish within \(Self.seconds(connectTimeout))", true)
        case .deadlineExceeded, .readTimeout:
            ("it accepted the connection but did not answer within \(Self.seconds(answerTimeout))", true)
        case .remoteConnectionClosed: ("the server closed the connection before it answered", false)
        case .cancelled: ("cancelled", false)
        default: ("the request failed", false)
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

    private static func words(tls error: NIOSSLError) -> String {
        guard case .handshakeFailed(let inner) = error else { return "the TLS connection failed" }
        let text = "\(inner)"
        if text.contains("WRONG_VERSION_NUMBER") || text.contains("HTTP_REQUEST") || text.contains("PACKET_LENGTH") {
            return "the server does not speak TLS (its URL may be http://, not https://)"
        }
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "its TLS certificate does not verify: it is not signed by an authority this device trusts"
        }
        return "the TLS handshake failed"
    }
}
