import Crypto
public import Foundation
import GroupDefaultsWire

/// Where an encrypted suite's keys go when no key file is named: beside the token file, under a
/// name that holds everything that tells one copy of a suite from another. A suite name is unique
/// only within an account on a server, and the client cannot learn its account (the token carries
/// neither the account nor its id, and no endpoint names them), so the token stands for it: the
/// name holds the suite, the server's host and port, and the first 8 hex digits of the token's
/// SHA-256 (which tell tokens apart without revealing them):
/// `group.com.example.chat.sync.example.com-443.3fa2b1c0.keys`.
public enum KeyFileName {
    /// The default key file of `suite` on `server`, reached with `token` read from `tokenFile`.
    public static func defaultPath(suite: String, server: URL, token: String, beside tokenFile: String) -> String {
        URL(fileURLWithPath: tokenFile).deletingLastPathComponent().appendingPathComponent(name(suite: suite, server: server, token: token)).path
    }

    /// The file name alone: SUITE.HOST-PORT.FINGERPRINT.keys, with a host's ':' (IPv6) and '/' written as '_'.
    static func name(suite: String, server: URL, token: String) -> String {
        let scheme = server.scheme?.lowercased() ?? "https"
        let port = server.port ?? (scheme == "http" ? 80 : 443)
        let host = (server.host ?? "server").lowercased().map { $0 == ":" || $0 == "/" ? "_" : $0 }
        let fingerprint = SHA256.hash(data: Data(token.utf8)).prefix(4).map { String(format: "%02x", $0) }.joined()
        return "\(suite).\(String(host))-\(port).\(fingerprint).keys"
    }
}
