internal import CLMDB
import Glibc
import Synchronization

/// The named databases inside a suite's environment (see DESIGN.md, "Storage").
enum NamedDatabase: Int {
    case values, tombstones, log, meta

    static let count = 4

    var name: String {
        switch self {
        case .values: "values"
        case .tombstones: "tombstones"
        case .log: "log"
        case .meta: "meta"
        }
    }
}

/// What an environment is opened with; derived from `SharedDefaults.Configuration`.
struct EnvironmentOptions: Sendable {
    var initialMapSize: Int
    var maximumMapSize: Int
    var fileMode: mode_t
    var maximumReaders: UInt32
    /// Opening checks every page's structure when the pages in use take at most this many bytes.
    var structureCheckLimit: Int
}

/// A write was started inside a read of the same suite on the same thread.
struct WriteInsideRead: Error {}

/// The read transactions running on this thread, innermost first, in thread-local storage: a
/// linked list of scopes that live on the stack of `Environment.read`.
private enum ReadScope {
    struct Node {
        let environment: UnsafeRawPointer
        let txn: OpaquePointer
        let outer: UnsafeMutableRawPointer?
    }

    static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The read transaction this thread runs on `environment`, if any.
    static func find(_ environment: UnsafeRawPointer) -> OpaquePointer? {
        var scope = pthread_getspecific(key)
        while let node = scope?.assumingMemoryBound(to: Node.self).pointee {
            if node.environment == environment { return node.txn }
            scope = node.outer
        }
        return nil
    }

    static func with<T>(_ environment: UnsafeRawPointer, _ txn: OpaquePointer, _ body: () throws -> T) rethrows -> T {
        var node = Node(environment: environment, txn: txn, outer: pthread_getspecific(key))
        return try withUnsafeMutablePointer(to: &node) { pointer in
            pthread_setspecific(key, pointer)
            defer { pthread_setspecific(key, pointer.pointee.outer) }
            return try body()
        }
    }
}

/// The map is at its configured maximum and the write does not fit.
struct MapAtMaximum: Error {
    let mapSize: Int
}

/// One LMDB environment: one suite file, opened once per process.
///
/// Flags: `MDB_NOSUBDIR` (one file plus `-lock`), `MDB_WRITEMAP` (commits write straight into the
/// shared map: cheap, and visible to every process at once) and `MDB_NOSYNC` (no flush at commit;
/// the page cache keeps every commit through any process crash). A commit that must reach the disk
/// turns `MDB_NOSYNC` off for itself while it holds LMDB's writer lock (see `write(sync:_:)`).
///
/// Map growth. `mdb_env_set_mapsize` unmaps the file, so it runs under `resizeLock` held exclusively
/// while every transaction of this process holds it shared. With `MDB_WRITEMAP` LMDB also truncates
/// the file to the map size it maps; a process that mapped less than another must never shrink the
/// file under it. So every open and every resize happens under an advisory `flock` on the sidecar
/// file and never asks for less than the file's current size.
final class Environment: @unchecked Sendable {  // LMDB's env is thread-safe; our mutable state is guarded as noted
    static let flags = UInt32(MDB_NOSUBDIR | MDB_WRITEMAP | MDB_NOSYNC)
    static let noSyncFlag = UInt32(MDB_NOSYNC)

    let path: String
    let maximumMapSize: Int
    let maximumKeySize: Int
    private let env: OpaquePointer
    /// The suite's sidecar file: the lock for opening and resizing, and observers' wake-ups.
    let sidecar: Sidecar
    private let databases: DatabaseHandles
    private let resizeLock = ReadWriteLock()

    /// The current map size, for checking the sizes LMDB hands back (a damaged node can claim any
    /// size). Written only under `resizeLock` held exclusively, read under it held shared.
    private nonisolated(unsafe) var mapSize = 0

    /// The thread running this process's write transaction (LMDB's writer lock makes it at most one),
    /// and whether a write in it hit `MDB_MAP_FULL`; the latter is touched only by that thread.
    private let writerThread = Atomic<UInt>(0)
    private nonisolated(unsafe) var activeWriteHitMapFull = false
    /// Whether the trees only writers follow have been checked (see `StructureCheck`). Touched only
    /// under LMDB's writer lock.
    private nonisolated(unsafe) var writerTreesChecked = false
    private let structureCheckLimit: Int

