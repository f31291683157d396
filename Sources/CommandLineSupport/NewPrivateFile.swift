package import Foundation

#if canImport(Glibc)
import Glibc
import SystemCalls
#elseif canImport(Darwin)
import Darwin
#endif

/// A file a command writes once with data only its owner may read (an account export): created
/// with mode 0600, never over an existing path, and removed again if the write fails half way.
package enum NewPrivateFile {
    /// Writes `data` to a new file at `path`; a path that exists (a file, a folder, a link) is
    /// refused, as is one that cannot be created (`CommandFailure`, one line).
    package static func create(_ data: Data, at path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            let reason = errno == EEXIST ? "it exists (give a new path)" : String(cString: strerror(errno)).lowercased()
            throw CommandFailure("cannot create \(path): \(reason)")
        }
        var failure = data.withUnsafeBytes { SystemCall.writeAll(fd, $0) }
        if failure == 0 { failure = SystemCall.flush(fd) }
        close(fd)
        if failure != 0 {
            unlink(path)
            throw CommandFailure("cannot write \(path): \(String(cString: strerror(failure)).lowercased())")
        }
    }
}
