import Foundation
import NIOCore

/// The server could not listen where it was told (the port is taken, a privileged port, an address
/// that is not this machine's, a host name that does not resolve): one sentence instead of NIO's
/// `bind(descriptor:ptr:bytes:)` error or its type's name.
package enum ListenFailure {
    /// `cannot listen on 127.0.0.1:8080: the address is already in use`, if `error` is the listening
    /// socket's (its address did not resolve, or its bind or listen call failed); nil for any other
    /// error.
    package static func sentence(for error: any Error, host: String, port: Int) -> String? {
        let address = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        if error is SocketAddressError.UnknownHost {
            return "cannot listen on \(address): the host name \(host) cannot be resolved"
        }
        guard let error = error as? IOError else { return nil }
        let call = "\(error)"
        guard call.contains("bind(") || call.contains("listen(") else { return nil }
        var reason = SystemErrorText.sentence(error.errnoCode)
        if error.errnoCode == EACCES, port < 1024 { reason += " (ports below 1024 need privileges)" }
        return "cannot listen on \(address): \(reason)"
    }
}
