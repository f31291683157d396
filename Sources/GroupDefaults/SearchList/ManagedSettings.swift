import Foundation
import GroupDefaultsWire
import Logging
internal import PropertyListFormats
import Synchronization
import SystemCalls

/// The values an administrator forces for one suite: read by every process, above the suite (and
/// above the argument domain) in the search list, written by no program.
///
/// Two files, either may be missing, both in any of the four property-list formats (XML, binary,
/// old-style text, typed JSON; detected from the content), each a dictionary of keys and values:
/// - `<directory>/<suite>.plist`, for every user;
/// - `<directory>/users/<user name>/<suite>.plist`, for one user, winning key by key.
///
/// `directory` is `/etc/groupdefaults/managed` unless `$GROUPDEFAULTS_MANAGED_DIR` (or
/// `Configuration.managedDirectory`) names another. A file is used whole or not at all: one that
/// does not parse, is not a dictionary, is writable by anyone but its owner (mode `g+w` or `o+w`),
/// belongs to another user than root or the directory's owner, or holds a key or value the suite
/// could not store, is ignored, with one line in the log naming the file and why (once per version
/// of the file).
///
/// Locks are an administrator's policy that cooperating programs follow, as dconf's are: the user
/// owns the suite's file and the processes that read it, so they are not a security boundary.
///
/// One per directory and suite in a process (`for(directory:suiteName:)`). Reads look at the files
/// again at most every 100 ms (two `stat`s); while something observes the suite, a watch on the
/// directories tells at once (`ManagedWatch`).
final class ManagedSettings: Sendable {
    /// A managed value and the file that gives it.
    struct Entry: Sendable, Equatable {
        let value: PropertyListValue
        let file: String
    }

    /// The default directory of managed files.
    static let systemDirectory = "/etc/groupdefaults/managed"
    /// How long a read trusts what it last found in the files.
    static let freshness: UInt64 = 100_000_000

    let directory: String
    let suiteName: String
    /// The two files, most general first.
    let files: [String]
    private let state: Mutex<State>
    /// When a look at the files last found nothing managed (0: something is, or no look yet): a
    /// read within `freshness` of it answers without the lock.
    private let emptySince = Atomic<UInt64>(0)
    private static let logger = Logger(label: "GroupDefaults")

    /// The keys whose managed value changed, with the entries before and after.
    typealias Changed = [ExactName: (old: Entry?, new: Entry?)]

    private struct State {
        /// Told of every change found, by whoever looks at the files (a read or the watch).
        var listeners: [UInt64: @Sendable (Changed) -> Void] = [:]
        var nextListener: UInt64 = 0
        /// The watch on the directories, while anyone listens.
        var watch: (any ChangeSignal)?
        /// What each file gave, by its identity when read (nil: missing or ignored).
        var loaded: [String: (identity: FileVersion, entries: [ExactName: Entry])] = [:]
        var merged: [ExactName: Entry] = [:]
        /// Why a file present was ignored, by path.
        var problems: [String: String] = [:]
        var checkedAt: UInt64 = 0
        var checkedOnce = false
    }

    /// By directory and suite name, each as its bytes: two suites whose names Swift's `==` takes
    /// for one (`café` and `cafe\u{301}`) have two files and two settings.
    private static let all = Mutex<[ExactName: ManagedSettings]>([:])

    /// The process's managed settings of `suiteName` under `directory`.
    static func `for`(directory: String, suiteName: String) -> ManagedSettings {
        all.withLock { all in
            let id = (directory + "\u{0}" + suiteName).exact
            if let known = all[id] { return known }
            let made = ManagedSettings(directory: directory, suiteName: suiteName)
            all[id] = made
            return made
        }
    }

    private init(directory: String, suiteName: String) {
        self.directory = directory
        self.suiteName = suiteName
        let user = Self.userName.map { "\(directory)/users/\($0)/\(suiteName).plist" }
        files = ["\(directory)/\(suiteName).plist"] + (user.map { [$0] } ?? [])
        state = Mutex(State())
    }

