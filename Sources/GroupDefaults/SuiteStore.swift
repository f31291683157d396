import Foundation
import Logging
import Synchronization

/// One suite file as this process sees it: its LMDB environment, this store's origin id and the
/// registered defaults. Shared by every `SharedDefaults` handle on the same file, because LMDB must
/// not be opened twice in one process (closing the second copy would drop the first one's locks).
final class SuiteStore: @unchecked Sendable {  // immutable lets, a Mutex, and `activeTransaction` (see there)
    let location: SuiteLocation
    let path: String
    let environment: Environment
    let origin: UInt64
    let maximumValueSize: Int
    let logRetention: UInt64
    let changeDetection: SharedDefaults.Configuration.ChangeDetection
    /// Where failures nobody can be told of directly are logged (the first handle's logger).
    let logger: Logger
    let registered = Mutex<[String: PropertyListValue]>([:])
    private let hub = Mutex<ChangeHub?>(nil)
    private let logChecked = Atomic<Bool>(false)

    /// This process's change notifications for the suite, made on first use.
    var changeHub: ChangeHub {
        hub.withLock { hub in
            if let hub { return hub }
            let made = ChangeHub(store: self)
            hub = made
            return made
        }
    }

    /// The hub if any observer of this process is subscribed.
    private var activeHub: ChangeHub? {
        hub.withLock { $0 }.flatMap { $0.isActive ? $0 : nil }
    }

    /// The transaction this process's writer thread is running, so that calls made inside a `write`
    /// body on that thread join it. Only that thread reads or writes it.
    nonisolated(unsafe) var activeTransaction: SharedDefaults.Transaction?

    /// The layout version of the named databases, stored under `format` in `meta`.
    static let layoutVersion: UInt32 = 1

    private init(location: SuiteLocation, path: String, configuration: SharedDefaults.Configuration) throws {
        self.location = location
        self.path = path
        self.maximumValueSize = configuration.maximumValueSize
        self.logRetention = UInt64(max(1, configuration.logRetention))
        self.changeDetection = configuration.changeDetection
        self.logger = configuration.logger ?? Logger(label: "GroupDefaults")
        do {
            environment = try Environment(
                path: path, sidecarPath: path + "-notify", options: configuration.environmentOptions)
        } catch {
            throw Self.translate(error, suite: location.suiteName, path: path, key: nil, opening: true)
        }
        do {
            origin = try Self.readOrCreateIdentity(environment)
        } catch {
            environment.close()
            throw Self.translate(error, suite: location.suiteName, path: path, key: nil, opening: true)
        }
    }

    /// Checks the layout version and returns the store's origin id, creating both for a new store.
    private static func readOrCreateIdentity(_ environment: Environment) throws -> UInt64 {
        func read(_ txn: LMDBTransaction) throws -> UInt64? {
            guard let format = try txn.get(.meta, MetaKey.format) else { return nil }
            guard format.count == 4 else { throw CorruptBytes("the store's format record is damaged") }
            let version = UInt32(littleEndian: format.loadUnaligned(as: UInt32.self))
            guard version <= layoutVersion else { throw UnsupportedLayout(version: version) }
            guard let origin = try txn.get(.meta, MetaKey.origin), origin.count == 8 else {
                throw CorruptBytes("the store's origin record is missing or damaged")
            }
            return UInt64(littleEndian: origin.loadUnaligned(as: UInt64.self))
        }
        if let origin = try environment.read(read) { return origin }
        return try environment.write(sync: false) { txn in
            if let origin = try read(txn) { return origin }  // another process created it first
            // Only a new, empty store gets an identity; one whose identity is gone is damaged.
            guard try txn.count(.meta) == 0, try txn.count(.values) == 0 else {
                throw CorruptBytes("the store's format record is missing")
            }
            var origin: UInt64 = 0
            while origin == 0 { origin = UInt64.random(in: .min ... .max) }
            try withUnsafeBytes(of: layoutVersion.littleEndian) { try txn.put(.meta, MetaKey.format, $0) }
            try withUnsafeBytes(of: origin.littleEndian) { try txn.put(.meta, MetaKey.origin, $0) }
            return origin
        }
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

    /// The store for `location`, opening it if no handle of this process has it open.
    static func acquire(_ location: SuiteLocation, configuration: SharedDefaults.Configuration) throws -> SuiteStore {
        let directory = try location.createDirectory(mode: configuration.fileSharing.directoryMode)
        let path = directory + "/" + location.suiteName + "." + SuiteLocation.fileExtension
        return try registry.withLock { first in
            var candidate = first
            while let store = candidate {
                if store.path == path {
                    store.handles += 1
                    return store
                }
                candidate = store.nextInRegistry
            }
            let store = try SuiteStore(location: location, path: path, configuration: configuration)
            store.handles = 1
            store.nextInRegistry = first
            first = store
            return store
        }
    }

    /// Takes one more handle on this store (for a reader that may outlive the caller's handles).
    func retain() {
        Self.registry.withLock { _ in handles += 1 }
    }

    /// Called once by each handle that `acquire` returned this store to; the last one closes it.
    func release() {
        Self.registry.withLock { first in
            handles -= 1
            guard handles == 0 else { return }
            if first === self {
                first = nextInRegistry
            } else {
                var previous = first
                while let store = previous, store.nextInRegistry !== self { previous = store.nextInRegistry }
                previous?.nextInRegistry = nextInRegistry
            }
            nextInRegistry = nil
            environment.close()  // under the registry lock: a new open of the file waits for this
        }
    }

    // MARK: Transactions

    /// Runs `body` in a read-only snapshot, or, on a thread inside `write`, in that write.
    func read<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        if environment.isWritingOnCurrentThread, let active = activeTransaction { return try body(active.txn) }
        return try environment.read(body)
    }

