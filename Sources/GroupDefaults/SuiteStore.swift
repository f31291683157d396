import Foundation
internal import GroupDefaultsLMDB
import GroupDefaultsWire
import Logging
import Synchronization

/// One suite file as this process sees it: its LMDB environment, this store's origin id and the
/// registered defaults. Shared by every `SharedDefaults` handle on the same file, because LMDB must
/// not be opened twice in one process (closing the second copy would drop the first one's locks).
final class SuiteStore: @unchecked Sendable {  // immutable lets, a Mutex, and `activeTransaction` (see there)
    let location: SuiteLocation
    let path: String
    let environment: Environment
    /// The wake-up slots of observers in every process (see `Sidecar`).
    let sidecar: Sidecar
    /// When this process makes the suite's durability points.
    let durabilityPoints: DurabilityPoints
    /// This store's origin id, which stamps its writes (see `readOrCreateIdentity`).
    var origin: UInt64 { originValue.load(ordering: .acquiring) }
    private let originValue: Atomic<UInt64>
    /// Whether this process's writes may start: the origin belongs to this file and the file has
    /// this version's layout (`prepareForWriting` settles both before the first write).
    private let preparedForWriting: Atomic<Bool>
    /// The configuration the store was opened with, whose per-file settings every handle of this
    /// process must share.
    let configuration: SharedDefaults.Configuration
    let maximumValueSize: Int
    let logRetention: UInt64
    let changeDetection: SharedDefaults.Configuration.ChangeDetection
    /// Where failures nobody can be told of directly are logged (the first handle's logger, else
    /// one labelled "GroupDefaults", made when first needed: creating a logger costs a cold-starting
    /// process tens of microseconds).
    var logger: Logger { configuration.logger ?? SharedDefaults.defaultLogger }

    /// This machine's clock for stamping changes (moved by `clockOffsetMilliseconds` in tests).
    func wallClockMilliseconds() -> UInt64 {
        let offset = configuration.clockOffsetMilliseconds
        let now = HLC.wallClockMilliseconds()
        return offset >= 0 ? now &+ UInt64(offset) : now &- min(now, offset.magnitude)
    }
    let registered = Mutex<[ExactName: PropertyListValue]>([:])
    /// The changes this process committed (an observer's `Change.source`).
    let ownCommits = OwnCommits()
    /// The `.local` typed keys this process has recorded among the suite's local-only keys.
    let declaredLocal = Mutex<Set<ExactName>>([])
    private let hub = Mutex<ChangeHub?>(nil)
    /// Whether `hub` was made: until then a commit has no observers of this process to wake, and
    /// asks without taking the lock.
    private let hubMade = Atomic<Bool>(false)
    private let logChecked = Atomic<Bool>(false)
    /// Whether this process checked the pages of the trees sync reads (`checkSyncTrees`).
    private let syncTreesChecked = Atomic<Bool>(false)

    /// This process's change notifications for the suite, made on first use.
    var changeHub: ChangeHub {
        hub.withLock { hub in
            if let hub { return hub }
            let made = ChangeHub(store: self)
            hub = made
            hubMade.store(true, ordering: .releasing)
            return made
        }
    }

    /// The hub if any observer of this process is subscribed.
    private var activeHub: ChangeHub? {
        guard hubMade.load(ordering: .acquiring) else { return nil }
        return hub.withLock { $0 }.flatMap { $0.isActive ? $0 : nil }
    }

