import Foundation
import Glibc
internal import GroupDefaultsLMDB
import GroupDefaultsWire
import SystemCalls

// Looking after suites as files: finding and opening existing ones, inspecting and verifying them,
// backing them up and restoring them, and whole-suite edits (rename, replace). The
// `groupdefaults` tool is built on these; an app may call them too.

extension SharedDefaults {
    // MARK: Existing suites

    /// Opens a suite that already exists; never creates a file or a directory.
    ///
    /// ```swift
    /// do {
    ///     let defaults = try SharedDefaults(existingSuiteName: "group.com.example.chat")
    /// } catch SharedDefaultsError.Code.suiteNotFound {
    ///     print("Domain group.com.example.chat does not exist")
    /// }
    /// ```
    /// Opening the suite may create its `-lock` and `.lmdb-notify` files next to the data file, as
    /// any open does.
    /// - Throws: `SharedDefaultsError` with code `suiteNotFound` if `<directory>/<suiteName>.lmdb`
    ///   does not exist, else as `init(suiteName:directory:configuration:)`.
    public convenience init(existingSuiteName suiteName: String, directory: URL? = nil, configuration: Configuration = .init()) throws {
        let location = try SuiteLocation(suiteName: suiteName, directory: directory)
        try location.requireExistingFile()
        try self.init(
            suiteName: suiteName,
            directory: URL(fileURLWithPath: location.directory, isDirectory: true),
            configuration: configuration
        )
    }

    /// Opens the suite stored in the `.lmdb` file at `fileURL`: the suite named by the file's name
    /// (without `.lmdb`), in the file's directory. The file must exist.
    ///
    /// ```swift
    /// let backup = try SharedDefaults(fileURL: URL(fileURLWithPath: "/var/backups/chat.lmdb"))
    /// ```
    /// - Throws: `SharedDefaultsError` with code `invalidSuiteName` if the file's name does not end
    ///   in `.lmdb`, `suiteNotFound` if it does not exist, else as `init(suiteName:directory:configuration:)`.
    public convenience init(fileURL: URL, configuration: Configuration = .init()) throws {
        let file = try SuiteFile(fileURL)
        try self.init(existingSuiteName: file.suiteName, directory: file.directory, configuration: configuration)
    }

    /// The names of the suites in `directory` (the default directory when nil), sorted; empty if the
    /// directory does not exist. A suite is a regular file named `<suiteName>.lmdb`.
    ///
    /// - Throws: `SharedDefaultsError` (with an empty `suiteName`) if the directory cannot be listed.
    public static func suiteNames(in directory: URL? = nil) throws -> [String] {
        let path = SuiteLocation.absoluteDirectory(directory)
        func failure(_ code: Int32) -> SharedDefaultsError {
            switch code {
            case EACCES, EPERM:
                SharedDefaultsError(.notWritable, suite: "", path: path, "permission denied: the suite directory cannot be listed by this user")
            case ENOTDIR:
                SharedDefaultsError(.notWritable, suite: "", path: path, "the suite directory is not a directory")
            default:
                SharedDefaultsError(.storageFailure, suite: "", path: path, "cannot list the suite directory: \(String(cString: strerror(code)))")
            }
        }
        var st = stat()
        if stat(path, &st) != 0 {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return [] }
            throw failure(code)
        }
        guard st.st_mode & S_IFMT == S_IFDIR else { throw failure(ENOTDIR) }
        guard let stream = opendir(path) else { throw failure(errno) }
        defer { closedir(stream) }
        let directoryURL = URL(fileURLWithPath: path, isDirectory: true)
        var names: [String] = []
        while let entry = readdir(stream) {
            let fileName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(validating: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let fileName, let file = try? SuiteFile(name: fileName, directory: directoryURL),
                (try? SuiteLocation(suiteName: file.suiteName, directory: directoryURL)) != nil,
                stat(path + "/" + fileName, &st) == 0, st.st_mode & S_IFMT == S_IFREG
            else { continue }
            names.append(file.suiteName)
        }
        return names.sorted()
    }

