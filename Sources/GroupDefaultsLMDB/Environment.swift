internal import CLMDB
import Glibc
package import Synchronization
import SystemCalls

/// A named database of an environment: the index of its name in `EnvironmentOptions.databases`.
package struct Database: Hashable, Sendable {
    package let index: Int
    package init(_ index: Int) { self.index = index }
}

/// How many times this process's ancestors forked since it loaded the library, counted in the child
/// of each `fork()`; environments opened before a fork refuse to be used in the child.
private enum ForkCount {
    static let value = Atomic<UInt32>(0)
    static let handlerInstalled: Bool = {
        pthread_atfork(nil, nil) { ForkCount.value.add(1, ordering: .sequentiallyConsistent) }
        return true
    }()
    static var current: UInt32 { value.load(ordering: .relaxed) }
}

/// A file's identity: its device and inode numbers.
package struct FileID: Hashable, Sendable {
    package var device: UInt64
    package var inode: UInt64

    /// 16 bytes, little-endian.
    package var bytes: [UInt8] {
        withUnsafeBytes(of: (device.littleEndian, inode.littleEndian)) { Array($0) }
    }

    /// Whether `raw` holds this identity's 16 bytes (compared without making an array).
    package func matches(_ raw: UnsafeRawBufferPointer) -> Bool {
        raw.count == 16
            && UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)) == device
            && UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) == inode
    }
}

/// What an environment is opened with.
package struct EnvironmentOptions: Sendable {
    /// The named databases, created if missing; `Database(i)` is `databases[i]`.
    package var databases: [String]
    /// The named databases a plain reader follows: their pages are checked when the file is opened
    /// (the rest when this process first writes, or through `checkTrees`).
    package var readerTrees: [String]
    /// A file beside the environment whose `flock` serialises opening and growing the map across
    /// processes (the core's sidecar file).
    package var lockFilePath: String
    package var initialMapSize: Int
    package var maximumMapSize: Int
    /// Permission bits of the files made (a `mode_t`).
    package var fileMode: UInt32
    package var maximumReaders: UInt32
    /// Opening checks every page's structure when the pages in use take at most this many bytes.
    package var structureCheckLimit: Int
    /// `MDB_WRITEMAP`: commits write into the shared map (the core: cheapest for small commits that
    /// are not flushed). Without it LMDB writes dirty pages with `pwritev`, which makes a flushed
    /// commit cheaper: flushing a writable shared map (`msync`) write-protects each dirty page
    /// again, a TLB shoot-down across every core per flush (the sync server, whose every commit is
    /// flushed, measured it at a quarter of its CPU). Every process that opens one file must agree.
    package var writesThroughMap: Bool
    /// Where in the lock file (an 8-byte-aligned offset in its first 4,096 bytes, which the
    /// environment then sizes and maps) the verified-state record may live: 48 bytes the caller
    /// leaves to this layer (see `VerifiedState`). Nil: no record, every open walks the pages.
    package var verifiedStateOffset: Int?
    /// How commits are flushed to disk; nil: LMDB's `mdb_env_sync` (see `DiskFlush`).
    package var diskFlush: (any DiskFlush)?
    /// Where in the lock file (a 4-byte-aligned offset in its first 4,096 bytes) the boot in which
    /// the file was last compared with its durable copy is recorded (see `DurableCopy`): set, the
    /// environment keeps a durable copy (`makeDurabilityPoint`, and every flushed commit) and puts
    /// it back after a reboot. Nil: no copy (a store whose every commit is flushed, as the sync
    /// server's).
    package var durableCopyRecordOffset: Int?

    package init(
        databases: [String],
        readerTrees: [String],
        lockFilePath: String,
        initialMapSize: Int,
        maximumMapSize: Int,
        fileMode: UInt32,
        maximumReaders: UInt32,
        structureCheckLimit: Int,
        writesThroughMap: Bool = true,
        verifiedStateOffset: Int? = nil,
        diskFlush: (any DiskFlush)? = nil,
        durableCopyRecordOffset: Int? = nil
    ) {
        self.writesThroughMap = writesThroughMap
        self.databases = databases
        self.readerTrees = readerTrees
        self.lockFilePath = lockFilePath
        self.initialMapSize = initialMapSize
        self.maximumMapSize = maximumMapSize
        self.fileMode = fileMode
        self.maximumReaders = maximumReaders
        self.structureCheckLimit = structureCheckLimit
        self.verifiedStateOffset = verifiedStateOffset
        self.diskFlush = diskFlush
        self.durableCopyRecordOffset = durableCopyRecordOffset
    }
}

/// A write was started inside a read of the same suite on the same thread.
package struct WriteInsideRead: Error {}

/// The file system has no room for the space the map needs; nothing was written.
package struct DiskFull: Error {
    package let path: String
    package let bytes: Int
}

/// An environment opened before `fork()` was used in the child, which LMDB forbids.
package struct UsedAfterFork: Error {}

/// The read transactions running on this thread, innermost first, in thread-local storage (a word
/// of the shim's): a linked list of scopes that live on the stack of `Environment.read`.
private enum ReadScope {
    struct Node {
        let environment: UnsafeRawPointer
        let txn: OpaquePointer
        let outer: UnsafeMutableRawPointer?
    }

    /// This thread's innermost scope (pass it to `find` and `with`: one thread-local read for both).
    static var innermost: UnsafeMutableRawPointer? { gd_read_scope_get() }

