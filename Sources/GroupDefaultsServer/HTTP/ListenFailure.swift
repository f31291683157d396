import Foundation
import NIOCore
import NIOPosix

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

    /// Whether `serve` could listen on `host`:`port` now: binds a socket there as the server does
    /// (address reuse on) and closes it at once. Nil when it could, else the sentence `serve` would
    /// end with (`check-config` says it before anyone starts the server). The probe also sets
    /// SO_REUSEPORT, which the server does not: two probes at once (two `check-config`s) do not
    /// refuse each other, while a listening server still refuses the probe.
    package static func probe(host: String, port: Int) async -> String? {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(ChannelOptions.socket(SocketOptionLevel(SOL_SOCKET), SocketOptionName(SO_REUSEPORT)), value: 1)
        do {
            let channel = try await bootstrap.bind(host: host, port: port).get()
            try? await channel.close()
            return nil
        } catch {
            return sentence(for: error, host: host, port: port) ?? "cannot listen on \(host):\(port): \(error)"
        }
    }
}