    /// The directory a suite is in when no directory is given: `$GROUPDEFAULTS_DIR`, else
    /// `$XDG_DATA_HOME/groupdefaults`, else `~/.local/share/groupdefaults` (made absolute, as the
    /// initializers do).
    public static var defaultDirectory: URL {
        URL(fileURLWithPath: SuiteLocation.absoluteDirectory(nil), isDirectory: true)
    }

    // MARK: Inspecting

    /// What `info()` reports about a suite's file.
    public struct Info: Sendable {
        /// The suite's data file.
        public var path: String
        /// The data file's size in bytes (with LMDB's map written into the file, about `mapSize`).
        public var fileSize: Int
        /// The number of stored keys (registered defaults not included).
        public var keyCount: Int
        /// The current size of the map, which grows on demand up to `maximumMapSize`.
        public var mapSize: Int
        /// The bytes of the map in use (the last page used, free pages included).
        public var usedBytes: Int
        /// The size the map may grow to (`Configuration.maximumMapSize` of this process).
        public var maximumMapSize: Int
        /// The sequence number of the last change (0 if none); see `lastSequence`.
        public var lastSequence: UInt64
        /// Reader slots held by live processes: one per thread that has read the suite, this
        /// process's included.
        public var readers: Int
        /// The reader slots of the suite's lock file, shared by every process.
        public var maximumReaders: Int
        /// This handle's durability (`Configuration.durability`).
        public var durability: Configuration.Durability
        /// This handle's `Configuration.durabilityInterval`.
        public var durabilityInterval: Duration
        /// This store's origin id, which stamps its writes for sync.
        public var origin: UInt64
        /// The last time the suite was put back to its last durability point after an
        /// operating-system crash or power loss (see `Configuration.Durability.processCrashSafe`);
        /// nil if it never was.
        public var lastRestore: Restore?
    }

    /// A suite put back to its last durability point after an operating-system crash or power loss.
    public struct Restore: Sendable, Hashable {
        /// When the suite was put back (when it was first opened after the crash).
        public var restoredAt: Date
        /// When the durability point it was put back to was made: changes after it were lost.
        public var pointTime: Date
    }

    /// Facts about the suite's file and use, for diagnostics (`groupdefaults info`).
    public func info() throws -> Info {
        do {
            let (keyCount, lastSequence, lastRestore) = try store.read { txn in
                (try txn.count(.values), try ChangeLog.tail(txn).sequence, Self.lastRestore(try txn.get(.meta, MetaKey.lastRestore)))
            }
            let environment = try store.environment.info()
            let readers = try store.environment.liveReaderCount()
            var st = stat()
            guard stat(store.path, &st) == 0 else { throw LMDBError(errno) }
            return Info(
                path: store.path,
                fileSize: Int(st.st_size),
                keyCount: keyCount,
                mapSize: environment.mapSize,
                usedBytes: environment.usedBytes,
                maximumMapSize: store.environment.maximumMapSize,
                lastSequence: lastSequence,
                readers: readers,
                maximumReaders: environment.maximumReaders,
                durability: configuration.durability,
                durabilityInterval: configuration.durabilityInterval,
                origin: store.origin,
                lastRestore: lastRestore
            )
        } catch {
            throw store.translate(error, key: nil)
        }
    }

    private static func lastRestore(_ record: UnsafeRawBufferPointer?) -> Restore? {
        guard let record, record.count == 16 else { return nil }
        let date = { (offset: Int) in
            Date(timeIntervalSince1970: Double(UInt64(littleEndian: record.loadUnaligned(fromByteOffset: offset, as: UInt64.self))) / 1000)
        }
        return Restore(restoredAt: date(0), pointTime: date(8))
    }

    // MARK: Verifying

    /// What `verify()` found.
    public struct VerifyReport: Sendable {
        /// A stored key whose record is damaged.
        public struct DamagedKey: Sendable, Hashable {
            /// The key whose value cannot be read.
            public var key: String
            /// What is wrong with the record, in words.
            public var reason: String
        }

        /// How many stored keys were read (damaged ones included).
        public var checkedKeys: Int
        /// The keys whose records are damaged, in key order.
        public var damagedKeys: [DamagedKey]
        /// Damage not confined to one key's record (the file's page structure, the change log),
        /// or why the file could not be opened; nil if none. When the structure is damaged no
        /// record is read.
        public var structureProblem: String?