    /// The read transaction this thread runs on `environment`, if any, among the scopes from
    /// `innermost` out.
    static func find(_ environment: UnsafeRawPointer, from innermost: UnsafeMutableRawPointer? = innermost) -> OpaquePointer? {
        var scope = innermost
        while let node = scope?.assumingMemoryBound(to: Node.self).pointee {
            if node.environment == environment { return node.txn }
            scope = node.outer
        }
        return nil
    }

    /// Runs `body` in a scope of `txn` on `environment` inside `outer`, this thread's innermost scope.
    static func with<T>(
        _ environment: UnsafeRawPointer,
        _ txn: OpaquePointer,
        outer: UnsafeMutableRawPointer?,
        _ body: () throws -> T
    ) rethrows -> T {
        var node = Node(environment: environment, txn: txn, outer: outer)
        return try withUnsafeMutablePointer(to: &node) { pointer in
            gd_read_scope_set(pointer)
            defer { gd_read_scope_set(pointer.pointee.outer) }
            return try body()
        }
    }
}

/// The map is at its configured maximum and the write does not fit.
package struct MapAtMaximum: Error {
    package let mapSize: Int
}

/// One LMDB environment: one suite file, opened once per process.
///
/// Flags: `MDB_NOSUBDIR` (one file plus `-lock`), `MDB_WRITEMAP` (commits write straight into the
/// shared map: cheap, and visible to every process at once) and `MDB_NOSYNC` (no flush at commit;
/// the page cache keeps every commit through any process crash). A commit that must reach the disk
/// turns `MDB_NOSYNC` off for itself while it holds LMDB's writer lock (see `write`); with
/// `MDB_NOMETASYNC` LMDB then flushes the data pages before it writes the meta page, and this class
/// flushes the meta page itself, so that a failed final flush is told apart from a failed commit.
///
/// Map growth. `mdb_env_set_mapsize` unmaps the file, so it runs under `resizeLock` held exclusively
/// while every transaction of this process holds it shared. With `MDB_WRITEMAP` LMDB also truncates
/// the file to the map size it maps; a process that mapped less than another must never shrink the
/// file under it. So every open and every resize happens under an advisory `flock` on the lock file
/// and never asks for less than the file's current size.
///
/// Disk space. With `MDB_WRITEMAP` LMDB extends the file with `ftruncate`, leaving it sparse, and a
/// page written into space the file system cannot back kills the process with `SIGBUS`. So the map's
/// whole size (and the reader table of the `-lock` file) is reserved with `fallocate` before LMDB
/// maps it; a reservation refused for lack of space is `DiskFull`, and the map does not grow (but a
/// transaction that only removes data grows it by the room left). File systems without `fallocate`
/// are used as before.
///
/// `fork()`. An environment belongs to the process that opened it: in a child every call throws
/// `UsedAfterFork`, and `close()` leaves LMDB's state alone.
package final class Environment: @unchecked Sendable {  // LMDB's env is thread-safe; our mutable state is guarded as noted
    package static let flags = UInt32(MDB_NOSUBDIR | MDB_WRITEMAP | MDB_NOSYNC | MDB_NOMETASYNC)
    package static let noSyncFlag = UInt32(MDB_NOSYNC)
    /// The longest key this build of LMDB stores (a compile-time constant of LMDB's, 511 by default:
    /// `mdb_env_get_maxkeysize` does not read its environment), for checks made before any suite
    /// is open.
    package static let keySizeLimit = Int(mdb_env_get_maxkeysize(nil))

    package let path: String
    package let maximumMapSize: Int
    package let maximumKeySize: Int
    private let env: OpaquePointer
    /// The file whose `flock` serialises opening and resizing across processes.
    private let lockFile: Int32
    /// The lock file's descriptor, for a caller that maps the same file (the core's sidecar); it
    /// stays open until `close()`.
    package var lockFileDescriptor: Int32 { lockFile }
    /// The lock file's first `lockFileMappedSize` bytes, shared with every process, when the options
    /// name a place for the verified-state record (the caller may use the rest of those bytes, as the
    /// core's sidecar does); valid until `close()`.
    package let lockFileMapping: UnsafeMutableRawPointer?
    /// The lock file's path and LMDB's `-lock` file's, kept (see `init`).
    private let paths: (String, String)
    /// `O_NOATIME`, which Swift's Glibc module does not export (it needs _GNU_SOURCE).
    private static let noAccessTime: Int32 = 0o1000000
    /// How many bytes of the lock file `lockFileMapping` maps.
    package static let lockFileMappedSize = 4096
    /// The verified-state record, when the options give it a place.
    private let verifiedState: VerifiedState?
    /// What opening did to check the structure of the file: walked its pages, trusted the
    /// verified-state record, or neither (a new file, one over the limit).
    package let openCheck: StructureCheck.Outcome
    /// The named databases' handles, `Database(i)` at index i (a plain buffer: see `StructureCheck`'s
    /// `visited` for why no array on the path of opening).
    private let databases: UnsafeMutablePointer<MDB_dbi>
    private let resizeLock = ReadWriteLock()
    /// A read transaction reset after use, for `readTransaction` to renew (0: none). A word of its
    /// own, allocated once, swapped with C atomics.
    private let idleReader = UnsafeMutablePointer<UInt>.allocate(capacity: 1)
    /// The fork generation this process had when it opened the environment.
    private let forkGeneration: UInt32
    /// The data file's identity when it was opened.
    package let fileID: FileID

    /// The current map size, for checking the sizes LMDB hands back (a damaged node can claim any
    /// size). Written only under `resizeLock` held exclusively, read under it held shared.
    private nonisolated(unsafe) var mapSize = 0
    /// Whether the disk space of the whole map is reserved (see "Disk space"). Written under
    /// `resizeLock` held exclusively, or by the writer thread under LMDB's writer lock.
    private let spaceReserved = Atomic<Bool>(false)

    /// The thread running this process's write transaction (LMDB's writer lock makes it at most one),
    /// and whether a write in it hit `MDB_MAP_FULL`; the latter is touched only by that thread.
    private let writerThread = Atomic<UInt>(0)
    private nonisolated(unsafe) var activeWriteHitMapFull = false
    /// Whether the running write transaction changed anything (so that its commit writes a new
    /// transaction): touched only by the writer thread.
    private nonisolated(unsafe) var activeWriteChanged = false
    /// Whether the trees only writers follow have been checked (see `StructureCheck`). Touched only
    /// under LMDB's writer lock.
    private nonisolated(unsafe) var writerTreesChecked = false
    private let structureCheckLimit: Int
    private let readerTrees: [String]

    /// How many flushes to disk this environment made (`write(sync: true)`, `sync()`).
    package let flushCount = Atomic<Int>(0)
    /// How commits are flushed, when the options name a way (see `DiskFlush`).
    private let diskFlush: (any DiskFlush)?
    /// Whether the environment keeps a durable copy (see `DurableCopy`).
    private let keepsDurableCopy: Bool
    private let fileMode: mode_t
    /// What opening put back from the durable copy after a reboot, if anything.
    package let recovery: DurableCopy.Recovery?

    package init(path: String, options: EnvironmentOptions) throws {
        _ = ForkCount.handlerInstalled
        self.path = path
        self.maximumMapSize = options.maximumMapSize
        self.structureCheckLimit = options.structureCheckLimit
        self.readerTrees = options.readerTrees
        self.diskFlush = options.diskFlush
        self.keepsDurableCopy = options.durableCopyRecordOffset != nil
        self.fileMode = mode_t(options.fileMode)
        self.forkGeneration = ForkCount.current
        idleReader.initialize(to: 0)
        // Kept for the environment's life: the first release of a heap-allocated string in a process
        // instantiates type metadata (tens of microseconds), and this is on the path of opening.
        let lockPath = path + "-lock"
        let lockFile = try Self.openLockFile(options.lockFilePath, mode: mode_t(options.fileMode))
        let opened: Opened
        do {
            try SystemCall.lock(lockFile)
            defer { SystemCall.unlock(lockFile) }
            opened = try Self.openUnderLock(path: path, lockPath: lockPath, lockFile: lockFile, options: options)
        } catch {
            Glibc.close(lockFile)
            throw error
        }
        self.env = opened.env
        self.databases = opened.databases
        self.openCheck = opened.openCheck
        self.recovery = opened.recovery
        self.lockFile = lockFile
        self.lockFileMapping = opened.mapping
        self.paths = (options.lockFilePath, lockPath)
        self.verifiedState = Self.verifiedState(opened.mapping, options.verifiedStateOffset)
        self.fileID = opened.dataFile.fileID
        self.maximumKeySize = Int(mdb_env_get_maxkeysize(opened.env))
        refreshMapSize()
        // With MDB_WRITEMAP LMDB's open truncated the file to the map size: no larger than the map.
        spaceReserved.store(opened.dataFile.reserved, ordering: .relaxed)
    }

    /// What opening made under the lock file's `flock`.
    private struct Opened {
        var env: OpaquePointer
        var mapping: UnsafeMutableRawPointer?
        var databases: UnsafeMutablePointer<MDB_dbi>
        var openCheck: StructureCheck.Outcome
        var dataFile: DataFile
        var recovery: DurableCopy.Recovery?
    }

    /// The data file as opening found and prepared it, before LMDB opened it.
    private struct DataFile {
        /// Its identity.
        var fileID: FileID
        /// Its change time (`VerifiedState.changeTime`), taken before LMDB's open truncates it.
        var changeTimeBeforeOpen: UInt64
        /// Its meta pages, checked against its size (nil for an empty file).
        var metas: (FileHeader.Meta, FileHeader.Meta?)?
        /// The map size to open with: the file's size, or the configured initial size if larger.
        var initialSize: Int
        /// Whether the disk space of `initialSize` bytes is reserved.
        var reserved: Bool
    }

    /// Opens the lock file, creating it with exactly the configured `mode`, whatever the umask.
    /// Without access-time updates where the file is ours (`O_NOATIME`, else EPERM): mapping it
    /// would otherwise journal a new access time whenever it changed since the last one.
    private static func openLockFile(_ path: String, mode: mode_t) throws(LMDBError) -> Int32 {
        let created = SystemCall.retryingEINTR { open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | noAccessTime, mode) }
        if created >= 0 {
            fchmod(created, mode)
            return created
        }
        guard errno == EEXIST else { throw LMDBError(errno) }
        let existing = SystemCall.retryingEINTR { open(path, O_RDWR | O_CLOEXEC | noAccessTime) }
        if existing >= 0 { return existing }
        guard errno == EPERM else { throw LMDBError(errno) }
        return try SystemCall.checked { open(path, O_RDWR | O_CLOEXEC) }
    }

    /// Maps the lock file's verified-state record (if the options give it a place), prepares the
    /// data file, opens LMDB on it and its named databases. Called under the lock file's `flock`;
    /// on failure it leaves nothing open or mapped.
    private static func openUnderLock(path: String, lockPath: String, lockFile: Int32, options: EnvironmentOptions) throws -> Opened {
        var mapping: UnsafeMutableRawPointer?
        var env: OpaquePointer?
        do {
            if let offset = options.verifiedStateOffset {
                precondition(offset % 8 == 0 && offset + VerifiedState.size <= lockFileMappedSize)
            }
            if options.verifiedStateOffset != nil || options.durableCopyRecordOffset != nil {
                mapping = try mapLockFile(lockFile, path: options.lockFilePath)
            }
            // Before anything reads the file: after a reboot it may be the durable copy's to replace.
            var recovery: DurableCopy.Recovery?
            if let offset = options.durableCopyRecordOffset, let mapping {
                precondition(offset % 4 == 0 && offset + 4 <= lockFileMappedSize)
                recovery = try DurableCopy.recoverIfRebooted(
                    path: path,
                    lmdbLockPath: lockPath,
                    record: mapping + offset
                )
            }
            let dataFile = try prepareFiles(path: path, lockPath: lockPath, options: options)
            env = try openLMDB(path: path, mapSize: dataFile.initialSize, options: options)
            let (databases, openCheck) = try openDatabases(
                env!,
                names: options.databases,
                readerTrees: options.readerTrees,
                structureCheckLimit: options.structureCheckLimit,
                state: verifiedState(mapping, options.verifiedStateOffset),
                changeTimeBeforeOpen: dataFile.changeTimeBeforeOpen,
                metas: dataFile.metas
            )
            return Opened(env: env!, mapping: mapping, databases: databases, openCheck: openCheck, dataFile: dataFile, recovery: recovery)
        } catch {
            if let env { mdb_env_close(env) }
            if let mapping { munmap(mapping, lockFileMappedSize) }
            throw error
        }
    }

    /// Creates the data file and LMDB's `-lock` file ourselves, with their space reserved, so that
    /// LMDB's first writes into its mappings cannot fault on a full disk; checks that an existing
    /// data file is not truncated.
    private static func prepareFiles(path: String, lockPath: String, options: EnvironmentOptions) throws -> DataFile {
        let mode = mode_t(options.fileMode)
        let existed = access(path, F_OK) == 0
        // An empty `-lock` file is one whose creation failed (say for lack of space) before LMDB
        // used it: it is reserved like a new one, or LMDB would map it unbacked (SIGBUS).
        var lockStat = stat()
        let lockExisted = stat(lockPath, &lockStat) == 0 && lockStat.st_size > 0
        let data = try SystemCall.checked { open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode) }
        defer { Glibc.close(data) }  // harmless: LMDB's locks live on the `-lock` file
        if !existed { fchmod(data, mode) }  // exactly the configured mode, whatever the umask
        var st = stat()
        try SystemCall.checked { fstat(data, &st) }
        var metas: (FileHeader.Meta, FileHeader.Meta?)?
        do {
            metas = st.st_size > 0 ? try FileHeader.checkNotTruncated(fd: data, fileSize: Int(st.st_size)) : nil
        } catch let truncated as FileHeader.Truncated where truncated.neverCommitted {
            // Nothing ever committed, and LMDB's first pages did not all reach the file (a power cut
            // during its creation): started over as new, not refused as truncated.
            try SystemCall.checked { ftruncate(data, 0) }
            try SystemCall.checked { fstat(data, &st) }
        }
        let existingSize = Int(st.st_size)
        let initialSize = max(existingSize, min(options.initialMapSize, options.maximumMapSize))
        try reserveReaderTable(lockPath, existed: lockExisted, allocatedBytes: Int(lockStat.st_blocks) * 512, options: options)
        let reserved = try reserveInitialSpace(
            data,
            path: path,
            existingSize: existingSize,
            allocatedBytes: Int(st.st_blocks) * 512,
            initialSize: initialSize
        )
        return DataFile(
            fileID: FileID(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)),
            changeTimeBeforeOpen: VerifiedState.changeTime(st),  // LMDB's open truncates the file, which changes it
            metas: metas,
            initialSize: initialSize,
            reserved: reserved
        )
    }

    /// Reserves the disk space of the reader table this process may size LMDB's `-lock` file to
    /// (the first process to open a suite that nobody has open sets it up with its own
    /// `maximumReaders`), unless the file's blocks already cover it.
    private static func reserveReaderTable(_ lockPath: String, existed: Bool, allocatedBytes: Int, options: EnvironmentOptions) throws {
        // LMDB 0.9: (readers - 1) slots of 64 bytes after a 192-byte header, rounded to pages.
        let readerTable = ((max(Int(options.maximumReaders), 1) - 1) * 64 + 192 + 4095) / 4096 * 4096
        guard !existed || allocatedBytes < readerTable else { return }
        let mode = mode_t(options.fileMode)
        let lock = try SystemCall.checked { open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, mode) }
        if !existed { fchmod(lock, mode) }
        let rc = gd_reserve_space(lock, readerTable)
        Glibc.close(lock)
        if rc == ENOSPC || rc == EDQUOT { throw DiskFull(path: lockPath, bytes: readerTable) }
    }

    /// Reserves the disk space of the data file's first `initialSize` bytes; returns whether it is
    /// reserved. Only a new (empty) file without room is an error: LMDB would write its first pages
    /// through the map, unbacked. Otherwise writes try again (see `reserveSpace`).
    private static func reserveInitialSpace(
        _ data: Int32,
        path: String,
        existingSize: Int,
        allocatedBytes: Int,
        initialSize: Int
    ) throws -> Bool {
        let allocated = allocatedBytes >= initialSize && existingSize >= initialSize
        switch allocated ? 0 : gd_reserve_space(data, initialSize) {  // fallocate costs ~30 µs even when nothing is missing
        case 0: return true
        // An empty file is new too (an earlier creation failed here).
        case ENOSPC where existingSize == 0, EDQUOT where existingSize == 0:
            throw DiskFull(path: path, bytes: initialSize)
        default: return false  // no fallocate here, or no room
        }
    }

    /// Creates LMDB's environment for the file at `path` with the options' limits and opens it;
    /// clears the reader slots left by crashed processes.
    private static func openLMDB(path: String, mapSize: Int, options: EnvironmentOptions) throws(LMDBError) -> OpaquePointer {
        var created: OpaquePointer?
        try check(mdb_env_create(&created))
        let env = created!
        do throws(LMDBError) {
            try check(mdb_env_set_maxdbs(env, MDB_dbi(options.databases.count)))
            try check(mdb_env_set_maxreaders(env, options.maximumReaders))
            try check(mdb_env_set_mapsize(env, mapSize))
            try check(mdb_env_open(env, path, options.writesThroughMap ? flags : flags & ~UInt32(MDB_WRITEMAP), mode_t(options.fileMode)))
        } catch {
            mdb_env_close(env)
            throw error
        }
        var dead: Int32 = 0
        _ = mdb_reader_check(env, &dead)  // clear reader slots left by crashed processes
        return env
    }

    /// Closes the environment. Called once, when nothing of this process uses it any more (so no
    /// transaction can be running). In a child process after `fork()` it leaves LMDB's state alone.
    package func close() {
        guard !isInherited else { return }
        if let idle = takeIdleReader() { mdb_txn_abort(idle) }
        idleReader.deallocate()
        mdb_env_close(env)
        databases.deallocate()
        if let lockFileMapping { munmap(lockFileMapping, Self.lockFileMappedSize) }
        Glibc.close(lockFile)
    }

    private static func verifiedState(_ mapping: UnsafeMutableRawPointer?, _ offset: Int?) -> VerifiedState? {
        guard let mapping, let offset else { return nil }
        return VerifiedState(base: mapping + offset)
    }

    /// Sizes the lock file to at least `lockFileMappedSize` bytes backed by disk blocks (so that a
    /// full disk cannot fault a write into the mapping) and maps them. Called under its `flock`.
    private static func mapLockFile(_ fd: Int32, path: String) throws -> UnsafeMutableRawPointer {
        var st = stat()
        if SystemCall.retryingEINTR({ fstat(fd, &st) }) != 0 || st.st_size < lockFileMappedSize || st.st_blocks * 512 < lockFileMappedSize {
            let reserved = posix_fallocate(fd, 0, off_t(lockFileMappedSize))
            if reserved == ENOSPC || reserved == EDQUOT { throw DiskFull(path: path, bytes: lockFileMappedSize) }
            guard reserved == 0 || reserved == EOPNOTSUPP || reserved == EINVAL else { throw LMDBError(reserved) }
            try SystemCall.checked { ftruncate(fd, off_t(max(Int(st.st_size), lockFileMappedSize))) }
        }
        guard let map = mmap(nil, lockFileMappedSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            throw LMDBError(errno)
        }
        return map
    }

    /// Whether this process is a child forked after the environment was opened.
    package var isInherited: Bool { ForkCount.current != forkGeneration }

    @inline(__always)
    private func checkProcess() throws {
        if ForkCount.current != forkGeneration { throw UsedAfterFork() }
    }

    /// Opens the named databases, read-only if they exist (an existing suite opens without taking
    /// LMDB's writer lock), else creating them in one write transaction. The structure of an existing
    /// file is checked before LMDB follows any of its pages.
    private static func openDatabases(
        _ env: OpaquePointer,
        names: [String],
        readerTrees: [String],
        structureCheckLimit: Int,
        state: VerifiedState?,
        changeTimeBeforeOpen: UInt64,
        metas: (FileHeader.Meta, FileHeader.Meta?)?
    ) throws -> (UnsafeMutablePointer<MDB_dbi>, StructureCheck.Outcome) {
        if let opened = try openExistingDatabases(
            env,
            names: names,
            readerTrees: readerTrees,
            structureCheckLimit: structureCheckLimit,
            state: state,
            changeTimeBeforeOpen: changeTimeBeforeOpen,
            metas: metas
        ) {
            return opened
        }
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn))
        do {
            guard let handles = try openHandles(txn!, names: names, create: true) else { throw LMDBError.notFound }
            try check(mdb_txn_commit(txn))
            return (handles, .unchecked)
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
    }

    /// The named databases of an existing file, or nil for a new (empty) file or one that lacks
    /// some of them. Throws `LMDBError.invalid` for an LMDB file that holds other data.
    private static func openExistingDatabases(
        _ env: OpaquePointer,
        names: [String],
        readerTrees: [String],
        structureCheckLimit: Int,
        state: VerifiedState?,
        changeTimeBeforeOpen: UInt64,
        metas: (FileHeader.Meta, FileHeader.Meta?)?
    ) throws -> (UnsafeMutablePointer<MDB_dbi>, StructureCheck.Outcome)? {
        var attempts = 0
        while true {
            let commitsBefore = state?.commitCount ?? 0
            var txn: OpaquePointer?
            try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn))
            do {
                let outcome = try StructureCheck.verify(
                    env: env,
                    txn: txn!,
                    snapshot: UInt64(mdb_txn_id(txn)),
                    limit: structureCheckLimit,
                    scope: .trees(readerTrees),
                    state: state.map {
                        .init(
                            record: $0,
                            commitsBefore: commitsBefore,
                            changeTimeBeforeOpen: changeTimeBeforeOpen,
                            metas: attempts == 0 ? metas : nil
                        )
                    }
                )
                if let handles = try openHandles(txn!, names: names, create: false) {
                    try check(mdb_txn_commit(txn))
                    return (handles, outcome)
                }
            } catch is StructureCheck.Retry where attempts < 100 {
                mdb_txn_abort(txn)
                attempts += 1
                continue
            } catch {
                mdb_txn_abort(txn)
                throw error
            }
            var main = MDB_stat()
            let mainDatabase: MDB_dbi = 1  // MAIN_DBI
            let rc = mdb_stat(txn, mainDatabase, &main)
            var known = 0
            if rc == 0 {
                // Named databases this file already has (an older layout with fewer of them) are fine.
                for name in names {
                    var dbi: MDB_dbi = 0
                    if mdb_dbi_open(txn, name, 0, &dbi) == 0 { known += 1 }
                }
            }
            mdb_txn_abort(txn)
            try check(rc)
            if main.ms_entries > known { throw LMDBError.invalid }  // someone else's LMDB file: leave it alone
            return nil
        }
    }

    /// Opens the databases `names` in `txn`; nil if one does not exist and `create` is false.
    private static func openHandles(_ txn: OpaquePointer, names: [String], create: Bool) throws -> UnsafeMutablePointer<MDB_dbi>? {
        let handles = UnsafeMutablePointer<MDB_dbi>.allocate(capacity: names.count)
        var complete = false
        defer { if !complete { handles.deallocate() } }
        for (index, name) in names.enumerated() {
            var dbi: MDB_dbi = 0
            let rc = mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
            if rc == MDB_NOTFOUND && !create { return nil }
            try check(rc)
            (handles + index).initialize(to: dbi)
        }
        complete = true
        return handles
    }

    // MARK: Transactions

    /// Runs `body` in a read-only snapshot. A read inside a read of this environment on the same
    /// thread joins the outer one (LMDB allows one read transaction per thread and environment).
    ///
    /// Not generic, on purpose: a generic function called from another module runs unspecialised,
    /// and instantiating its type arguments' metadata (with their protocol conformances, looked up
    /// by scanning every loaded image) costs a cold-starting process tens of microseconds. Callers
    /// keep their result in a local variable (the core's generic `read` does).
    package func readTransaction(_ body: (LMDBTransaction) throws -> Void) throws {
        try checkProcess()
        let me = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        let scope = ReadScope.innermost
        if let outer = ReadScope.find(me, from: scope) { return try body(LMDBTransaction(txn: outer, environment: self)) }
        while true {
            let done = try resizeLock.withReadLock { () throws -> Bool in
                var txn = takeIdleReader()
                let rc: Int32
                if let idle = txn {
                    rc = mdb_txn_renew(idle)
                } else {
                    rc = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
                }
                if rc == MDB_MAP_RESIZED {
                    if let txn { mdb_txn_abort(txn) }
                    return false
                }
                if rc != 0 {
                    if let txn { mdb_txn_abort(txn) }
                    throw LMDBError(rc)
                }
                defer { recycle(txn!) }
                try ReadScope.with(me, txn!, outer: scope) { try body(LMDBTransaction(txn: txn!, environment: self)) }
                return true
            }
            if done { return }
            try resizeMap(grow: false)
        }
    }

    /// The kept read transaction, if there is one.
    private func takeIdleReader() -> OpaquePointer? {
        OpaquePointer(bitPattern: gd_atomic_exchange_word(idleReader, 0))
    }

    /// Ends a read transaction and keeps it for the next read (`mdb_txn_reset`, then `mdb_txn_renew`:
    /// no allocation per read). Without `MDB_NOTLS` a reset transaction owns no reader slot (each
    /// thread has its own), so any thread may renew it.
    /// One is kept (a word swapped atomically, no lock): readers on other threads at the same moment
    /// begin their own.
    private func recycle(_ txn: OpaquePointer) {
        mdb_txn_reset(txn)
        if gd_atomic_compare_exchange_word(idleReader, 0, UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(txn)))) == 0 {
            mdb_txn_abort(txn)
        }
    }

    /// Runs `body` in a write transaction and commits it; `body` runs again if the map had to grow.
    /// With `sync`, the commit is flushed to disk before this returns; if only that final flush fails,
    /// the commit stands (every process already sees it) and `flushFailed` is told why, instead of an
    /// error being thrown. When the map is at its maximum, a transaction for which `mayUseReserve()`
    /// is true (one that only removes data) may grow it by a reserve beyond, so that a full store can
    /// still be emptied. Must not be called on a thread that is already writing
    /// (`isWritingOnCurrentThread`): LMDB's writer lock is not reentrant.
    package func writeTransaction(
        sync: Bool,
        mayUseReserve: () -> Bool = { false },
        flushFailed: (LMDBError) -> Void = { _ in },
        _ body: (LMDBTransaction) throws -> Void
    ) throws {
        try checkProcess()
        precondition(!isWritingOnCurrentThread, "nested LMDB write transaction on one thread")
        // A write cannot start inside a read on this thread: it could deadlock growing the map
        // (the read holds `resizeLock`), and LMDB allows one transaction per thread.
        if ReadScope.find(UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())) != nil {
            throw WriteInsideRead()
        }
        while true {
            var mustGrow = false
            if !spaceReserved.load(ordering: .relaxed) { try resizeMap(grow: false) }
            let done = try resizeLock.withReadLock { () throws -> Bool in
                let commitsBefore = verifiedState?.commitCount ?? 0
                var txn: OpaquePointer?
                let rc = mdb_txn_begin(env, nil, 0, &txn)
                if rc == MDB_MAP_RESIZED { return false }
                try check(rc)
                if !writerTreesChecked {
                    do {
                        // Under the writer lock nothing can commit: the snapshot is the last commit.
                        try StructureCheck.verify(
                            env: env,
                            txn: txn!,
                            snapshot: UInt64(mdb_txn_id(txn)) - 1,
                            limit: structureCheckLimit,
                            scope: .everything,
                            state: verifiedState.map { .init(record: $0, commitsBefore: commitsBefore, changeTimeBeforeOpen: nil) }
                        )
                    } catch {
                        mdb_txn_abort(txn)
                        throw error
                    }
                    writerTreesChecked = true
                }
                writerThread.store(UInt(pthread_self()), ordering: .relaxed)
                activeWriteHitMapFull = false
                activeWriteChanged = false
                var finished = false
                defer {
                    if !finished {
                        mustGrow = activeWriteHitMapFull
                        endWrite()
                        mdb_txn_abort(txn)
                    }
                }
                do {
                    try body(LMDBTransaction(txn: txn!, environment: self))
                } catch  where activeWriteHitMapFull {
                    return false
                }
                if activeWriteHitMapFull { return false }  // body swallowed MDB_MAP_FULL; the txn is unusable
                finished = true
                endWrite()
                // Durability is per handle: a syncing commit turns MDB_NOSYNC off for itself, under
                // the writer lock (no other commit of this process can run meanwhile). LMDB then
                // flushes the data pages before writing the meta page; a failure there fails the commit.
                let flushesData = sync && mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 0) == 0
                let commit = mdb_txn_commit(txn)
                if flushesData { mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 1) }
                if commit == MDB_MAP_FULL {
                    mustGrow = true
                    return false
                }
                try check(commit)
                // A commit of this library from a checked state: counted, so that the next open can
                // trust the record (see `VerifiedState`). Counted only if it wrote a transaction.
                if activeWriteChanged { verifiedState?.noteCommit() }
                // Committed: every process sees it. Flushing the meta page can only fail the
                // durability the caller asked for, not the commit.
                if sync {
                    do throws(LMDBError) { try flush() } catch { flushFailed(error) }
                }
                return true
            }
            if done {
                // A flushed commit is a durability point: the copy that a reboot puts back holds it.
                if sync && keepsDurableCopy {
                    do {
                        try makeDurabilityPoint()
                    } catch {
                        flushFailed((error as? LMDBError) ?? LMDBError(EIO))
                    }
                }
                return
            }
            try resizeMap(grow: mustGrow, useReserve: mustGrow && mayUseReserve())
        }
    }

    /// Flushes every committed transaction to disk (`mdb_env_sync` with force).
    private func flush() throws(LMDBError) {
        flushCount.add(1, ordering: .relaxed)
        guard let diskFlush else { return try check(mdb_env_sync(env, 1)) }
        try diskFlush.flush { () throws(LMDBError) in try check(mdb_env_sync(env, 1)) }
    }

    /// Checks the pages of the named trees `names` (see `StructureCheck`), unless a write of this
    /// process already checked everything.
    package func checkTrees(_ names: [String]) throws {
        guard !writerTreesChecked else { return }
        try readTransaction { txn in
            try StructureCheck.verify(env: env, txn: txn.txn, snapshot: UInt64(mdb_txn_id(txn.txn)), limit: structureCheckLimit, scope: .trees(names))
        }
    }

    /// Whether this thread is inside `write`'s body.
    package var isWritingOnCurrentThread: Bool {
        writerThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    private func endWrite() {
        writerThread.store(0, ordering: .relaxed)
    }

    /// Called by `LMDBTransaction` when a write fails with `MDB_MAP_FULL`.
    func noteMapFull() { activeWriteHitMapFull = true }

    /// Called by `LMDBTransaction` when a put or delete succeeded in the running write transaction.
    func noteChange() { activeWriteChanged = true }

    /// Whether a buffer of `count` bytes can lie inside the map. (LMDB does not tell where the map
    /// starts, so only the size is checked.)
    @inline(__always)
    func fitsInMap(_ count: Int) -> Bool {
        count >= 0 && count <= mapSize
    }

    // MARK: Map size

    /// Adopts the size another process grew the file to, or (with `grow`) doubles the map up to the
    /// maximum. Never asks for less than the file's current size. The disk space of the new size is
    /// reserved first; without room the map stays as it is and `DiskFull` is thrown.
    private func resizeMap(grow: Bool, useReserve: Bool = false) throws {
        try checkProcess()
        try resizeLock.withWriteLock { () throws in
            try SystemCall.lock(lockFile)
            defer { SystemCall.unlock(lockFile) }
            var info = MDB_envinfo()
            try check(mdb_env_info(env, &info))
            let current = info.me_mapsize
            let fileSize = currentFileSize()
            var target = max(current, fileSize)
            if grow && fileSize <= current {
                var limit = maximumMapSize
                if useReserve {
                    let (sum, overflow) = maximumMapSize.addingReportingOverflow(reserve)
                    limit = overflow ? Int.max : sum
                }
                guard current < limit else { throw MapAtMaximum(mapSize: maximumMapSize) }
                let doubled = current.multipliedReportingOverflow(by: 2)
                target = min(doubled.overflow ? limit : max(doubled.partialValue, current + 1 << 20), limit)
            }
            do {
                try reserveSpace(target)
            } catch let full as DiskFull where useReserve && target > max(current, fileSize) {
                // A transaction that only removes data may go beyond the disk's room for doubling the
                // map, as it may beyond the maximum map size: it grows the map by the room left, so
                // that a suite on a full disk can still be emptied.
                let base = max(current, fileSize)
                let room = freeDiskBytes() / Int(getpagesize()) * Int(getpagesize())
                guard room > 0 else { throw full }
                target = min(target, base + room)
                try reserveSpace(target)
            }
            try check(mdb_env_set_mapsize(env, target))
            refreshMapSize()
        }
    }

    /// Reserves the disk space of the first `size` bytes of the file (see "Disk space").
    private func reserveSpace(_ size: Int) throws {
        var fd: Int32 = -1
        try check(mdb_env_get_fd(env, &fd))
        switch gd_reserve_space(fd, size) {
        case 0:
            spaceReserved.store(true, ordering: .relaxed)
        case ENOSPC, EDQUOT:
            spaceReserved.store(false, ordering: .relaxed)
            throw DiskFull(path: path, bytes: size)
        default:
            // No fallocate on this file system: nothing can be reserved, so nothing is checked.
            spaceReserved.store(true, ordering: .relaxed)
        }
    }

    /// The bytes of disk space an unprivileged writer may still take on the file's file system.
    private func freeDiskBytes() -> Int {
        var fd: Int32 = -1
        var fs = statvfs()
        guard mdb_env_get_fd(env, &fd) == 0, fstatvfs(fd, &fs) == 0 else { return 0 }
        return Int(fs.f_bavail) * Int(fs.f_frsize)
    }

    /// Room beyond the maximum for transactions that only remove data.
    private var reserve: Int { min(max(maximumMapSize / 16, 256 << 10), 16 << 20) }

    private func currentFileSize() -> Int {
        var fd: Int32 = -1
        var st = stat()
        guard mdb_env_get_fd(env, &fd) == 0, fstat(fd, &st) == 0 else { return 0 }
        return Int(st.st_size)
    }

    private func refreshMapSize() {
        var info = MDB_envinfo()
        if mdb_env_info(env, &info) == 0 { mapSize = info.me_mapsize }
    }

    // MARK: Whole environment

    /// Flushes every committed transaction to disk (`mdb_env_sync` with force).
    package func sync() throws {
        try checkProcess()
        try flush()
        if keepsDurableCopy { try makeDurabilityPoint() }
    }

    /// Removes the durable copy beside the file, if any (one left by a removed file of this name).
    package func discardDurableCopy() {
        guard keepsDurableCopy else { return }
        unlink(DurableCopy.path(of: path))
    }

    /// Makes a durability point (see `DurableCopy`): a flushed copy of the last committed snapshot
    /// that a reboot puts back, unless the copy already holds the last commit. Returns whether it
    /// made one; false too on a thread inside a write of this environment, where LMDB's copy would
    /// wait for the writer lock that thread holds (the caller makes it after the write).
    @discardableResult
    package func makeDurabilityPoint() throws -> Bool {
        guard keepsDurableCopy, !isWritingOnCurrentThread else { return false }
        try checkProcess()
        // The meta pages live in the map, which growing it (another thread's write) replaces.
        var info = MDB_envinfo()
        try resizeLock.withReadLock { () throws(LMDBError) in try check(mdb_env_info(env, &info)) }
        return try DurableCopy.make(path: path, lockFile: lockFile, lastCommit: UInt64(info.me_last_txnid), fileMode: fileMode) {
            try copySnapshot(to: $0, compacted: false)
        }
    }

    /// Writes a copy of the last committed snapshot to `fd`, an empty file open for writing, while
    /// writers in every process go on. The copy is compacted (`mdb_env_copyfd2` with `MDB_CP_COMPACT`:
    /// free pages left out, pages renumbered), which reads under its own read transaction and never
    /// takes LMDB's writer lock. LMDB refuses to compact a file that has leaked pages
    /// (`MDB_INCOMPATIBLE`); such a file gets a plain copy, which holds the writer lock for a moment
    /// to copy the meta pages.
    package func copy(to fd: Int32) throws {
        try checkProcess()
        try copySnapshot(to: fd, compacted: true)
    }

    /// `copy(to:)`, compacted or plain (same pages and transaction id).
    private func copySnapshot(to fd: Int32, compacted: Bool) throws {
        var flags = compacted ? UInt32(MDB_CP_COMPACT) : 0
        while true {
            let rc = resizeLock.withReadLock { mdb_env_copyfd2(env, fd, flags) }
            if rc == MDB_SUCCESS { return }
            guard rc == MDB_MAP_RESIZED || (rc == MDB_INCOMPATIBLE && flags != 0) else { throw LMDBError(rc) }
            // Start the file over: another process grew the map before the copy began (adopt its
            // size), or compaction gave up part way.
            try SystemCall.checked { ftruncate(fd, 0) }
            guard lseek(fd, 0, SEEK_SET) == 0 else { throw LMDBError(errno) }
            if rc == MDB_MAP_RESIZED { try resizeMap(grow: false) } else { flags = 0 }
        }
    }

    package struct Info: Sendable {
        package var mapSize: Int
        package var usedBytes: Int
        package var pageSize: Int
        package var readers: Int
        package var maximumReaders: Int
    }

    package func info() throws -> Info {
        try checkProcess()
        var info = MDB_envinfo()
        var stat = MDB_stat()
        // The meta pages live in the map, which growing it (another thread's write) replaces.
        try resizeLock.withReadLock { () throws(LMDBError) in
            try check(mdb_env_info(env, &info))
            try check(mdb_env_stat(env, &stat))
        }
        return Info(
            mapSize: info.me_mapsize,
            usedBytes: (info.me_last_pgno + 1) * Int(stat.ms_psize),
            pageSize: Int(stat.ms_psize),
            readers: Int(info.me_numreaders),
            maximumReaders: Int(info.me_maxreaders)
        )
    }

    @inline(__always)
    func handle(_ database: Database) -> MDB_dbi { databases[database.index] }
}
