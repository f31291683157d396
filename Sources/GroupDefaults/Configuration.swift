import Foundation
internal import GroupDefaultsLMDB
import Logging

extension SharedDefaults {
    /// How a suite is opened and written.
    ///
    /// Per handle: `durability`, `logger` and `onError`. Per file, within one process: every other
    /// setting but `structureCheckLimit` (which only governs the check made when the file is first
    /// opened). A second handle on a suite that this process already has open must agree with it on
    /// those, or it fails with `conflictingConfiguration`, naming the setting. Across processes each
    /// applies to what that process does: `maximumMapSize` caps the growth this process makes (it
    /// adopts a larger map another process made), `maximumValueSize` the values it writes, and
    /// `logRetention` the trimming its writes do.
    public struct Configuration: Sendable {
        /// When a committed write is safe.
        public enum Durability: Sendable, Hashable {
            /// Every committed write is in the operating system's page cache, shared by all processes,
            /// the moment `set` (or `write`) returns: it survives the crash or `kill -9` of any process,
            /// the writer included. An operating-system crash or power loss never damages the suite:
            /// it opens as it was at its last durability point, which is at most `durabilityInterval`
            /// (1 second) after a write (and at `synchronize()`, and when the last handle of a process
            /// closes or the process exits); writes after that point are lost. A suite put back that
            /// way says so once: in the log, in `info()` (`Info.lastRestore`) and to observers
            /// (`Change.Kind.restored`); a synced suite then reads the server's state again.
            case processCrashSafe
            /// Each commit is flushed to disk (data pages, then the meta page) and is a durability
            /// point before `set` or `write` returns: committed writes survive power loss and
            /// operating-system crashes, on disks that honour flushes. Costs a flush and a copy of the
            /// suite per commit (the copy grows with the suite).
            case fsyncEveryCommit
        }

        /// Who may open the suite's files.
        public enum FileSharing: Sendable, Hashable {
            /// Files 0600, new directories 0700: only the owning user.
            case owner
            /// Files 0660, new directories 0770: the owning user and group, for processes of one app
            /// that run as different users of one group.
            case group

            var fileMode: UInt32 { self == .owner ? 0o600 : 0o660 }
            var directoryMode: UInt32 { self == .owner ? 0o700 : 0o770 }
        }

        /// How this process learns that another process changed the suite.
        public enum ChangeDetection: Sendable, Hashable {
            /// inotify on the suite's sidecar file (Linux); polling where inotify is not available.
            case automatic
            /// Look at the suite's change log every `interval` (for file systems that do not
            /// report changes, such as some network file systems).
            case polling(interval: Duration)
        }

        /// When a committed write is safe: `.processCrashSafe` (the default) or `.fsyncEveryCommit`.
        /// Per handle: two handles on one suite may choose differently.
        public var durability: Durability = .processCrashSafe
        /// With `.processCrashSafe`, how soon after a commit of this handle the suite reaches a
        /// durability point (a flushed copy that survives a power cut): at most this long. Shorter
        /// loses less in a power cut and copies the suite more often while it is written.
        public var durabilityInterval: Duration = .seconds(1)
        /// The modes of the suite's files and directory when this process creates them: `.owner`
        /// (0600 and 0700, the default) or `.group` (0660 and 0770). Existing files keep their mode.
        public var fileSharing: FileSharing = .owner
        /// The map size a new suite starts with (the file is sparse up to it).
        public var initialMapSize: Int = 1 << 20
        /// The map grows on demand, doubling, up to this size; beyond it writes that store values fail
        /// with `storeFull`. Writes that only remove values may use a reserve beyond it (a sixteenth of
        /// it, between 256 KiB and 16 MiB), so that a full suite can always be emptied.
        public var maximumMapSize: Int = 1 << 30
        /// The largest encoded value a key may hold; larger ones fail with `valueTooLarge`.
        public var maximumValueSize: Int = 4 << 20
        /// Reader slots in a new suite's lock file, shared by all processes (one per reading thread).
        public var maximumReaders: Int = 510
        /// Opening a suite checks the structure of every page in use (so that a damaged file is an
        /// error, not a crash inside LMDB) when those pages take at most this many bytes; larger
        /// suites open without the check. About 1 µs per 4 KiB page.
        public var structureCheckLimit: Int = 16 << 20
        /// How observers in this process are woken by other processes' commits.
        public var changeDetection: ChangeDetection = .automatic
        /// How many changes the change log keeps for observers that resume from a sequence number.
        public var logRetention: Int = 10_000
        /// Where failures of the non-throwing UserDefaults-style calls are logged; nil for a logger
        /// labelled "GroupDefaults" (made when first needed, off the cold-start path).
        public var logger: Logger?
        /// Called with every failure of a non-throwing call (`set`, `removeObject`, the getters),
        /// after it is logged and stored in `lastError`.
        public var onError: (@Sendable (SharedDefaultsError) -> Void)?
        /// The command line the argument domain is read from (`-key value` pairs, read before the
        /// suite; see `SharedDefaults.argumentDomain`): this process's, by default. Per handle. Give
        /// `[]` in a program whose own options look like pairs (a tool's `-v file`).
        public var arguments: [String] = CommandLine.arguments
        /// The directory of the managed settings files an administrator writes (see
        /// `objectIsForced(forKey:)`): `$GROUPDEFAULTS_MANAGED_DIR`, else
        /// `/etc/groupdefaults/managed`; nil reads none. Per handle.
        public var managedDirectory: String? = Self.defaultManagedDirectory

