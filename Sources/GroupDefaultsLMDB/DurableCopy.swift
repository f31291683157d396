internal import CLMDB
import Glibc
import SystemCalls

/// The file as it was at its last durability point: `<file>-safe`, a whole copy that a power
/// cut cannot damage, put back over the file after an operating-system crash or power loss.
///
/// Why. Commits that are not flushed (`MDB_WRITEMAP | MDB_NOSYNC`, the core's default) leave their
/// pages in the page cache, which the kernel writes back in any order: after a power cut the disk
/// can hold a meta page that names pages which never reached it, and the whole file is damaged, not
/// only its last commits (measured with `Tools/powercut-sim`: most cuts under four writing
/// processes). LMDB's own remedy, a flush of the data pages and then of the meta page at every
/// commit, costs two flushes per write.
///
/// A durability point (`make`) copies the last committed snapshot with `mdb_env_copyfd2` (a plain
/// copy: the same pages, page numbers and transaction id, taken under a read transaction while
/// writers go on) to `-safe~`, flushes it, renames it over `-safe` and flushes the
/// folder: at every moment one whole copy is on the disk, the last one or the one before it.
/// Points are made one at a time across processes (an open-file-description lock on a byte of the
/// lock file) and never replace a copy with an older snapshot.
///
/// After a reboot, the first process to open the file (no other process holds LMDB's lock file)
/// puts the copy back over the file, in place (the file keeps its inode, and so its identity), when
/// the two differ, before LMDB maps it (`recoverIfRebooted`). A reboot is told by the kernel's boot
/// id: the lock file keeps a 32-bit hash of the boot in which the file was last compared with its
/// copy. That record needs no flush (any reboot changes the id), and a process that crashed in
/// this boot never makes the next one put the copy back: what it committed is in the page cache,
/// whole.
package enum DurableCopy {
    /// The suite was put back to its last durability point when it was opened.
    package struct Recovery: Sendable, Equatable {
        /// When the point was made (its copy's modification time), in nanoseconds since 1970.
        package let pointTime: UInt64
        /// The transaction id the file was put back to.
        package let transactionID: UInt64
    }

    /// The copy's path for the file at `path`.
    package static func path(of path: String) -> String { path + "-safe" }
    static func newPath(of path: String) -> String { path + "-safe~" }

    /// `F_OFD_SETLKW`, which Swift's Glibc module does not export (it needs _GNU_SOURCE).
    private static let waitForOFDLock: Int32 = 38
    private static let setOFDLock: Int32 = 37
    /// The lock file's byte (far past its end, as the core's sidecar slots are) whose lock makes
    /// durability points one at a time.
    private static let pointLockOffset: off_t = 1 << 20

    // MARK: Boot

    /// A 32-bit hash of this boot's id (never 0, the value of a new record), or nil where the kernel
    /// has none (then nothing is put back: a reboot cannot be told from a process crash).
    /// This boot's hash, read once per process (it cannot change while the process runs).
    static let currentBootHash: UInt32? = bootHash()

    static func bootHash() -> UInt32? {
        let fd = SystemCall.retryingEINTR { open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = bytes.withUnsafeMutableBytes { buffer in SystemCall.retryingEINTR { read(fd, buffer.baseAddress, 64) } }
        guard count > 0 else { return nil }
        var hash: UInt32 = 2_166_136_261  // FNV-1a
        for byte in bytes[..<count] {
            hash = (hash ^ UInt32(byte)) &* 16_777_619
        }
        return hash == 0 ? 1 : hash
    }

    // MARK: Recovery

    /// Puts the copy back over the file at `path` if this is the first open since a reboot (the
    /// 4-byte `record` in the lock file's mapping names another boot), no other process has the
    /// file open, a copy exists and the file differs from it. Called under the lock file's `flock`,
    /// before LMDB opens the file. Returns what was put back, if anything.
    static func recoverIfRebooted(path: String, lmdbLockPath: String, record: UnsafeMutableRawPointer) throws -> Recovery? {
        guard let boot = currentBootHash else { return nil }
        let word = record.assumingMemoryBound(to: UInt32.self)
        guard gd_atomic_load_u32(word) != boot else { return nil }
        let recovery = try isOpenElsewhere(lmdbLockPath) ? nil : putBack(path: path)
        word.pointee = boot  // under the flock, which every reader of the record holds
        return recovery
    }

    /// Whether another process has the file open: LMDB keeps a shared `fcntl` lock on the first byte
    /// of its lock file while an environment is open.
    private static func isOpenElsewhere(_ lmdbLockPath: String) -> Bool {
        let fd = SystemCall.retryingEINTR { open(lmdbLockPath, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = 0
        lock.l_len = 1
        guard fcntl(fd, F_GETLK, &lock) == 0 else { return true }  // cannot tell: leave the file be
        return lock.l_type != Int16(F_UNLCK)
    }

    private static func putBack(path: String) throws -> Recovery? {
        let copy = SystemCall.retryingEINTR { open(DurableCopy.path(of: path), O_RDONLY | O_CLOEXEC) }
        guard copy >= 0 else {
            if errno == ENOENT { return nil }
            throw LMDBError(errno)
        }
        defer { Glibc.close(copy) }
        var st = stat()
        try SystemCall.checked { fstat(copy, &st) }
        // A copy that does not hold a whole snapshot (it cannot be one: it is renamed into place
        // only once flushed) is left alone, and so is the file.
        guard let copyMeta = newestMeta(copy), let used = copyMeta.usedSize, used <= Int(st.st_size) else { return nil }
        // No file, or an empty one, beside a copy: the suite was removed (a power cut does not lose
        // a file whose creation a journal committed before the copy's). The copy is a removed
        // suite's, never to be put back over a new one.
        let file = SystemCall.retryingEINTR { open(path, O_RDWR | O_CLOEXEC) }
        var fileStat = stat()
        guard file >= 0, fstat(file, &fileStat) == 0, fileStat.st_size > 0 else {
            if file >= 0 { Glibc.close(file) }
            unlink(DurableCopy.path(of: path))
            return nil
        }
        defer { Glibc.close(file) }
        if newestMeta(file)?.txnID == copyMeta.txnID, try sameBytes(file, copy, from: 2 * copyMeta.pageSize, to: used) {
            return nil
        }
        try copyBytes(from: copy, to: file, count: used)
        try SystemCall.checked { fdatasync(file) }
        let time = UInt64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ UInt64(st.st_mtim.tv_nsec)
        return Recovery(pointTime: time, transactionID: copyMeta.txnID)
    }

    /// The meta page with the larger transaction id, if the file has one LMDB would recognise.
    static func newestMeta(_ fd: Int32) -> FileHeader.Meta? {
        guard let first = FileHeader.readMeta(fd: fd, offset: 0) else { return nil }
        guard let second = FileHeader.readMeta(fd: fd, offset: first.pageSize), second.txnID > first.txnID else { return first }
        return second
    }

    private static let chunk = 1 << 20

    private static func sameBytes(_ a: Int32, _ b: Int32, from start: Int, to end: Int) throws -> Bool {
        let left = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 4096)
        let right = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 4096)
        defer {
            left.deallocate()
            right.deallocate()
        }
        var offset = start
        while offset < end {
            let count = min(chunk, end - offset)
            let readLeft = SystemCall.retryingEINTR { pread(a, left.baseAddress, count, off_t(offset)) }
            let readRight = SystemCall.retryingEINTR { pread(b, right.baseAddress, count, off_t(offset)) }
            guard readLeft == count, readRight == count, memcmp(left.baseAddress!, right.baseAddress!, count) == 0 else { return false }
            offset += count
        }
        return true
    }

    private static func copyBytes(from source: Int32, to destination: Int32, count total: Int) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 4096)
        defer { buffer.deallocate() }
        var offset = 0
        while offset < total {
            let count = min(chunk, total - offset)
            let got = SystemCall.retryingEINTR { pread(source, buffer.baseAddress, count, off_t(offset)) }
            if got < 0 { throw LMDBError(errno) }
            if got == 0 { throw LMDBError(EIO) }  // the copy shrank under us
            var written = 0
            while written < got {
                let put = SystemCall.retryingEINTR { pwrite(destination, buffer.baseAddress! + written, got - written, off_t(offset + written)) }
                if put < 0 { throw LMDBError(errno) }
                written += put
            }
            offset += got
        }
    }

    // MARK: Points

    /// Makes a durability point of the environment `env` (open on `path`) unless the copy already
    /// holds its last commit; returns whether it made one. `copySnapshot` writes the last committed
    /// snapshot to a descriptor (`Environment`'s plain copy). Waits for a point another process is
    /// making.
    static func make(path: String, lockFile: Int32, lastCommit: UInt64, fileMode: mode_t, copySnapshot: (Int32) throws -> Void) throws -> Bool {
        try lockPoints(lockFile, Int32(F_WRLCK))
        defer { try? lockPoints(lockFile, Int32(F_UNLCK)) }
        let durablePath = DurableCopy.path(of: path)
        let existing = SystemCall.retryingEINTR { open(durablePath, O_RDONLY | O_CLOEXEC) }
        if existing >= 0 {
            let held = newestMeta(existing)?.txnID ?? 0
            Glibc.close(existing)
            if held >= lastCommit { return false }
        }
        let newPath = newPath(of: path)
        let fd = SystemCall.retryingEINTR { open(newPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, fileMode) }
        guard fd >= 0 else {
            if isGone(path) { return false }
            throw LMDBError(errno)
        }
        do {
            fchmod(fd, fileMode)  // exactly the suite's mode, whatever the umask
            try copySnapshot(fd)
            try SystemCall.checked { fdatasync(fd) }
        } catch {
            Glibc.close(fd)
            unlink(newPath)
            throw error
        }
        Glibc.close(fd)
        do {
            try SystemCall.checked { rename(newPath, durablePath) }
            try flushFolder(of: path)
        } catch {
            if isGone(path) { return false }
            throw error
        }
        return true
    }

    /// Whether the suite's file is gone (removed while open, with its folder, as a test's
    /// temporary folder is): then a failed point has nothing to make durable, and is no error.
    private static func isGone(_ path: String) -> Bool {
        access(path, F_OK) != 0
    }

    private static func lockPoints(_ fd: Int32, _ type: Int32) throws(LMDBError) {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = pointLockOffset
        lock.l_len = 1
        try SystemCall.checked { fcntl(fd, type == Int32(F_UNLCK) ? setOFDLock : waitForOFDLock, &lock) }
    }

    /// Flushes the folder holding `path`, so that a rename in it survives a power cut.
    private static func flushFolder(of path: String) throws(LMDBError) {
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let fd = try SystemCall.checked { open(folder.isEmpty ? "/" : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        defer { Glibc.close(fd) }
        try SystemCall.checked { fsync(fd) }
    }
}