    /// The transaction this process's writer thread is running, so that calls made inside a `write`
    /// body on that thread join it. Only that thread reads or writes it. Not retained: `write` sets
    /// it to a transaction it holds, and clears it before it lets the transaction go.
    nonisolated(unsafe) unowned(unsafe) var activeTransaction: SharedDefaults.Transaction?
    /// The buffer write transactions encode records into (`Transaction.scratch`), kept from one write
    /// to the next so that writes of small values allocate nothing. Only the thread holding LMDB's
    /// writer lock touches it: one write transaction at a time in a process. Memory of its own rather
    /// than a stored property, so that using it costs no run-time exclusivity check; freed by
    /// `deinit`.
    let writeBuffer: UnsafeMutablePointer<[UInt8]>
    /// A write buffer grown beyond this is dropped when its transaction ends (one large value must
    /// not pin its memory for the store's life).
    static let keptBufferCapacity = 64 << 10
    /// The write transaction kept for writes whose body never lets it out (`write(renewing: true)`:
    /// `SharedDefaults`' setters), renewed for each, so that such a write allocates none. Every
    /// other write makes its own, so that a transaction a caller kept past its closure is never
    /// renewed and still refuses to be used. Only the thread holding LMDB's writer lock touches it;
    /// memory of its own, as `writeBuffer`. It holds the store: `release` drops it.
    let spareTransaction: UnsafeMutablePointer<SharedDefaults.Transaction?>

    /// The layout version of the named databases, stored under `format` in `meta`. 2 added the
    /// pending index (`PendingIndex`); a file of layout 1 is brought to 2 by the first write of a
    /// process (`prepareForWriting`). A version of the library that knows only 1 refuses a file of 2,
    /// whose index it would not keep.
    static let layoutVersion: UInt32 = 2

    private init(location: SuiteLocation, path: String, configuration: SharedDefaults.Configuration) throws {
        self.location = location
        self.path = path
        self.configuration = configuration
        self.maximumValueSize = configuration.maximumValueSize
        self.logRetention = UInt64(max(1, configuration.logRetention))
        self.changeDetection = configuration.changeDetection
        let sidecarPath = path + "-notify"
        do {
            environment = try Environment(path: path, options: configuration.environmentOptions(lockFilePath: sidecarPath))
        } catch {
            throw Self.translate(error, suite: location.suiteName, path: path, key: nil, opening: true)
        }
        let logger = configuration.logger
        durabilityPoints = DurabilityPoints(environment: environment) { error in
            (logger ?? SharedDefaults.defaultLogger).error("making a durability point of \(path) failed: \(error)")
        }
        do {
            if let mapping = environment.lockFileMapping {
                sidecar = try Sidecar(borrowing: environment.lockFileDescriptor, mapping: mapping)
            } else {
                sidecar = try Sidecar(duplicating: environment.lockFileDescriptor)
            }
        } catch {
            environment.close()
            throw Self.translate(error, suite: location.suiteName, path: path, key: nil, opening: true)
        }
        do {
            let identity = try Self.readOrCreateIdentity(environment)
            originValue = Atomic(identity.origin)
            preparedForWriting = Atomic(identity.ownFile && identity.layout == Self.layoutVersion)
            if identity.created {
                // A copy beside a new suite is a removed suite's (`rm` of the file alone): a reboot must
                // never put it back over this one.
                environment.discardDurableCopy()
                durabilityPoints.committed(within: configuration.durabilityInterval)
            }
        } catch {
            sidecar.close()
            environment.close()
            throw Self.translate(error, suite: location.suiteName, path: path, key: nil, opening: true)
        }
        writeBuffer = .allocate(capacity: 1)
        writeBuffer.initialize(to: [])
        spareTransaction = .allocate(capacity: 1)
        spareTransaction.initialize(to: nil)
        if let recovery = environment.recovery { recordRestore(recovery) }
    }

    deinit {
        writeBuffer.deinitialize(count: 1)
        writeBuffer.deallocate()
        spareTransaction.deinitialize(count: 1)
        spareTransaction.deallocate()
    }

    /// Says once that opening put the suite back to its last durability point after a reboot: in
    /// the log, and in the suite (`Transaction.recordRestore`: for `info()`, observers and sync).
    private func recordRestore(_ recovery: DurableCopy.Recovery) {
        let pointTime = recovery.pointTime / 1_000_000
        let when = Date(timeIntervalSince1970: Double(pointTime) / 1000)
        logger.warning(
            "\(path): after an operating-system crash or power loss the suite was put back to its last durability point (\(when)); changes made after it are lost"
        )
        do {
            try write(sync: false, durableWithin: configuration.durabilityInterval) { tx in try tx.recordRestore(pointTime: pointTime) }
        } catch {
            logger.error("\(path): recording that the suite was put back to its last durability point failed: \(error)")
        }
    }