        /// True when nothing is damaged.
        public var isHealthy: Bool { structureProblem == nil && damagedKeys.isEmpty }
    }

    /// Checks the structure of every page of the file (whatever `Configuration.structureCheckLimit`
    /// says), then reads and decodes every record: values, removal records (tombstones) and the
    /// change log. Safe while other processes write: it reads one snapshot.
    ///
    /// ```swift
    /// let report = try defaults.verify()
    /// for damaged in report.damagedKeys { print(damaged.key, damaged.reason) }
    /// ```
    /// - Throws: only when the suite cannot be read at all (not for damage, which is reported).
    public func verify() throws -> VerifyReport {
        try inspect(keepingValues: false).report
    }

    /// Verifies the suite file at `fileURL` (see `verify()`), opening it only for the call. A file
    /// that cannot be opened yields a report whose `structureProblem` says why.
    public static func verify(fileAt fileURL: URL) -> VerifyReport {
        func problem(_ text: String) -> VerifyReport {
            VerifyReport(checkedKeys: 0, damagedKeys: [], structureProblem: text)
        }
        var st = stat()
        guard stat(fileURL.absoluteURL.path, &st) == 0 else { return problem("there is no file \(fileURL.path)") }
        if st.st_mode & S_IFMT == S_IFREG, st.st_size == 0 {
            return problem("the file is empty: it is not a suite")  // opening would make it one
        }
        do {
            return try withFile(at: fileURL, configuration: .checkingEveryPage) { try $0.verify() }
        } catch let error as SharedDefaultsError {
            return problem(error.reason)
        } catch {
            return problem("\(error)")
        }
    }