    /// This process's user name (for the per-user file); nil if the system does not know it.
    static let userName: String? = {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(geteuid(), &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else { return nil }
        return String(cString: name)
    }()

    /// The managed values now (looking at the files again if the last look is over 100 ms old).
    var current: [ExactName: Entry] {
        let now = Self.monotonicNanoseconds()
        let cached = state.withLock { state -> [ExactName: Entry]? in
            state.checkedOnce && now &- state.checkedAt < Self.freshness ? state.merged : nil
        }
        if let cached { return cached }
        return refresh().merged
    }

    /// The managed entry of `key`, if any.
    func entry(forKey key: ExactName) -> Entry? {
        let empty = emptySince.load(ordering: .relaxed)
        if empty != 0, Self.monotonicNanoseconds() &- empty < Self.freshness { return nil }
        let values = current
        return values.isEmpty ? nil : values[key]
    }

    /// Looks at the files now; tells the listeners what changed and returns the merged values.
    @discardableResult
    func refresh() -> (merged: [ExactName: Entry], changed: Changed) {
        let identities = files.map(FileVersion.init(file:))
        let (merged, changed, listeners) = state.withLock { state -> ([ExactName: Entry], Changed, [@Sendable (Changed) -> Void]) in
            let (merged, changed) = reload(&state, identities)
            emptySince.store(merged.isEmpty ? max(state.checkedAt, 1) : 0, ordering: .relaxed)
            return (merged, changed, changed.isEmpty ? [] : Array(state.listeners.values))
        }
        for listener in listeners { listener(changed) }
        return (merged, changed)
    }

    /// Calls `listener` with every change of the managed values from now on (found by a read, or
    /// at once by a watch on the directories), until `stopListening` with the returned id.
    func listen(_ listener: @escaping @Sendable (Changed) -> Void) -> UInt64 {
        _ = current  // the files as they are now are the start, not a change
        let id = state.withLock { state in
            state.nextListener += 1
            state.listeners[state.nextListener] = listener
            return state.nextListener
        }
        startWatchIfNeeded()
        return id
    }

    func stopListening(_ id: UInt64) {
        let ending = state.withLock { state -> (any ChangeSignal)? in
            state.listeners[id] = nil
            guard state.listeners.isEmpty else { return nil }
            defer { state.watch = nil }
            return state.watch
        }
        ending?.stop()
    }

    /// Watches the directories of the files (inotify), or, where that is not possible (a directory
    /// missing), looks at the files every second.
    private func startWatchIfNeeded() {
        let needed = state.withLock { $0.watch == nil && !$0.listeners.isEmpty }
        guard needed else { return }
        let directories = Set(files.map { ($0 as NSString).deletingLastPathComponent } + [directory + "/users"])
        let refresh: @Sendable () -> Void = { [weak self] in self?.refresh() }
        var watch: (any ChangeSignal)? = InotifySignal(
            directories: directories.sorted().filter { FileIdentity(path: $0) != nil },
            onSignal: refresh,
            cleanup: {}
        )
        if watch == nil || files.contains(where: { FileIdentity(path: ($0 as NSString).deletingLastPathComponent) == nil }) {
            watch?.stop()
            let probe: @Sendable () -> UInt64? = {
                refresh()
                return 0
            }
            watch = try? PollingSignal(interval: .seconds(1), probe: probe, onSignal: {}, cleanup: {})
        }
        let extra = state.withLock { state -> (any ChangeSignal)? in
            guard state.watch == nil, !state.listeners.isEmpty else { return watch }
            state.watch = watch
            return nil
        }
        extra?.stop()
    }

    private func reload(_ state: inout State, _ identities: [FileVersion]) -> ([ExactName: Entry], Changed) {
        var anyChanged = !state.checkedOnce
        for (file, identity) in zip(files, identities) where state.loaded[file]?.identity != identity || state.loaded[file] == nil {
            let (entries, problem) = load(file, identity)
            state.loaded[file] = (identity, entries)
            state.problems[file] = problem
            anyChanged = true
        }
        state.checkedAt = Self.monotonicNanoseconds()
        state.checkedOnce = true
        guard anyChanged else { return (state.merged, [:]) }
        var merged: [ExactName: Entry] = [:]
        for file in files { merged.merge(state.loaded[file]?.entries ?? [:]) { _, later in later } }
        var changed: Changed = [:]
        for key in Set(merged.keys).union(state.merged.keys) where merged[key] != state.merged[key] {
            changed[key] = (state.merged[key], merged[key])
        }
        state.merged = merged
        return (merged, changed)
    }

    /// The files ignored at the last look, and why.
    var ignoredFiles: [(file: String, reason: String)] {
        _ = current
        return state.withLock { state in state.problems.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    /// The largest managed file read (managed settings are a handful of keys).
    static let maximumFileBytes = 1 << 20
    /// The most keys one managed file may hold.
    static let maximumKeys = 1000

    /// The entries of one file, or none (with one line in the log) if it cannot be used whole.
    ///
    /// The file is opened without following a symbolic link, and its owner, mode and size are
    /// those of the descriptor read (`fstat`), so that a file swapped between the look and the read
    /// is not read under another's checks; each directory from the managed directory down to the
    /// file must be writable by its owner only, so that nobody else can put a file there.
    private func load(_ file: String, _ identity: FileVersion) -> (entries: [ExactName: Entry], problem: String?) {
        guard identity.file != nil else { return ([:], nil) }
        func ignored(_ reason: String) -> ([ExactName: Entry], String?) {
            Self.logger.error("managed settings file \(file) ignored: \(reason)")
            return ([:], reason)
        }
        let root = FileIdentity(path: directory)
        let owners: Set<UInt32> = [0, root?.owner ?? 0]
        if let problem = directoryProblem(of: file, owners: owners) { return ignored(problem) }
        let fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else {
            return ignored(
                errno == ELOOP
                    ? "a symbolic link (managed files are read only as regular files)" : "cannot be opened: \(String(cString: strerror(errno)))"
            )
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return ignored("cannot be read: \(String(cString: strerror(errno)))") }
        guard info.st_mode & S_IFMT == S_IFREG else { return ignored("not a regular file") }
        let mode = UInt32(info.st_mode)
        if mode & 0o022 != 0 {
            return ignored("writable by others than its owner (mode \(String(mode & 0o777, radix: 8)); chmod go-w)")
        }
        if !owners.contains(UInt32(info.st_uid)) {
            return ignored("owned by user \(info.st_uid), neither root nor the owner of \(directory)")
        }
        guard let data = readAll(fd, limit: Self.maximumFileBytes) else {
            return ignored("larger than \(Self.maximumFileBytes / 1024) KiB, or cannot be read")
        }
        let decoded: PropertyListTopLevel
        do {
            decoded = try PropertyListValue.decodeSuite(propertyListData: data)
        } catch {
            return ignored("\(error)")
        }
        guard case .entries(let entries) = decoded else { return ignored("not a dictionary of keys and values") }
        guard entries.count <= Self.maximumKeys else {
            return ignored("holds \(entries.count) keys; a managed file holds at most \(Self.maximumKeys)")
        }
        var result: [ExactName: Entry] = [:]
        for (key, value) in entries {
            do {
                try SharedDefaults.checkStorable(value, forKey: key, suiteName: suiteName)
            } catch let error as SharedDefaultsError {
                return ignored("key \(key.debugDescription): \(error.reason)")
            } catch {
                return ignored("key \(key.debugDescription): \(error)")
            }
            result[key.exact] = Entry(value: value, file: file)
        }
        return (result, nil)
    }

    /// Why a directory between the managed directory and `file` (both included) lets someone else
    /// than `owners` put a file there, or nil: each must be a directory owned by one of `owners`,
    /// writable by its owner only (or sticky, as /tmp is, where nobody replaces another's file).
    private func directoryProblem(of file: String, owners: Set<UInt32>) -> String? {
        var folder = (file as NSString).deletingLastPathComponent
        while true {
            var info = stat()
            guard lstat(folder, &info) == 0 || stat(folder, &info) == 0 else { return "\(folder) cannot be read" }
            if folder != directory, info.st_mode & S_IFMT == S_IFLNK { return "\(folder) is a symbolic link" }
            if folder == directory, info.st_mode & S_IFMT == S_IFLNK, stat(folder, &info) != 0 { return "\(folder) cannot be read" }
            let mode = UInt32(info.st_mode)
            if mode & 0o022 != 0 && mode & UInt32(S_ISVTX) == 0 {
                return
                    "the folder \(folder) is writable by others than its owner (mode \(String(mode & 0o777, radix: 8))): anyone could put a file there"
            }
            if !owners.contains(UInt32(info.st_uid)) && folder != directory {
                return "the folder \(folder) is owned by user \(info.st_uid), neither root nor the owner of \(directory)"
            }
            if folder == directory || folder.count <= directory.count { return nil }
            folder = (folder as NSString).deletingLastPathComponent
        }
    }

    /// At most `limit` bytes of `fd`; nil if it holds more, or a read fails.
    private func readAll(_ fd: Int32, limit: Int) -> Data? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { bytes in SystemCall.retryingEINTR { read(fd, bytes.baseAddress, bytes.count) } }
            if count < 0 { return nil }
            if count == 0 { return data }
            data.append(contentsOf: buffer[..<count])
            if data.count > limit { return nil }
        }
    }

    static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC_COARSE, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}

/// A managed file's version: its own identity and its folder's (a folder's mode or owner fixed
/// makes the file read again).
struct FileVersion: Sendable, Equatable {
    let file: FileIdentity?
    let folder: FileIdentity?

    init(file: String) {
        self.file = FileIdentity(path: file)
        folder = FileIdentity(path: (file as NSString).deletingLastPathComponent)
    }
}

/// What tells one version of a file from another: a file replaced, rewritten or re-moded has
/// another.
struct FileIdentity: Sendable, Equatable {
    let device: UInt64, inode: UInt64, size: Int64, modified: Int64, changed: Int64
    let mode: UInt32, owner: UInt32

    /// nil if nothing is at `path`.
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        modified = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        changed = Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec)
        mode = UInt32(info.st_mode)
        owner = UInt32(info.st_uid)
    }
}