    /// Checks the layout version and reads the store's origin id, creating both for a new store.
    /// Returns whether the origin belongs to this file, and the file's layout version.
    ///
    /// The origin belongs to one file: `meta` also records the file's device and inode numbers, and
    /// a store found in another file (copied with `cp`, restored from a file system backup) takes a
    /// new origin, so that two devices never share one. (Moving the file keeps it.) Opening never
    /// writes an existing file (a damaged one must stay as it is): the first write of this process
    /// settles the origin and brings an older layout to this one (`prepareForWriting`).
    private static func readOrCreateIdentity(_ environment: Environment) throws -> (origin: UInt64, ownFile: Bool, layout: UInt32, created: Bool) {
        if let found = try environment.read({ try readIdentity($0, file: environment.fileID) }) {
            return (found.origin, found.ownFile, found.layout, false)
        }
        return try environment.write(sync: false) { txn in
            // Another process may have created it first.
            if let found = try readIdentity(txn, file: environment.fileID) { return (found.origin, found.ownFile, found.layout, false) }
            // Only a new, empty store gets an identity; one whose identity is gone is damaged.
            guard try txn.count(.meta) == 0, try txn.count(.values) == 0 else {
                throw CorruptBytes("the store's format record is missing")
            }
            try withUnsafeBytes(of: layoutVersion.littleEndian) { try txn.put(.meta, MetaKey.format, $0) }
            return (try newOrigin(txn, file: environment.fileID), true, layoutVersion, true)
        }
    }

    /// The origin, whether it belongs to the file `file`, and the file's layout version; nil for a
    /// new file.
    private static func readIdentity(_ txn: LMDBTransaction, file: FileID) throws -> (origin: UInt64, ownFile: Bool, layout: UInt32)? {
        guard let format = try txn.get(.meta, MetaKey.format) else { return nil }
        guard format.count == 4 else { throw CorruptBytes("the store's format record is damaged") }
        let version = UInt32(littleEndian: format.loadUnaligned(as: UInt32.self))
        guard version <= layoutVersion else { throw UnsupportedLayout(version: version) }
        guard let origin = try txn.get(.meta, MetaKey.origin), origin.count == 8 else {
            throw CorruptBytes("the store's origin record is missing or damaged")
        }
        let recorded = try txn.get(.meta, MetaKey.originFile)
        let ownFile = recorded.map(file.matches) ?? false
        return (UInt64(littleEndian: origin.loadUnaligned(as: UInt64.self)), ownFile, version)
    }

    private static func newOrigin(_ txn: LMDBTransaction, file: FileID) throws -> UInt64 {
        var origin: UInt64 = 0
        while origin == 0 { origin = UInt64.random(in: .min ... .max) }
        try withUnsafeBytes(of: origin.littleEndian) { try txn.put(.meta, MetaKey.origin, $0) }
        try file.bytes.withUnsafeBytes { try txn.put(.meta, MetaKey.originFile, $0) }
        return origin
    }

    /// Settles the origin and the layout before this process's first write, in one transaction:
    /// a store found in another file than its origin's takes a new one; a store from before origins
    /// were tied to files records its file and keeps its origin (it has been the only one with it
    /// so far); a file of an older layout is brought to this one (layout 1: its pending index is
    /// built from the marks, `PendingIndex`).
    private func prepareForWriting() throws {
        let file = environment.fileID
        let origin = try environment.write(sync: false) { txn -> UInt64 in
            guard let found = try Self.readIdentity(txn, file: file) else {
                throw CorruptBytes("the store's format record is missing")
            }
            if found.layout < Self.layoutVersion {
                try PendingIndex.rebuild(txn)
                try withUnsafeBytes(of: Self.layoutVersion.littleEndian) { try txn.put(.meta, MetaKey.format, $0) }
            }
            if found.ownFile { return found.origin }
            if try txn.get(.meta, MetaKey.originFile) != nil { return try Self.newOrigin(txn, file: file) }
            try file.bytes.withUnsafeBytes { try txn.put(.meta, MetaKey.originFile, $0) }
            return found.origin
        }
        originValue.store(origin, ordering: .releasing)
        preparedForWriting.store(true, ordering: .releasing)
        durabilityPoints.committed(within: configuration.durabilityInterval)
    }

