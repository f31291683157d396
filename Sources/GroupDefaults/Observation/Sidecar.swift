import Atomics
import Glibc
internal import GroupDefaultsLMDB
import SystemCalls

/// The suite's sidecar file, `<suite>.lmdb-notify`, mapped by every process that opens the suite.
///
/// It serves two purposes:
/// - Its advisory `flock` serialises opening the environment and growing the map (the LMDB layer's
///   `Environment` takes it on a descriptor of its own).
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
/// A slot's holder is alive while it holds an open-file-description lock (`F_OFD_SETLK`) on the
/// slot's byte past the end of the file: the kernel drops it when the holder's process dies,
/// whatever PID namespace it ran in. (Probing process ids with `kill(pid, 0)` is wrong across PID
/// namespaces, where a live watcher's id means nothing or another process.) The pid word is kept
/// for diagnostics and, being non-zero, marks the slot taken for writers.
///
/// Layout (little-endian 32-bit words): magic, version, the number of slots taken (so that a
/// writer with no watcher anywhere reads one word), then `slotCount` slots of (pid, pending) from
/// byte 64. Bytes 12..<64 belong to the LMDB layer: the boot in which the suite was last compared
/// with its durable copy (`DurableCopy`), and its verified-state record (`VerifiedState`), which
/// lets an open skip the walk of every page for a file state already checked. A new or reset
/// sidecar holds no valid record there, so the next open walks the file.
final class Sidecar: @unchecked Sendable {  // the mapping's words are only touched atomically
    static let magic: UInt32 = 0x4744_534E  // "GDSN"
    static let version: UInt32 = 2  // 2: liveness by OFD locks
    static let size = 4096
    static let slotsOffset = 64
    static let slotCount = (size - slotsOffset) / 8

    /// Where in the file the LMDB layer keeps its verified-state record (48 bytes).
    static let verifiedStateOffset = 16
    /// Where in the file the LMDB layer records the boot in which the suite was last compared with
    /// its durable copy (4 bytes; see `DurableCopy`).
    static let bootRecordOffset = 12

    let fd: Int32
    private let base: UnsafeMutableRawPointer
    /// Whether `base` is the environment's mapping (which the environment unmaps), not this one's.
    private let borrowsMapping: Bool

    /// Opens (creating, with `mode`), sizes and maps the sidecar: an open file description of its own.
    convenience init(path: String, mode: mode_t) throws {
        var fd = SystemCall.retryingEINTR { open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        if fd >= 0 {
            fchmod(fd, mode)  // exactly the configured mode, whatever the umask
        } else if errno == EEXIST {
            fd = SystemCall.retryingEINTR { open(path, O_RDWR | O_CLOEXEC) }
        }
        guard fd >= 0 else { throw LMDBError(errno) }
        try self.init(owning: fd)
    }

    /// Sizes and maps the sidecar through a duplicate of `descriptor`, the one the environment keeps
    /// open on the same file for its lock (no second open on the way to a suite's first read).
    convenience init(duplicating descriptor: Int32) throws {
        let fd = fcntl(descriptor, F_DUPFD_CLOEXEC, 0)
        guard fd >= 0 else { throw LMDBError(errno) }
        try self.init(owning: fd)
    }

    /// The sidecar through the environment's own descriptor and mapping of the file's first `size`
    /// bytes (already sized), both of which outlive it: no system call when the header is set up.
    init(borrowing descriptor: Int32, mapping: UnsafeMutableRawPointer) throws {
        self.fd = descriptor
        self.base = mapping
        self.borrowsMapping = true
        if !hasCurrentHeader {
            try SystemCall.lock(descriptor)
            initializeHeader()
            SystemCall.unlock(descriptor)
        }
    }

    /// Takes `fd` over (closing it on failure).
    private init(owning fd: Int32) throws {
        let map: UnsafeMutableRawPointer
        do {
            try SystemCall.lock(fd)
            map = try Self.sizeAndMap(fd)
        } catch {
            Glibc.close(fd)  // which releases the lock
            throw error
        }
        self.fd = fd
        self.base = map
        self.borrowsMapping = false
        initializeHeader()
        SystemCall.unlock(fd)
    }

    /// Sizes the sidecar to `size` bytes backed by disk blocks, so that a full disk cannot fault a
    /// write into the mapping, and maps them. Called under the file's `flock`.
    private static func sizeAndMap(_ fd: Int32) throws -> UnsafeMutableRawPointer {
        var st = stat()
        if SystemCall.retryingEINTR({ fstat(fd, &st) }) != 0 || st.st_size < size || st.st_blocks * 512 < size {
            let reserved = posix_fallocate(fd, 0, off_t(size))
            guard reserved == 0 || reserved == EOPNOTSUPP || reserved == EINVAL else { throw LMDBError(reserved) }
            try SystemCall.checked { ftruncate(fd, off_t(max(Int(st.st_size), size))) }
        }
        guard let map = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            throw LMDBError(errno)
        }
        return map
    }