    /// The verification behind `verify()` and `restore(from:)`: one snapshot, and with
    /// `keepingValues` every decoded value.
    private func inspect(keepingValues: Bool) throws -> (report: VerifyReport, values: [(key: String, value: PropertyListValue)]) {
        var report = VerifyReport(checkedKeys: 0, damagedKeys: [], structureProblem: nil)
        var values: [(key: String, value: PropertyListValue)] = []
        do {
            // LMDB trusts every page it follows: check them all before reading any record.
            try store.environment.verifyStructure()
            try store.read { txn in
                try txn.forEach(.values) { rawKey, raw in
                    report.checkedKeys += 1
                    guard let key = String(validating: rawKey, as: UTF8.self) else {
                        report.damagedKeys.append(
                            .init(
                                key: String(decoding: rawKey, as: UTF8.self),
                                reason: "the key's bytes are not valid UTF-8"
                            )
                        )
                        return true
                    }
                    do {
                        let value = try StoredRecord.decode(raw).value
                        if keepingValues { values.append((key, value)) }  // every key as its bytes
                    } catch {
                        report.damagedKeys.append(.init(key: key, reason: "the stored value is damaged: \(error)"))
                    }
                    return true
                }
                try txn.forEach(.tombstones) { rawKey, raw in
                    do {
                        _ = try StoredRecord.decodeTombstone(raw)
                    } catch {
                        report.damagedKeys.append(
                            .init(
                                key: String(decoding: rawKey, as: UTF8.self),
                                reason: "its removal record (tombstone) is damaged: \(error)"
                            )
                        )
                    }
                    return true
                }
                var damagedLogRecords = 0
                try txn.forEach(.log) { key, value in
                    if (try? ChangeLog.decode(key: key, value: value)) == nil { damagedLogRecords += 1 }
                    return true
                }
                if damagedLogRecords > 0 {
                    report.structureProblem =
                        "\(damagedLogRecords) record(s) of the change log are damaged "
                        + "(observers may miss changes); the values are not affected"
                }
            }
        } catch  where Self.meansDamage(error) {
            report.structureProblem = (store.translate(error, key: nil) as? SharedDefaultsError)?.reason ?? "\(error)"
        } catch {
            throw store.translate(error, key: nil)
        }
        report.damagedKeys.sort { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        return (report, values)
    }

    private static func meansDamage(_ error: any Error) -> Bool {
        switch error {
        case is StructureDamage, is FileHeader.Truncated, is CorruptBytes: true
        case let error as LMDBError: error.meansCorruption
        default: false
        }
    }

    // MARK: Backup and restore

    /// Writes a consistent, compacted copy of the suite to a new file at `destination`, while other
    /// processes go on reading and writing.
    ///
    /// ```swift
    /// try defaults.backup(to: URL(fileURLWithPath: "/var/backups/chat.lmdb"))
    /// let copy = try SharedDefaults(fileURL: URL(fileURLWithPath: "/var/backups/chat.lmdb"))
    /// ```
    /// The copy is one committed snapshot (LMDB's `mdb_env_copyfd2` with `MDB_CP_COMPACT`: free pages
    /// left out), flushed to disk, with mode 0600. It opens as the suite named by its file name, and
    /// keeps this suite's origin id: restore from it (`restore(from:)`), or read it, but do not use it
    /// as a second live suite beside this one. The whole file's structure is checked first, so a
    /// damaged suite is refused rather than copied.
    /// - Parameter destination: A path ending in `.lmdb`, in an existing directory, where no file exists.
    /// - Throws: `SharedDefaultsError`: `notWritable` if a file exists at `destination` (a backup never
    ///   overwrites one) or it cannot be created, `invalidSuiteName` if its name does not end in
    ///   `.lmdb`, `corruptFile` if this suite is damaged. On failure no file is left at `destination`.
    public func backup(to destination: URL) throws {
        let target = try SuiteFile(destination)
        let location = try SuiteLocation(suiteName: target.suiteName, directory: target.directory)
        let path = location.path
        do {
            try store.environment.verifyStructure()
        } catch  where Self.meansDamage(error) {
            let reason = (store.translate(error, key: nil) as? SharedDefaultsError)?.reason ?? "\(error)"
            throw store.error(.corruptFile, key: nil, "\(reason); no backup was written")
        } catch {
            throw store.translate(error, key: nil)
        }

        let mode: mode_t = 0o600
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw backupFileError(errno, path: path) }
        var complete = false
        defer {
            close(fd)
            if !complete { unlink(path) }
        }
        fchmod(fd, mode)  // exactly 0600, whatever the umask
        do {
            try store.environment.copy(to: fd)
        } catch let error as LMDBError where !error.meansCorruption {
            throw store.error(.storageFailure, key: nil, "writing the backup \(path) failed: \(error); no backup was written")
        } catch {
            throw store.translate(error, key: nil)
        }
        let flushed = SystemCall.flush(fd)
        guard flushed == 0 else { throw backupFileError(flushed, path: path) }
        complete = true
        // The new directory entry, too, so that a crash does not lose a backup that was reported
        // written. The backup is whole and flushed already: a directory that cannot be opened (a
        // folder one may write but not read) or flushed (some file systems) does not undo it.
        _ = SystemCall.flushDirectory(location.directory)
    }

    private func backupFileError(_ code: Int32, path: String) -> SharedDefaultsError {
        switch code {
        case EEXIST:
            store.error(
                .notWritable,
                key: nil,
                "a file already exists at \(path); a backup never overwrites a file: remove it or choose another path"
            )
        case ENOENT, ENOTDIR:
            store.error(.notWritable, key: nil, "cannot create the backup \(path): its directory does not exist")
        case EACCES, EPERM:
            store.error(.notWritable, key: nil, "cannot create the backup \(path): permission denied")
        case EROFS:
            store.error(.notWritable, key: nil, "cannot create the backup \(path): the file system is read-only")
        default:
            store.error(
                .storageFailure,
                key: nil,
                "cannot write the backup \(path): \(String(cString: strerror(code))); no backup was written"
            )
        }
    }