    // MARK: Registry: one store per file per process

    /// The open stores, as a list threaded through the stores themselves: a process opens a few
    /// suites at most, and a plain list costs nothing to set up, where a generic dictionary's
    /// first use costs a cold-starting process about 100 µs of type instantiation.
    private static let registry = Mutex<SuiteStore?>(nil)
    /// The next store in the registry's list, and how many handles use this one; both guarded by
    /// the registry's lock.
    private nonisolated(unsafe) var nextInRegistry: SuiteStore?
    private nonisolated(unsafe) var handles = 0

    /// The store for `location`, opening it if no handle of this process has it open. A handle whose
    /// per-file settings differ from those the store is open with fails (`conflictingConfiguration`).
    /// In a child process after `fork()` the parent's stores are left alone (never used, never
    /// closed) and the file is opened anew.
    static func acquire(_ location: SuiteLocation, configuration: SharedDefaults.Configuration) throws -> SuiteStore {
        let directory = try location.createDirectory(mode: configuration.fileSharing.directoryMode)
        let path = directory + "/" + location.suiteName + "." + SuiteLocation.fileExtension
        return try registry.withLock { first in
            var candidate = first
            var previous: SuiteStore?
            while let store = candidate {
                if store.environment.isInherited {
                    // The parent's: unlink it from this process's list, and never touch it again.
                    let next = store.nextInRegistry
                    if let previous { previous.nextInRegistry = next } else { first = next }
                    candidate = next
                    continue
                }
                if store.path == path {
                    try store.checkSameFileSettings(configuration)
                    store.handles += 1
                    return store
                }
                previous = store
                candidate = store.nextInRegistry
            }
            let store = try SuiteStore(location: location, path: path, configuration: configuration)
            store.handles = 1
            store.nextInRegistry = first
            first = store
            return store
        }
    }

    /// Makes the due durability point of every suite this process has open (at exit).
    static func makeDueDurabilityPoints() {
        registry.withLock { first in
            var store = first
            while let current = store {
                if !current.environment.isInherited { current.durabilityPoints.makeDuePoint() }
                store = current.nextInRegistry
            }
        }
    }

    /// Takes one more handle on this store (for a reader that may outlive the caller's handles).
    func retain() {
        Self.registry.withLock { _ in handles += 1 }
    }

    /// Refuses a configuration whose per-file settings differ from this store's.
    private func checkSameFileSettings(_ requested: SharedDefaults.Configuration) throws {
        for (mine, theirs) in zip(configuration.fileSettings, requested.fileSettings) where mine.value != theirs.value {
            throw error(
                .conflictingConfiguration,
                key: nil,
                "this process already has the suite open with \(mine.name) = \(mine.value); a second handle "
                    + "cannot use \(theirs.value), because the setting holds for the file in the whole process: "
                    + "open it with the same value (or reuse the first handle)"
            )
        }
    }

    /// Called once by each handle that `acquire` returned this store to; the last one closes it.
    func release() {
        Self.registry.withLock { first in
            handles -= 1
            guard handles == 0, !environment.isInherited else { return }
            if first === self {
                first = nextInRegistry
            } else {
                var previous = first
                while let store = previous, store.nextInRegistry !== self { previous = store.nextInRegistry }
                previous?.nextInRegistry = nextInRegistry
            }
            nextInRegistry = nil
            spareTransaction.pointee = nil  // it holds the store
            durabilityPoints.finish()
            sidecar.close()
            environment.close()  // under the registry lock: a new open of the file waits for this
        }
    }

    // MARK: Transactions