        /// `$GROUPDEFAULTS_MANAGED_DIR` if set and not empty, else `/etc/groupdefaults/managed`.
        public static var defaultManagedDirectory: String {
            if let given = getenv("GROUPDEFAULTS_MANAGED_DIR").map({ String(cString: $0) }), !given.isEmpty { return given }
            return ManagedSettings.systemDirectory
        }
        /// Milliseconds added to this machine's clock when the suite stamps a change (per file, the
        /// first handle's): lets tests run devices whose clocks disagree.
        package var clockOffsetMilliseconds: Int64 = 0
        /// Whether opening may skip the walk of every page for a file state the verified-state record
        /// in the sidecar vouches for (see `VerifiedState` in GroupDefaultsLMDB); off for files opened
        /// to be verified or restored from, which are always walked.
        var trustsVerifiedState = true
        /// How the suite's commits are flushed to disk; nil (always, but in a test of a failing
        /// disk): LMDB's own flush. Per file, the first handle's.
        var diskFlush: (any DiskFlush)?

        /// A configuration with every setting at its default.
        ///
        /// ```swift
        /// var configuration = SharedDefaults.Configuration()
        /// configuration.durability = .fsyncEveryCommit
        /// configuration.fileSharing = .group
        /// let defaults = try SharedDefaults(suiteName: "group.com.example.chat", configuration: configuration)
        /// ```
        public init() {}

        func environmentOptions(lockFilePath: String) -> EnvironmentOptions {
            EnvironmentOptions(
                databases: SuiteDatabase.names,
                readerTrees: SuiteDatabase.readerTrees,
                lockFilePath: lockFilePath,
                initialMapSize: initialMapSize,
                maximumMapSize: maximumMapSize,
                fileMode: fileSharing.fileMode,
                maximumReaders: UInt32(clamping: maximumReaders),
                structureCheckLimit: structureCheckLimit,
                verifiedStateOffset: trustsVerifiedState ? Sidecar.verifiedStateOffset : nil,
                diskFlush: diskFlush,
                durableCopyRecordOffset: Sidecar.bootRecordOffset
            )
        }

        /// The settings that hold for the suite's file in a whole process, with their values, in the
        /// order they are reported. Two handles on one suite in one process must agree on them.
        var fileSettings: [(name: String, value: String)] {
            [
                ("maximumValueSize", "\(maximumValueSize)"),
                ("logRetention", "\(logRetention)"),
                ("changeDetection", "\(changeDetection)"),
                ("maximumMapSize", "\(maximumMapSize)"),
                ("initialMapSize", "\(initialMapSize)"),
                ("maximumReaders", "\(maximumReaders)"),
                ("fileSharing", "\(fileSharing)"),
            ]
        }
    }
}
