import Glibc

/// The group of client addresses that the server treats as one client where addresses are cheap:
/// an IPv4 address alone, but every IPv6 address of one /64 network together (a home or a host is
/// given a whole /64, so its addresses cost nothing to change). An IPv4 address written as IPv6
/// (`::ffff:192.0.2.1`) is that IPv4 address. Anything that is not an address (`unknown`) is a
/// group of its own, as written.
///
/// The sign-in limits and their queue (`SignInThrottle`) count per group, and a token's repeated
/// acts in the audit log are alike only from one group (`AuditRepeats`).
package struct AddressGroup: Hashable, Sendable, CustomStringConvertible {
    /// The group's name: the IPv4 address, or the IPv6 network as `2001:db8:0:1::/64`.
    package let description: String

    /// The group of `address` (as `ServerRequestContext.clientAddress` gives it).
    package init(_ address: String) {
        var ipv6 = in6_addr()
        guard address.contains(":"), inet_pton(AF_INET6, address, &ipv6) == 1 else {
            description = address
            return
        }
        let bytes = withUnsafeBytes(of: ipv6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
            description = bytes[12...].map(String.init).joined(separator: ".")
            return
        }
        var network = in6_addr()
        withUnsafeMutableBytes(of: &network) { raw in
            for index in 0..<8 { raw[index] = bytes[index] }
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &network, &text, socklen_t(text.count)) != nil else {
            description = address
            return
        }
        description = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/64"
    }
}