    /// Runs `body` in a read-only snapshot, or, on a thread inside `write`, in that write.
    func read<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        if environment.isWritingOnCurrentThread, let active = activeTransaction { return try body(active.txn) }
        return try environment.read(body)
    }

    /// Whether this thread is inside a write of this store (a `write` now would join it).
    var isWritingOnCurrentThread: Bool { environment.isWritingOnCurrentThread && activeTransaction != nil }

    /// Runs `body` in one write transaction, all or nothing. A call on a thread already inside a
    /// `write` of this store joins that transaction.
    /// With `sync` the commit is flushed to disk; if only that flush fails, the write stands (every
    /// process sees it, observers are woken) and `flushFailed` is told, with a `storageFailure`.
    /// With `renewing`, for a `body` that never lets its transaction out, the transaction is the
    /// store's spare (`spareTransaction`), renewed.
    func write<T>(
        sync: Bool,
        durableWithin interval: Duration,
        renewing: Bool = false,
        flushFailed: (SharedDefaultsError) -> Void = { _ in },
        _ body: (SharedDefaults.Transaction) throws -> T
    ) throws -> T {
        if environment.isWritingOnCurrentThread, let active = activeTransaction { return try body(active) }
        if !preparedForWriting.load(ordering: .acquiring) {
            do { try prepareForWriting() } catch { throw translate(error, key: nil) }
        }
        var addsData = false
        var flushError: LMDBError?
        var logged: ClosedRange<UInt64>?
        defer {
            if let flushError {
                flushFailed(
                    self.error(
                        .storageFailure,
                        key: nil,
                        "the write was committed and every process sees it, but flushing it to disk failed (\(flushError)): "
                            + "it may not survive a power loss or an operating-system crash"
                    )
                )
            }
        }
        do {
            let (result, changed) = try environment.write(
                sync: sync,
                mayUseReserve: { !addsData },
                flushFailed: { flushError = $0 }
            ) { txn in
                // A retried attempt (the map grew) logs its changes anew: forget the first attempt's.
                if let earlier = logged {
                    ownCommits.remove(earlier)
                    logged = nil
                }
                let transaction: SharedDefaults.Transaction
                if renewing, let spare = spareTransaction.pointee.take() {
                    spare.renew(txn)
                    transaction = spare
                } else {
                    transaction = SharedDefaults.Transaction(store: self, txn: txn, isReadOnly: false)
                }
                activeTransaction = transaction
                defer {
                    activeTransaction = nil
                    addsData = transaction.addsData
                    transaction.end()
                    if renewing { spareTransaction.pointee = transaction }
                }
                let result = try body(transaction)
                // Before the commit: no reader sees these changes before they are known as ours.
                logged = transaction.loggedSequences
                if let logged { ownCommits.add(logged) }
                return (result, transaction.changed)
            }
            if changed {
                sidecar.signalWatchers()  // other processes' observers
                activeHub?.bump()  // this process's observers, at once
                if !sync { durabilityPoints.committed(within: interval) }
            }
            return result
        } catch {
            if let logged { ownCommits.remove(logged) }  // not committed: the numbers go to the next writer
            throw translate(error, key: nil)
        }
    }

    /// Runs `body` in a read of the change log. The first in this process checks the log's pages
    /// before LMDB follows them (opening checks only what plain readers use).
    func readLog<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        if !logChecked.load(ordering: .acquiring) {
            try environment.checkTrees([SuiteDatabase.name(of: .log)])
            logChecked.store(true, ordering: .releasing)
        }
        return try read(body)
    }

    /// Checks the pages of the trees sync reads (the pending index, the tombstones), once per
    /// process, before LMDB follows them (opening checks only what plain readers use).
    func checkSyncTrees() throws {
        guard !syncTreesChecked.load(ordering: .acquiring) else { return }
        do {
            try environment.checkTrees([SuiteDatabase.name(of: .pending), SuiteDatabase.name(of: .tombstones)])
        } catch {
            throw translate(error, key: nil)
        }
        syncTreesChecked.store(true, ordering: .releasing)
    }

    func readTransaction<T>(_ body: (SharedDefaults.Transaction) throws -> T) throws -> T {
        do {
            return try read { txn in
                let transaction = SharedDefaults.Transaction(store: self, txn: txn, isReadOnly: true)
                defer { transaction.end() }
                return try body(transaction)
            }
        } catch {
            throw translate(error, key: nil)
        }
    }

    func registeredValue(forKey key: String) -> PropertyListValue? {
        registered.withLock { $0[key.exact] }
    }

    // MARK: Errors

    func error(_ code: SharedDefaultsError.Code, key: String?, _ reason: String) -> SharedDefaultsError {
        SharedDefaultsError(code, suite: location.suiteName, path: path, key: key, reason)
    }

    func translate(_ error: any Error, key: String?) -> any Error {
        Self.translate(error, suite: location.suiteName, path: path, key: key, opening: false)
    }

    /// Turns the storage layer's errors into `SharedDefaultsError`; other errors (thrown by a caller's
    /// closure) pass through unchanged.
    static func translate(_ error: any Error, suite: String, path: String, key: String?, opening: Bool) -> any Error {
        func make(_ code: SharedDefaultsError.Code, _ reason: String) -> SharedDefaultsError {
            SharedDefaultsError(code, suite: suite, path: path, key: key, reason)
        }
        switch error {
        case is SharedDefaultsError:
            return error
        case let error as CorruptBytes:
            return key == nil
                ? make(.corruptFile, "the store's metadata is damaged: \(error)")
                : make(.corruptValue, "the stored value is damaged (\(error)); other keys are unaffected")
        case let error as StructureDamage:
            return make(.corruptFile, "the file's structure is damaged: \(error); it was left unchanged, restore it from a backup")
        case let error as FileHeader.Truncated:
            return make(.corruptFile, "\(error); nothing was changed, restore the file from a backup")
        case let error as MapAtMaximum:
            return make(
                .storeFull,
                "the store reached its maximum size of \(error.mapSize) bytes "
                    + "(Configuration.maximumMapSize); nothing stored was lost, remove keys or raise the limit"
            )
        case let error as DiskFull:
            return make(
                .diskFull,
                "the disk is full: \(error.path) needs room for \(error.bytes) bytes; "
                    + "nothing stored was lost and the write that needed the room changed nothing; free some space"
            )
        case is UsedAfterFork:
            return make(
                .usedAfterFork,
                "this handle was opened before the process forked, and LMDB forbids using it "
                    + "in the child: open the suite again in the child"
            )
        case is WriteInsideRead:
            return make(.transactionMisuse, "a write cannot start inside read { } on the same thread; use write { } for both")
        case is StructureCheck.Retry:
            return make(.storageFailure, "the suite changed too often while its structure was being checked; try again")
        case let error as UnsupportedLayout:
            return make(
                .unsupportedFormat,
                "the store was written in format \(error.version) by a newer "
                    + "GroupDefaults; this version reads format \(layoutVersion) and left the file unchanged"
            )
        case let error as LMDBError:
            if error == .invalid {
                return make(.corruptFile, "not a GroupDefaults (LMDB) file, or its header is damaged; it was left unchanged")
            }
            if error.meansCorruption {
                return make(.corruptFile, "the file's structure is damaged (\(error)); it was left unchanged, restore it from a backup")
            }
            if error == .readersFull {
                return make(
                    .tooManyReaders,
                    "every reader slot of the suite's lock file is taken (one per thread of "
                        + "every process reading it; Configuration.maximumReaders when the suite was created); try again "
                        + "when fewer threads read it"
                )
            }
            switch error.code {
            case ENOSPC, EDQUOT:
                return make(.diskFull, "the disk is full; nothing stored was lost")
            case EACCES, EPERM:
                return make(
                    .notWritable,
                    opening
                        ? "permission denied: the suite's files or directory are not readable and writable by this user"
                        : "permission denied (\(error))"
                )
            case EROFS:
                return make(.notWritable, "the file system is read-only")
            case ENOENT, ENOTDIR:
                return make(.notWritable, "the suite directory does not exist or is not a directory")
            default:
                return make(.storageFailure, "LMDB: \(error)")
            }
        default:
            return error
        }
    }
}