    init(path: String, sidecarPath: String, options: EnvironmentOptions) throws {
        self.path = path
        self.maximumMapSize = options.maximumMapSize
        self.structureCheckLimit = options.structureCheckLimit

        let sidecar = try Sidecar(path: sidecarPath, mode: options.fileMode)
        sidecar.lock()

        var env: OpaquePointer?
        do {
            var existingSize = 0
            let existing = Glibc.open(path, O_RDONLY | O_CLOEXEC)
            if existing >= 0 {
                // Closing this descriptor is harmless: LMDB's locks live on the `-lock` file.
                defer { Glibc.close(existing) }
                var st = stat()
                if fstat(existing, &st) == 0 { existingSize = Int(st.st_size) }
                if existingSize > 0 { try FileHeader.checkNotTruncated(fd: existing, fileSize: existingSize) }
            }
            try check(mdb_env_create(&env))
            try check(mdb_env_set_maxdbs(env, MDB_dbi(NamedDatabase.count)))
            try check(mdb_env_set_maxreaders(env, options.maximumReaders))
            try check(mdb_env_set_mapsize(env, max(existingSize, min(options.initialMapSize, options.maximumMapSize))))
            let lockPath = path + "-lock"
            let lockExisted = access(lockPath, F_OK) == 0
            try check(mdb_env_open(env, path, Self.flags, options.fileMode))
            // Files this open created get exactly the configured mode, whatever the umask.
            if existing < 0 { chmod(path, options.fileMode) }
            if !lockExisted { chmod(lockPath, options.fileMode) }
            var dead: Int32 = 0
            _ = mdb_reader_check(env, &dead)  // clear reader slots left by crashed processes
            self.databases = try Self.openDatabases(env!, structureCheckLimit: options.structureCheckLimit)
        } catch {
            if let env { mdb_env_close(env) }
            sidecar.unlock()
            sidecar.close()
            throw error
        }
        sidecar.unlock()
        self.env = env!
        self.sidecar = sidecar
        self.maximumKeySize = Int(mdb_env_get_maxkeysize(env))
        refreshMapSize()
    }

    /// Closes the environment. Called once, by the registry, when no handle of this process uses
    /// the suite any more (so no transaction can be running).
    func close() {
        mdb_env_close(env)
        sidecar.close()
    }

    /// Opens the named databases, read-only if they exist (an existing suite opens without taking
    /// LMDB's writer lock), else creating them in one write transaction. The structure of an existing
    /// file is checked before LMDB follows any of its pages.
    private static func openDatabases(_ env: OpaquePointer, structureCheckLimit: Int) throws -> DatabaseHandles {
        if let handles = try openExistingDatabases(env, structureCheckLimit: structureCheckLimit) {
            return handles
        }
        var txn: OpaquePointer?
        try check(mdb_txn_begin(env, nil, 0, &txn))
        do {
            guard let handles = try DatabaseHandles(txn!, create: true) else { throw LMDBError.notFound }
            try check(mdb_txn_commit(txn))
            return handles
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
    }

    /// The named databases of an existing suite, or nil for a new (empty) file. Throws
    /// `LMDBError.invalid` for an LMDB file that holds other data.
    private static func openExistingDatabases(_ env: OpaquePointer, structureCheckLimit: Int) throws -> DatabaseHandles? {
        var attempts = 0
        while true {
            var txn: OpaquePointer?
            try check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn))
            do {
                try StructureCheck.verify(env: env, snapshot: UInt64(mdb_txn_id(txn)), limit: structureCheckLimit, scope: .readerTrees)
                if let handles = try DatabaseHandles(txn!, create: false) {
                    try check(mdb_txn_commit(txn))
                    return handles
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
            let rc = mdb_stat(txn, 1 /* MAIN_DBI */, &main)
            mdb_txn_abort(txn)
            try check(rc)
            if main.ms_entries > 0 { throw LMDBError.invalid }  // someone else's LMDB file: leave it alone
            return nil
        }
    }

    // MARK: Transactions

    /// Runs `body` in a read-only snapshot. A read inside a read of this environment on the same
    /// thread joins the outer one (LMDB allows one read transaction per thread and environment).
    func read<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        let me = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        if let outer = ReadScope.find(me) { return try body(LMDBTransaction(txn: outer, environment: self)) }
        while true {
            let result: T? = try resizeLock.withReadLock { () throws -> T? in
                var txn: OpaquePointer?
                let rc = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
                if rc == MDB_MAP_RESIZED { return nil }
                try check(rc)
                defer { mdb_txn_abort(txn) }
                return try ReadScope.with(me, txn!) { try body(LMDBTransaction(txn: txn!, environment: self)) }
            }
            if let result { return result }
            try resizeMap(grow: false)
        }
    }

