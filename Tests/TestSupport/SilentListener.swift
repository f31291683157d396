import Glibc
import Synchronization

/// A TCP socket on 127.0.0.1 that listens and never accepts: the kernel completes connections to
/// it, nobody answers them, and nobody else can listen on its port while it is open. Closed by
/// `close()` or when released.
package final class SilentListener: Sendable {
    private let descriptor: Mutex<Int32>
    /// The port it listens on.
    package let port: Int

    /// Listens on a free port of 127.0.0.1.
    package init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FixtureError("cannot make a socket") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw FixtureError("cannot listen on 127.0.0.1")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        descriptor = Mutex(fd)
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Stops listening: connections to the port are refused from now on.
    package func close() {
        descriptor.withLock { fd in
            guard fd >= 0 else { return }
            Glibc.close(fd)
            fd = -1
        }
    }

    deinit { close() }
}