struct UnsupportedLayout: Error {
    let version: UInt32
}

/// Generic forms of the LMDB layer's transactions, specialised here, in the module that calls them
/// (see `Environment.readTransaction` for why the layer's own are not generic).
extension Environment {
    func read<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        var result: T?
        try readTransaction { result = try body($0) }
        return result.take()!  // moved out: no copy of the value (a retain) and release of the local
    }

    func write<T>(
        sync: Bool,
        mayUseReserve: () -> Bool = { false },
        flushFailed: (LMDBError) -> Void = { _ in },
        _ body: (LMDBTransaction) throws -> T
    ) throws -> T {
        var result: T?
        try writeTransaction(sync: sync, mayUseReserve: mayUseReserve, flushFailed: flushFailed) { result = try body($0) }
        return result.take()!
    }
}

/// The named databases of a suite file (see ARCHITECTURE.md).
enum SuiteDatabase {
    static let names = ["values", "tombstones", "log", "meta", "journal", "pending"]
    /// What a plain reader follows, checked when a file is opened.
    static let readerTrees = ["values", "meta"]

    static func name(of database: Database) -> String { names[database.index] }
}

extension Database {
    static let values = Database(0)
    static let tombstones = Database(1)
    static let log = Database(2)
    static let meta = Database(3)
    /// The conflict journal: local values sync replaced (`ConflictJournal`). Never synced.
    static let journal = Database(4)
    /// The keys whose record is marked pending (`PendingIndex`): key → nothing.
    static let pending = Database(5)
}