    /// Runs `body` in one write transaction, all or nothing. A call on a thread already inside a
    /// `write` of this store joins that transaction.
    func write<T>(sync: Bool, _ body: (SharedDefaults.Transaction) throws -> T) throws -> T {
        if environment.isWritingOnCurrentThread, let active = activeTransaction { return try body(active) }
        var addsData = false
        do {
            let (result, changed) = try environment.write(sync: sync, mayUseReserve: { !addsData }) { txn in
                let transaction = SharedDefaults.Transaction(store: self, txn: txn, isReadOnly: false)
                activeTransaction = transaction
                defer {
                    activeTransaction = nil
                    addsData = transaction.addsData
                    transaction.end()
                }
                return (try body(transaction), transaction.changed)
            }
            if changed {
                environment.sidecar.signalWatchers()  // other processes' observers
                activeHub?.bump()  // this process's observers, at once
            }
            return result
        } catch {
            throw translate(error, key: nil)
        }
    }

    /// Runs `body` in a read of the change log. The first in this process checks the log's pages
    /// before LMDB follows them (opening checks only what plain readers use).
    func readLog<T>(_ body: (LMDBTransaction) throws -> T) throws -> T {
        if !logChecked.load(ordering: .acquiring) {
            try environment.checkLogTree()
            logChecked.store(true, ordering: .releasing)
        }
        return try read(body)
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
        registered.withLock { $0[key] }
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
            return make(.storeFull, "the store reached its maximum size of \(error.mapSize) bytes "
                + "(Configuration.maximumMapSize); nothing stored was lost, remove keys or raise the limit")
        case is WriteInsideRead:
            return make(.transactionMisuse, "a write cannot start inside read { } on the same thread; use write { } for both")
        case is StructureCheck.Retry:
            return make(.storageFailure, "the suite changed too often while its structure was being checked; try again")
        case let error as UnsupportedLayout:
            return make(.unsupportedFormat, "the store was written in format \(error.version) by a newer "
                + "GroupDefaults; this version reads format \(layoutVersion) and left the file unchanged")
        case let error as LMDBError:
            if error == .invalid {
                return make(.corruptFile, "not a GroupDefaults (LMDB) file, or its header is damaged; it was left unchanged")
            }
            if error.meansCorruption {
                return make(.corruptFile, "the file's structure is damaged (\(error)); it was left unchanged, restore it from a backup")
            }
            switch error.code {
            case EACCES, EPERM:
                return make(.notWritable, opening
                    ? "permission denied: the suite's files or directory are not readable and writable by this user"
                    : "permission denied (\(error))")
            case EROFS:
                return make(.notWritable, "the file system is read-only")
            case ENOSPC:
                return make(.storageFailure, "the disk is full; nothing stored was lost")
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

/// Keys of the `meta` database. (The buffers point at immutable static string data.)
enum MetaKey {
    nonisolated(unsafe) static let format = UnsafeRawBufferPointer(staticString: "format")
    nonisolated(unsafe) static let origin = UnsafeRawBufferPointer(staticString: "origin")
}

extension UnsafeRawBufferPointer {
    init(staticString: StaticString) {
        self.init(start: staticString.utf8Start, count: staticString.utf8CodeUnitCount)
    }
}

/// Calls `body` with the UTF-8 bytes of `key`, without copying a native string.
@inline(__always)
func withKeyBytes<T>(_ key: String, _ body: (UnsafeRawBufferPointer) throws -> T) rethrows -> T {
    var key = key
    return try key.withUTF8 { try body(UnsafeRawBufferPointer($0)) }
}