    /// Replaces the whole content of this suite with that of the suite file at `source` (a backup,
    /// or any suite file), in one write transaction: every key of the source is set, every other key
    /// is removed, and observers see each change, as for any write. The source is verified first
    /// (see `verify()`), from the same snapshot its values are read from.
    ///
    /// ```swift
    /// try defaults.restore(from: URL(fileURLWithPath: "/var/backups/chat.lmdb"))
    /// ```
    /// Values take new stamps (this store's clock and origin), so sync sees them as new writes.
    /// - Throws: `SharedDefaultsError`: `corruptFile` if the source does not verify, `suiteNotFound` if
    ///   it does not exist, or what a write can throw (`valueTooLarge`, `storeFull`, …). On any error
    ///   nothing is changed.
    public func restore(from source: URL) throws {
        let (report, values): (VerifyReport, [(key: String, value: PropertyListValue)])
        do {
            (report, values) = try Self.withFile(at: source, configuration: .checkingEveryPage) { try $0.inspect(keepingValues: true) }
        } catch let error as SharedDefaultsError where error.code == .corruptFile {
            throw store.error(
                .corruptFile,
                key: nil,
                "the restore source \(error.path) cannot be opened: \(error.reason); nothing was changed"
            )
        }
        guard report.isHealthy else {
            var problems = report.structureProblem.map { [$0] } ?? []
            problems += report.damagedKeys.prefix(3).map { "key '\($0.key)': \($0.reason)" }
            if report.damagedKeys.count > 3 { problems.append("\(report.damagedKeys.count - 3) more damaged keys") }
            throw store.error(
                .corruptFile,
                key: nil,
                "the restore source \(source.path) does not verify (\(problems.joined(separator: "; "))); nothing was changed"
            )
        }
        try replaceAll(with: values)
    }

    /// Runs `body` on the suite in the file at `fileURL`, opened for it alone; the `-lock` and
    /// `-notify` files its open makes beside the file go again once it is closed (that they were
    /// missing says no process had the file open), so that checking or reading a copy leaves
    /// nothing beside it.
    private static func withFile<T>(at fileURL: URL, configuration: Configuration, _ body: (SharedDefaults) throws -> T) throws -> T {
        let path = fileURL.absoluteURL.path
        let sidecars: [String] = [path + "-lock", path + "-notify", path + "-safe"]
        let made = sidecars.filter { access($0, F_OK) != 0 }
        defer { for sidecar in made { unlink(sidecar) } }
        return try { try body(SharedDefaults(fileURL: fileURL, configuration: configuration)) }()  // closed when this returns
    }

    // MARK: Whole-suite edits

    /// Moves the value under `key` to `newKey`, in one transaction: as `set` of `newKey` (replacing
    /// any value it had, with a new stamp, unless `replacing` is false) and `removeValue` of `key`.
    /// Renaming a key to itself changes nothing. Keys are their bytes: `"caf\u{E9}"` and
    /// `"cafe\u{301}"` are two keys, and renaming one to the other moves the value.
    ///
    /// - Throws: `SharedDefaultsError` with code `keyNotFound` if no value is stored under `key`,
    ///   `keyExists` if `newKey` holds a value and `replacing` is false (nothing is changed in
    ///   either case), `invalidKey`, `corruptValue` if the value is damaged, or what a write can
    ///   throw.
    public func rename(_ key: String, to newKey: String, replacing: Bool = true) throws {
        try store.validate(key: key)
        try store.validate(key: newKey)
        try store.validate(newKey: newKey)
        try write { tx in
            guard let value = try tx.value(forKey: key) else {
                throw store.error(.keyNotFound, key: key, "no value is stored under this key; nothing was changed")
            }
            guard !newKey.isSameName(as: key) else { return }
            if !replacing, try tx.value(forKey: newKey) != nil {
                throw store.error(.keyExists, key: newKey, "a value is stored under this key already; nothing was changed")
            }
            try tx.set(value, forKey: newKey)
            try tx.removeValue(forKey: key)
        }
    }

    /// Makes `values` the whole content of the suite, in one transaction: every key of `values` is
    /// set and every other stored key removed (each change logged, as for any write).
    ///
    /// A `[String: PropertyListValue]` holds one of two canonically equivalent keys (`"caf\u{E9}"`,
    /// `"cafe\u{301}"`), which the suite keeps as two: to give both, use `replaceAll(with:)` with
    /// entries.
    public func replaceAll(with values: [String: PropertyListValue]) throws {
        try replaceAll(with: values.map { (key: $0.key, value: $0.value) })
    }