/// Keys of the `meta` database. (The buffers point at immutable static string data.)
enum MetaKey {
    nonisolated(unsafe) static let format = UnsafeRawBufferPointer(staticString: "format")
    nonisolated(unsafe) static let origin = UnsafeRawBufferPointer(staticString: "origin")
    /// The device and inode numbers of the file the origin belongs to.
    nonisolated(unsafe) static let originFile = UnsafeRawBufferPointer(staticString: "origin.file")
    /// Present when the suite is synced (its value: the server's URL, UTF-8).
    nonisolated(unsafe) static let syncServer = UnsafeRawBufferPointer(staticString: "sync.server")
    /// The server cursor: the last server revision applied, u64 little-endian.
    nonisolated(unsafe) static let syncCursor = UnsafeRawBufferPointer(staticString: "sync.cursor")
    /// The incarnation of the server's storage the suite last synced with (`Server-Incarnation`), UTF-8.
    nonisolated(unsafe) static let syncIncarnation = UnsafeRawBufferPointer(staticString: "sync.incarnation")
    /// The incarnation of the account that owns the synced suite (`Account-Incarnation`), UTF-8.
    nonisolated(unsafe) static let syncAccountIncarnation = UnsafeRawBufferPointer(staticString: "sync.account-incarnation")
    /// The batch being pushed: its id and exact body.
    nonisolated(unsafe) static let syncInFlight = UnsafeRawBufferPointer(staticString: "sync.inflight")
    /// The path of the file holding the sync token (never the token), UTF-8.
    nonisolated(unsafe) static let syncTokenFile = UnsafeRawBufferPointer(staticString: "sync.tokenfile")
    /// The path of the PEM file of the private certificate authority to trust, UTF-8.
    nonisolated(unsafe) static let syncCAFile = UnsafeRawBufferPointer(staticString: "sync.cafile")
    /// The file of the suite's end-to-end encryption keys (its path; never the keys).
    nonisolated(unsafe) static let syncKeyFile = UnsafeRawBufferPointer(staticString: "sync.keyfile")
    /// For a suite another account shares with this one: who owns it, its name there and this
    /// account's role, as the sync client wrote them (opaque here), UTF-8.
    nonisolated(unsafe) static let syncShare = UnsafeRawBufferPointer(staticString: "sync.share")
    /// After `leave`: the share the suite was a copy of (`syncShare`'s text, kept by
    /// `disableSync(rememberingShare:)`), so that no hint and no plain `configure` takes another
    /// account's values for this account's own; cleared when sync is turned on again.
    nonisolated(unsafe) static let syncLeftShare = UnsafeRawBufferPointer(staticString: "sync.left-share")
    /// With `syncLeftShare`: the incarnation of the owner's account the copy last synced with
    /// (`syncAccountIncarnation`'s text), so that the copy joins again only the same account's
    /// suite, never a new account's of the same name; cleared when sync is turned on again.
    nonisolated(unsafe) static let syncLeftAccountIncarnation = UnsafeRawBufferPointer(staticString: "sync.left-account-incarnation")
    /// What the sync engine last reported that needs attention (paused, failing), UTF-8.
    nonisolated(unsafe) static let syncNote = UnsafeRawBufferPointer(staticString: "sync.note")
    /// The HLC at which sync was turned on (`configure`), u64 little-endian: the moment of the
    /// joining rule (`JoiningRule`).
    nonisolated(unsafe) static let syncConfiguredAt = UnsafeRawBufferPointer(staticString: "sync.configured")
    /// The local-only key patterns of a synced suite, UTF-8, one per line.
    nonisolated(unsafe) static let syncExclude = UnsafeRawBufferPointer(staticString: "sync.exclude")
    /// The keys declared `sync: .local` (`SharedDefaults.SyncScope`), UTF-8, one per line: local-only
    /// like `syncExclude`'s patterns, which `configure --exclude` replaces without touching these.
    nonisolated(unsafe) static let syncDeclaredLocal = UnsafeRawBufferPointer(staticString: "sync.local-keys")
    /// On a member's device, the keys the suite's owner pinned (`SharedDefaults.pinnedKeys`): a JSON
    /// array of the key names, written by the sync engine.
    nonisolated(unsafe) static let syncPinned = UnsafeRawBufferPointer(staticString: "sync.pinned")
    /// The keys whose next entry from the server the joining rule still decides (`JoiningRule`):
    /// at the join, the server held them only under the key epoch before the current one, which a
    /// rotation not finished yet seals again. A JSON array of the key names.
    nonisolated(unsafe) static let syncJoiningKeys = UnsafeRawBufferPointer(staticString: "sync.joining-keys")
    /// How many pulled entries were not applied because their key is local-only, u64 little-endian.
    nonisolated(unsafe) static let syncIgnored = UnsafeRawBufferPointer(staticString: "sync.ignored")
    /// The last time the suite was put back to its durability point after a reboot: when (u64
    /// milliseconds since 1970) and the point's time (u64 milliseconds), little-endian.
    nonisolated(unsafe) static let lastRestore = UnsafeRawBufferPointer(staticString: "restore.last")
    /// The conflict journal's bounds: how many entries, how many days (two u32, little-endian).
    nonisolated(unsafe) static let journalBounds = UnsafeRawBufferPointer(staticString: "journal.bounds")
    /// The last recovery of a clock that ran ahead (`Transaction`'s `recoverClock`): the log's tail
    /// HLC it recovered from and the clock it gave, two u64 little-endian; so that, until a change
    /// moves the log's tail, later transactions take the recovered clock without looking again.
    nonisolated(unsafe) static let clockRecovery = UnsafeRawBufferPointer(staticString: "clock.recovered")
    /// The version of the last migration applied to the suite (`SharedDefaults.migrate`), u64 little-endian.
    nonisolated(unsafe) static let migrationVersion = UnsafeRawBufferPointer(staticString: "migration.version")
}

extension UnsafeRawBufferPointer {
    init(staticString: StaticString) {
        self.init(start: staticString.utf8Start, count: staticString.utf8CodeUnitCount)
    }
}

/// Calls `body` with the UTF-8 bytes of `key`, without copying a native string (nor retaining it:
/// its storage is borrowed; a bridged string is copied into a native one first).
@inline(__always) @discardableResult
func withKeyBytes<T>(_ key: String, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
    if let result = try key.utf8.withContiguousStorageIfAvailable({ try body(UnsafeRawBufferPointer($0)) }) { return result }
    var key = key
    return try key.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
}