    /// Runs `body` in a write transaction and commits it; `body` runs again if the map had to grow.
    /// With `sync`, the commit is flushed to disk before this returns. When the map is at its maximum,
    /// a transaction for which `mayUseReserve()` is true (one that only removes data) may grow it by
    /// a reserve beyond, so that a full store can still be emptied. Must not be called on a thread
    /// that is already writing (`isWritingOnCurrentThread`): LMDB's writer lock is not reentrant.
    func write<T>(sync: Bool, mayUseReserve: () -> Bool = { false }, _ body: (LMDBTransaction) throws -> T) throws -> T {
        precondition(!isWritingOnCurrentThread, "nested LMDB write transaction on one thread")
        // A write cannot start inside a read on this thread: it could deadlock growing the map
        // (the read holds `resizeLock`), and LMDB allows one transaction per thread.
        if ReadScope.find(UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())) != nil {
            throw WriteInsideRead()
        }
        while true {
            var mustGrow = false
            let result: T? = try resizeLock.withReadLock { () throws -> T? in
                var txn: OpaquePointer?
                let rc = mdb_txn_begin(env, nil, 0, &txn)
                if rc == MDB_MAP_RESIZED { return nil }
                try check(rc)
                if !writerTreesChecked {
                    do {
                        // Under the writer lock nothing can commit: the snapshot is the last commit.
                        try StructureCheck.verify(
                            env: env, snapshot: UInt64(mdb_txn_id(txn)) - 1, limit: structureCheckLimit, scope: .everything)
                    } catch {
                        mdb_txn_abort(txn)
                        throw error
                    }
                    writerTreesChecked = true
                }
                writerThread.store(UInt(pthread_self()), ordering: .relaxed)
                activeWriteHitMapFull = false
                var finished = false
                defer {
                    if !finished {
                        mustGrow = activeWriteHitMapFull
                        endWrite()
                        mdb_txn_abort(txn)
                    }
                }
                let value: T
                do {
                    value = try body(LMDBTransaction(txn: txn!, environment: self))
                } catch where activeWriteHitMapFull {
                    return nil
                }
                if activeWriteHitMapFull { return nil }  // body swallowed MDB_MAP_FULL; the txn is unusable
                finished = true
                endWrite()
                // Durability is per handle: a syncing commit turns MDB_NOSYNC off for itself, under
                // the writer lock (no other commit of this process can run meanwhile).
                let syncedByLMDB = sync && mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 0) == 0
                let commit = mdb_txn_commit(txn)
                if syncedByLMDB { mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 1) }
                if commit == MDB_MAP_FULL { mustGrow = true; return nil }
                try check(commit)
                if sync && !syncedByLMDB { try check(mdb_env_sync(env, 1)) }
                return value
            }
            if let result { return result }
            try resizeMap(grow: mustGrow, useReserve: mustGrow && mayUseReserve())
        }
    }

    /// Checks the pages of the change log's tree (see `StructureCheck`), unless a write of this
    /// process already checked everything.
    func checkLogTree() throws {
        guard !writerTreesChecked else { return }
        try read { txn in
            try StructureCheck.verify(env: env, snapshot: UInt64(mdb_txn_id(txn.txn)), limit: structureCheckLimit, scope: .logTree)
        }
    }

    /// Whether this thread is inside `write`'s body.
    var isWritingOnCurrentThread: Bool {
        writerThread.load(ordering: .relaxed) == UInt(pthread_self())
    }

    private func endWrite() {
        writerThread.store(0, ordering: .relaxed)
    }

    /// Called by `LMDBTransaction` when a write fails with `MDB_MAP_FULL`.
    func noteMapFull() { activeWriteHitMapFull = true }

    /// Whether a buffer of `count` bytes can lie inside the map. (LMDB does not tell where the map
    /// starts, so only the size is checked.)
    @inline(__always)
    func fitsInMap(_ count: Int) -> Bool {
        count >= 0 && count <= mapSize
    }

    // MARK: Map size

    /// Adopts the size another process grew the file to, or (with `grow`) doubles the map up to the
    /// maximum. Never asks for less than the file's current size.
    private func resizeMap(grow: Bool, useReserve: Bool = false) throws {
        try resizeLock.withWriteLock { () throws in
            sidecar.lock()
            defer { sidecar.unlock() }
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
            try check(mdb_env_set_mapsize(env, target))
            refreshMapSize()
        }
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
    func sync() throws {
        try check(mdb_env_sync(env, 1))
    }

    /// Writes a copy of the last committed snapshot to `fd`, an empty file open for writing, while
    /// writers in every process go on. The copy is compacted (`mdb_env_copyfd2` with `MDB_CP_COMPACT`:
    /// free pages left out, pages renumbered), which reads under its own read transaction and never
    /// takes LMDB's writer lock. LMDB refuses to compact a file that has leaked pages
    /// (`MDB_INCOMPATIBLE`); such a file gets a plain copy, which holds the writer lock for a moment
    /// to copy the meta pages.
    func copy(to fd: Int32) throws {
        var flags = UInt32(MDB_CP_COMPACT)
        while true {
            let rc = resizeLock.withReadLock { mdb_env_copyfd2(env, fd, flags) }
            if rc == MDB_SUCCESS { return }
            guard rc == MDB_MAP_RESIZED || (rc == MDB_INCOMPATIBLE && flags != 0) else { throw LMDBError(rc) }
            // Start the file over: another process grew the map before the copy began (adopt its
            // size), or compaction gave up part way.
            guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else { throw LMDBError(errno) }
            if rc == MDB_MAP_RESIZED { try resizeMap(grow: false) } else { flags = 0 }
        }
    }

    struct Info: Sendable {
        var mapSize: Int
        var usedBytes: Int
        var pageSize: Int
        var readers: Int
        var maximumReaders: Int
    }

    func info() throws -> Info {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        try check(mdb_env_info(env, &info))
        try check(mdb_env_stat(env, &stat))
        return Info(
            mapSize: info.me_mapsize,
            usedBytes: (info.me_last_pgno + 1) * Int(stat.ms_psize),
            pageSize: Int(stat.ms_psize),
            readers: Int(info.me_numreaders),
            maximumReaders: Int(info.me_maxreaders)
        )
    }

    @inline(__always)
    func handle(_ database: NamedDatabase) -> MDB_dbi { databases[database] }
}

/// The handles of the four named databases. (Plain fields, not an array: nothing generic on the
/// cold-start path.)
struct DatabaseHandles {
    let values, tombstones, log, meta: MDB_dbi

    /// Opens the four databases in `txn`; nil if they do not exist and `create` is false.
    init?(_ txn: OpaquePointer, create: Bool) throws {
        func open(_ database: NamedDatabase) throws -> MDB_dbi? {
            var dbi: MDB_dbi = 0
            let rc = mdb_dbi_open(txn, database.name, create ? UInt32(MDB_CREATE) : 0, &dbi)
            if rc == MDB_NOTFOUND && !create { return nil }
            try check(rc)
            return dbi
        }
        guard let values = try open(.values), let tombstones = try open(.tombstones),
              let log = try open(.log), let meta = try open(.meta) else { return nil }
        (self.values, self.tombstones, self.log, self.meta) = (values, tombstones, log, meta)
    }

    @inline(__always)
    subscript(database: NamedDatabase) -> MDB_dbi {
        switch database {
        case .values: values
        case .tombstones: tombstones
        case .log: log
        case .meta: meta
        }
    }
}
