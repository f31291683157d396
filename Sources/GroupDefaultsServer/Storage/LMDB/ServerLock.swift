import Foundation
import Glibc
import GroupDefaultsWire
import Synchronization
import SystemCalls

/// One server per data directory: a server holds `server.lock` in its data directory locked
/// exclusively for as long as it runs, with its process id written in it, so that a second server
/// started on the same directory is refused at once, naming the first one's process. (Two servers
/// on one store would each wake only their own waiters: a push to one would leave the other's
/// long-polls and event streams waiting.) The server's commands (`token`, `suites`, `backup`...)
/// do not take it: they use the store beside a running server, under `DataDirectoryLock`'s shared
/// lock. (`flock`: released by the kernel when the process ends, however it ends; a lock file
/// left by a server that was killed holds a stale id, which the next server overwrites.)
package final class ServerLock: Sendable {
    private let descriptor: Mutex<Int32?>

    /// The lock file of `directory`.
    static func path(in directory: String) -> String { directory + "/server.lock" }

    /// Takes the lock for this process, and writes its id in the file.
    ///
    /// - Throws: `SyncStorageError` (`unavailable`) naming the other server's process when another
    ///   server holds it, or saying why the file cannot be opened or locked.
    package static func take(in directory: String) throws -> ServerLock {
        let path = path(in: directory)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw SyncStorageError(.unavailable, "cannot open \(path): \(String(cString: strerror(errno)).lowercased())")
        }
        DataDirectoryLock.giveToOwner(of: directory, descriptor)
        let result = SystemCall.retryingEINTR { flock(descriptor, LOCK_EX | LOCK_NB) }
        guard result == 0 else {
            let code = errno
            defer { close(descriptor) }
            guard code == EWOULDBLOCK else {
                throw SyncStorageError(.unavailable, "cannot lock \(path): \(String(cString: strerror(code)).lowercased())")
            }
            let holder = otherProcess(descriptor)
            throw SyncStorageError(
                .unavailable,
                "another server (\(holder.map { "process \($0)" } ?? "a process that is starting")) is serving the data directory \(directory): "
                    + "stop it, or give this one another --data-dir"
            )
        }
        let id = Array("\(getpid())\n".utf8)
        guard ftruncate(descriptor, 0) == 0, pwrite(descriptor, id, id.count, 0) == id.count else {
            let reason = String(cString: strerror(errno)).lowercased()
            close(descriptor)
            throw SyncStorageError(.unavailable, "cannot write \(path): \(reason)")
        }
        return ServerLock(descriptor: descriptor)
    }

    /// The process id the holder wrote, if it wrote one yet.
    private static func otherProcess(_ descriptor: Int32) -> Int32? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = pread(descriptor, &bytes, bytes.count, 0)
        guard count > 0 else { return nil }
        return Int32(String(decoding: bytes[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    private init(descriptor: Int32) { self.descriptor = Mutex(descriptor) }

    /// Releases the lock (closing the descriptor does); also when the lock goes.
    package func release() {
        descriptor.withLock { held in
            if let fd = held { close(fd) }
            held = nil
        }
    }

    deinit { release() }
}
