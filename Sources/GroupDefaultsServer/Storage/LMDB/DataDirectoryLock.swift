import Foundation
import Glibc
import GroupDefaultsWire
import Synchronization
import SystemCalls

/// Who may use a data directory's store: every process that opens it (a server, a token or suites
/// command, `backup`) holds `sync.lmdb-in-use` locked shared for as long as it has the store open,
/// and `restore` holds it exclusively while it puts a backup in place, as an erase does while it
/// rebuilds the store (`LMDBErase`). So a restore is refused and an erase left pending while
/// anything uses the store, and a server cannot start in the middle of either. (`flock`:
/// released by the kernel when the process ends, however it ends; LMDB's own locks are `fcntl`
/// locks on another file, which this does not touch.)
package final class DataDirectoryLock: Sendable {
    private let descriptor: Mutex<Int32?>

    /// The lock file of `directory`.
    static func path(in directory: String) -> String { directory + "/sync.lmdb-in-use" }

    /// Takes the lock, shared or exclusive, without waiting (unless `waiting`); nil when another
    /// process holds it in the other way (or exclusively).
    static func take(in directory: String, exclusive: Bool, waiting: Bool = false) throws -> DataDirectoryLock? {
        let path = path(in: directory)
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw SyncStorageError(.unavailable, "cannot open \(path): \(String(cString: strerror(errno)).lowercased())")
        }
        giveToOwner(of: directory, descriptor)
        let result = SystemCall.retryingEINTR { flock(descriptor, (exclusive ? LOCK_EX : LOCK_SH) | (waiting ? 0 : LOCK_NB)) }
        guard result == 0 else {
            let code = errno
            close(descriptor)
            if code == EWOULDBLOCK { return nil }
            throw SyncStorageError(.unavailable, "cannot lock \(path): \(String(cString: strerror(code)).lowercased())")
        }
        return DataDirectoryLock(descriptor: descriptor)
    }

    /// Gives a file made in `directory` by root (an operator's `sudo groupdefaults-server …`) to
    /// the directory's owner, the service's user, which could not open it otherwise.
    static func giveToOwner(of directory: String, _ descriptor: Int32) {
        guard geteuid() == 0, let attributes = try? FileManager.default.attributesOfItem(atPath: directory),
            let user = attributes[.ownerAccountID] as? NSNumber, let group = attributes[.groupOwnerAccountID] as? NSNumber
        else { return }
        _ = fchown(descriptor, user.uint32Value, group.uint32Value)
    }

    /// `giveToOwner(of:_:)` for a file or folder named by its path.
    static func giveToOwner(of directory: String, path: String) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        giveToOwner(of: directory, descriptor)
    }

    private init(descriptor: Int32) { self.descriptor = Mutex(descriptor) }

    /// Releases the lock (closing the descriptor does); also when the lock goes.
    func release() {
        descriptor.withLock { held in
            if let fd = held { close(fd) }
            held = nil
        }
    }

    deinit { release() }
}
