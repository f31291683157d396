internal import CLMDB
import Glibc

/// The suite's sidecar file, `<suite>.lmdb-notify`, mapped by every process that opens the suite.
///
/// It serves two purposes:
/// - Its advisory `flock` serialises opening the environment and growing the map (see `Environment`).
/// - It carries the wake-up of observers in other processes. Each process that watches the suite
///   holds a slot: its process id and a *pending* flag. After a commit a writer sets every watcher's
///   flag, and only if one of them was clear does it read the file's first byte, which raises
///   inotify's `IN_ACCESS` for all watchers. A watcher clears its flag when it wakes, before it reads
///   the log. So a burst of commits costs one signal per wake-up, a writer with no watcher (or only
///   watchers that have not yet woken) makes no system call at all, and no commit goes unseen: a
///   writer skips the signal only for watchers that have a wake-up pending, and those read the log
///   after clearing their flag, so after the commit. A watcher that died keeps its flag set, so it
///   costs writers nothing; its slot is reused by the next watcher to register.
///
/// Layout (little-endian 32-bit words): magic, version, the number of slots taken (so that a
/// writer with no watcher anywhere reads one word), then `slotCount` slots of (pid, pending) from
/// byte 64.
final class Sidecar: @unchecked Sendable {  // the mapping's words are only touched atomically
    static let magic: UInt32 = 0x4744_534E  // "GDSN"
    static let version: UInt32 = 1
    static let size = 4096
    static let slotsOffset = 64
    static let slotCount = (size - slotsOffset) / 8

    let fd: Int32
    private let base: UnsafeMutableRawPointer

    /// Opens (creating, with `mode`), sizes and maps the sidecar.
    init(path: String, mode: mode_t) throws {
        var fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        if fd >= 0 {
            fchmod(fd, mode)  // exactly the configured mode, whatever the umask
        } else if errno == EEXIST {
            fd = open(path, O_RDWR | O_CLOEXEC)
        }
        guard fd >= 0 else { throw LMDBError(errno) }
        flock(fd, LOCK_EX)
        defer { flock(fd, LOCK_UN) }
        var st = stat()
        if fstat(fd, &st) != 0 || st.st_size < Self.size {
            guard ftruncate(fd, off_t(Self.size)) == 0 else {
                let error = LMDBError(errno)
                Glibc.close(fd)
                throw error
            }
        }
        guard let map = mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            let error = LMDBError(errno)
            Glibc.close(fd)
            throw error
        }
        self.fd = fd
        self.base = map
        if gd_atomic_load(word(0)) != Self.magic {
            // A new sidecar (zeros), or one from before the slots: start with no watchers.
            for slot in 0..<Self.slotCount {
                gd_atomic_store(pidWord(slot), 0)
                gd_atomic_store(pendingWord(slot), 0)
            }
            gd_atomic_store(takenWord, 0)
            gd_atomic_store(word(4), Self.version)
            gd_atomic_store(word(0), Self.magic)
        }
    }

    func close() {
        munmap(base, Self.size)
        Glibc.close(fd)
    }

    private func word(_ offset: Int) -> UnsafeMutablePointer<UInt32> {
        (base + offset).assumingMemoryBound(to: UInt32.self)
    }
    private var takenWord: UnsafeMutablePointer<UInt32> { word(8) }
    private func pidWord(_ slot: Int) -> UnsafeMutablePointer<UInt32> { word(Self.slotsOffset + slot * 8) }
    private func pendingWord(_ slot: Int) -> UnsafeMutablePointer<UInt32> { word(Self.slotsOffset + slot * 8 + 4) }

    // MARK: Advisory lock

    func lock() { flock(fd, LOCK_EX) }
    func unlock() { flock(fd, LOCK_UN) }

    // MARK: Watchers

    /// Takes a slot for this process: a free one, or one whose process no longer exists. Returns
    /// nil when every slot is held by a live process (observers then poll). The slot receives no
    /// signal until `acknowledge`.
    func register() -> Int? {
        let me = UInt32(bitPattern: getpid())
        for pass in 0..<2 {
            for slot in 0..<Self.slotCount {
                let holder = gd_atomic_load(pidWord(slot))
                let free = holder == 0 || (pass == 1 && kill(pid_t(bitPattern: holder), 0) != 0 && errno == ESRCH)
                guard free, gd_atomic_compare_exchange(pidWord(slot), holder, me) != 0 else { continue }
                if holder == 0 { addTaken(1) }
                // Not listening yet: writers skip the slot until `acknowledge`, which the watcher
                // calls once its inotify watch exists (commits before that are in the log it reads).
                gd_atomic_store(pendingWord(slot), 1)
                return slot
            }
        }
        return nil
    }

    func unregister(_ slot: Int) {
        gd_atomic_store(pendingWord(slot), 1)
        if gd_atomic_compare_exchange(pidWord(slot), UInt32(bitPattern: getpid()), 0) != 0 { addTaken(-1) }
    }

    private func addTaken(_ delta: Int32) {
        while true {
            let taken = gd_atomic_load(takenWord)
            let new = UInt32(clamping: max(0, Int64(taken) + Int64(delta)))
            if gd_atomic_compare_exchange(takenWord, taken, new) != 0 { return }
        }
    }

    /// The watcher in `slot` woke: later commits must signal it again.
    func acknowledge(_ slot: Int) {
        gd_atomic_store(pendingWord(slot), 0)
    }

    /// After a commit: marks every watcher's wake-up pending, and raises the signal if any was not.
    func signalWatchers() {
        guard gd_atomic_load(takenWord) > 0 else { return }
        var signal = false
        for slot in 0..<Self.slotCount where gd_atomic_load(pidWord(slot)) != 0 {
            if gd_atomic_exchange(pendingWord(slot), 1) == 0 { signal = true }
        }
        if signal {
            var byte: UInt8 = 0
            _ = pread(fd, &byte, 1, 0)
        }
    }

    /// The process ids holding slots (for tests and diagnostics).
    var watcherProcesses: [Int32] {
        (0..<Self.slotCount).compactMap { slot in
            let pid = gd_atomic_load(pidWord(slot))
            return pid == 0 ? nil : Int32(bitPattern: pid)
        }
    }
}