    /// Starts the header of a new sidecar (zeros) or of one from an older version: no watchers.
    /// Called under the file's `flock`.
    private func initializeHeader() {
        if !hasCurrentHeader {
            // A new sidecar (zeros), or one from an older version: start with no watchers.
            for slot in 0..<Self.slotCount {
                pidWord(slot).store(0, ordering: .sequentiallyConsistent)
                pendingWord(slot).store(0, ordering: .sequentiallyConsistent)
            }
            takenWord.store(0, ordering: .sequentiallyConsistent)
            word(4).store(Self.version, ordering: .sequentiallyConsistent)
            word(0).store(Self.magic, ordering: .sequentiallyConsistent)
        }
    }

    /// Whether the header carries this version's magic and version.
    private var hasCurrentHeader: Bool {
        word(0).load(ordering: .sequentiallyConsistent) == Self.magic && word(4).load(ordering: .sequentiallyConsistent) == Self.version
    }

    func close() {
        if borrowsMapping { return }  // the environment's descriptor and mapping
        munmap(base, Self.size)
        Glibc.close(fd)
    }

    /// The 32-bit word at `offset` of the mapping, shared with other processes (swift-atomics'
    /// `UnsafeAtomic`: the standard library's `Atomic` cannot be placed at an address).
    private func word(_ offset: Int) -> UnsafeAtomic<UInt32> {
        UnsafeAtomic(at: (base + offset).assumingMemoryBound(to: UInt32.AtomicRepresentation.self))
    }
    private var takenWord: UnsafeAtomic<UInt32> { word(8) }
    private func pidWord(_ slot: Int) -> UnsafeAtomic<UInt32> { word(Self.slotsOffset + slot * 8) }
    private func pendingWord(_ slot: Int) -> UnsafeAtomic<UInt32> { word(Self.slotsOffset + slot * 8 + 4) }

    // MARK: Slot liveness

    /// `F_OFD_SETLK`, which Swift's Glibc module does not export (it needs _GNU_SOURCE).
    private static let setOFDLock: Int32 = 37

    /// Locks (or unlocks) the byte of `slot`, past the end of the file, for this open file description.
    private func lockSlot(_ slot: Int, _ type: Int32) -> Bool {
        var lock = flock()
        lock.l_type = Int16(type)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(Self.size + slot)
        lock.l_len = 1
        return fcntl(fd, Self.setOFDLock, &lock) == 0
    }

    // MARK: Watchers

    /// Takes a slot for this sidecar: a free one, or one whose holder is gone (its lock with it).
    /// Returns nil when every slot is held by a live watcher (observers then poll). The slot
    /// receives no signal until `acknowledge`.
    func register() -> Int? {
        let me = UInt32(bitPattern: getpid())
        for slot in 0..<Self.slotCount where lockSlot(slot, Int32(F_WRLCK)) {
            // Not listening yet: writers skip the slot until `acknowledge`, which the watcher calls
            // once its inotify watch exists (commits before that are in the log it reads).
            pendingWord(slot).store(1, ordering: .sequentiallyConsistent)
            let holder = pidWord(slot).exchange(me == 0 ? 1 : me, ordering: .sequentiallyConsistent)
            if holder == 0 { addTaken(1) }  // else a dead watcher's slot, already counted
            return slot
        }
        return nil
    }

    func unregister(_ slot: Int) {
        pendingWord(slot).store(1, ordering: .sequentiallyConsistent)
        if pidWord(slot).exchange(0, ordering: .sequentiallyConsistent) != 0 { addTaken(-1) }
        _ = lockSlot(slot, Int32(F_UNLCK))
    }

    private func addTaken(_ delta: Int32) {
        while true {
            let taken = takenWord.load(ordering: .sequentiallyConsistent)
            let new = UInt32(clamping: max(0, Int64(taken) + Int64(delta)))
            if takenWord.compareExchange(expected: taken, desired: new, ordering: .sequentiallyConsistent).exchanged { return }
        }
    }

    /// The watcher in `slot` woke: later commits must signal it again.
    func acknowledge(_ slot: Int) {
        pendingWord(slot).store(0, ordering: .sequentiallyConsistent)
    }

    /// After a commit: marks every watcher's wake-up pending, and raises the signal if any was not.
    func signalWatchers() {
        guard takenWord.load(ordering: .sequentiallyConsistent) > 0 else { return }
        var signal = false
        for slot in 0..<Self.slotCount where pidWord(slot).load(ordering: .sequentiallyConsistent) != 0 {
            if pendingWord(slot).exchange(1, ordering: .sequentiallyConsistent) == 0 { signal = true }
        }
        if signal {
            var byte: UInt8 = 0
            _ = SystemCall.retryingEINTR { pread(fd, &byte, 1, 0) }
        }
    }

    /// The process ids holding slots (for tests and diagnostics).
    var watcherProcesses: [Int32] {
        (0..<Self.slotCount).compactMap { slot in
            let pid = pidWord(slot).load(ordering: .sequentiallyConsistent)
            return pid == 0 ? nil : Int32(bitPattern: pid)
        }
    }
}