    /// Makes `entries` the whole content of the suite, in one transaction: every key of `entries`
    /// is set and every other stored key removed (each change logged, as for any write). Keys are
    /// their bytes: `"caf\u{E9}"` and `"cafe\u{301}"` are two keys, both kept.
    ///
    /// ```swift
    /// try copy.replaceAll(with: try original.storedValues())
    /// ```
    /// - Throws: `SharedDefaultsError`: `invalidKey` for a key given twice (the same bytes), or what a
    ///   write can throw. On any error nothing is changed.
    public func replaceAll(with entries: [(key: String, value: PropertyListValue)]) throws {
        var given: [ExactName: PropertyListValue] = [:]
        given.reserveCapacity(entries.count)
        for (key, value) in entries where given.updateValue(value, forKey: key.exact) != nil {
            throw store.error(.invalidKey, key: key, "the key is given twice; nothing was changed")
        }
        try write { tx in
            for key in try tx.keys where given[key.exact] == nil { try tx.removeValue(forKey: key) }
            for (key, value) in given.sorted(by: { $0.key < $1.key }) { try tx.set(value, forKey: key.text) }
        }
    }

    /// Every stored key and value, in key order, from one snapshot; registered defaults are not
    /// included.
    ///
    /// - Throws: `SharedDefaultsError` with code `corruptValue` (naming the key) if a value is damaged.
    public func storedValues() throws -> [(key: String, value: PropertyListValue)] {
        try read { tx in
            var entries: [(key: String, value: PropertyListValue)] = []
            try tx.forEachRecord { key, record in entries.append((key, try record.get().value)) }
            return entries
        }
    }
}

extension SharedDefaults.Configuration {
    /// The default configuration, except that opening checks the structure of every page: for files
    /// opened to be verified or restored from, which LMDB must not follow before they are checked
    /// (whatever the sidecar's verified-state record says).
    fileprivate static var checkingEveryPage: Self {
        var configuration = Self()
        configuration.structureCheckLimit = .max
        configuration.trustsVerifiedState = false
        return configuration
    }
}

/// A suite's data file named by its path: `<directory>/<suiteName>.lmdb`.
private struct SuiteFile {
    let directory: URL
    let suiteName: String

    init(_ url: URL) throws {
        let absolute = url.absoluteURL
        try self.init(name: absolute.lastPathComponent, directory: absolute.deletingLastPathComponent())
    }

    init(name: String, directory: URL) throws {
        let suffix = "." + SuiteLocation.fileExtension
        guard name.utf8.count > suffix.utf8.count, name.utf8.reversed().starts(with: suffix.utf8.reversed()) else {
            throw SharedDefaultsError(
                .invalidSuiteName,
                suite: name,
                path: directory.path + "/" + name,
                "a suite's file name ends in \(suffix); this one does not"
            )
        }
        self.directory = directory
        self.suiteName = String(decoding: name.utf8.dropLast(suffix.utf8.count), as: UTF8.self)
    }
}

extension SuiteLocation {
    /// Throws `suiteNotFound` unless the suite's data file exists (and other errors if it cannot be
    /// examined or is not a regular file). Creates nothing.
    fileprivate func requireExistingFile() throws {
        var st = stat()
        guard stat(path, &st) == 0 else {
            let code = errno
            switch code {
            case ENOENT, ENOTDIR:
                throw SharedDefaultsError(
                    .suiteNotFound,
                    suite: suiteName,
                    path: path,
                    "the suite does not exist (no such file); nothing was created"
                )
            case EACCES, EPERM:
                throw SharedDefaultsError(
                    .notWritable,
                    suite: suiteName,
                    path: path,
                    "permission denied: the suite's directory cannot be searched by this user"
                )
            default:
                throw SharedDefaultsError(
                    .storageFailure,
                    suite: suiteName,
                    path: path,
                    "cannot examine the suite's file: \(String(cString: strerror(code)))"
                )
            }
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw SharedDefaultsError(.corruptFile, suite: suiteName, path: path, "not a suite file: it is not a regular file")
        }
        guard st.st_size > 0 else {
            // LMDB would make an empty file a new suite; opening an existing suite creates nothing.
            throw SharedDefaultsError(.corruptFile, suite: suiteName, path: path, "not a suite file: the file is empty; it was left unchanged")
        }
    }
}
