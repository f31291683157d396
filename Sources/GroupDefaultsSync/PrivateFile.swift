import Foundation
import Glibc
import GroupDefaultsWire
import SystemCalls

/// A file only its owner can read (a token file, a key file): refused when its group or others can
/// read it; written atomically: a new file (mode 0600) in the same folder, flushed, then renamed
/// over the old one.
enum PrivateFile {
    /// Throws unless `path` exists and neither its group nor others can read it (the message says
    /// the `chmod` that fixes it); a missing or unreadable file is an error of kind `missing`.
    static func check(_ path: String, what: String, missing: SyncError.Kind) throws(SyncError) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw SyncError(missing, "cannot read the \(what) \(path): \(String(cString: strerror(errno)).lowercased())")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            let kind = info.st_mode & S_IFMT == S_IFDIR ? "a folder" : "not a regular file"
            throw SyncError(.local, "the \(what) \(path) is \(kind): name the file itself")
        }
        if let exposure = PrivateFileRule.exposure(of: path, mode: info.st_mode, what: "the \(what)") { throw SyncError(.local, exposure) }
    }

    static func write(_ bytes: Data, to path: String, what: String) throws(SyncError) {
        let temporary = path + ".new-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw SyncError(.local, "cannot write the \(what) \(path): \(String(cString: strerror(errno)).lowercased())")
        }
        var failure: Int32 = 0
        if fchmod(fd, 0o600) != 0 { failure = errno }
        if failure == 0 { failure = bytes.withUnsafeBytes { SystemCall.writeAll(fd, $0) } }
        if failure == 0 { failure = SystemCall.flush(fd) }
        close(fd)
        if failure == 0, rename(temporary, path) != 0 { failure = errno }
        if failure != 0 {
            unlink(temporary)
            throw SyncError(.local, "cannot write the \(what) \(path): \(String(cString: strerror(failure)).lowercased())")
        }
    }
}
