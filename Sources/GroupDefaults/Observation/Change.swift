extension SharedDefaults {
    /// One committed change of a suite, from any process, as an observer receives it.
    public struct Change: Sendable, Hashable, CustomStringConvertible {
        /// What happened: a key set or removed, the suite cleared, a gap in what the observer saw, or
        /// the suite put back to its last durability point.
        public enum Kind: String, Sendable, Hashable, CaseIterable {
            /// `key` was set; `value` is what it holds now.
            case set
            /// `key` was removed.
            case removed
            /// Every key was removed (`removeAll`).
            case cleared
            /// The observer fell behind the changes the suite retains (`Configuration.logRetention`)
            /// and missed some: re-read whatever it cares about. The feed continues from the current
            /// end of the log. `sequence` is that end; `key` is empty.
            case reset
            /// After an operating-system crash or power loss the suite was put back to its last
            /// durability point (see `Configuration.Durability.processCrashSafe`): changes made after
            /// it are gone. Re-read whatever you care about. `key` is empty.
            case restored
        }

        /// The change's position in the suite's log: strictly increasing, in commit order.
        public let sequence: UInt64
        /// What happened; `key` and `value` are read according to it.
        public let kind: Kind
        /// The key changed (empty for `cleared`, `reset` and `restored`).
        public let key: String
        /// For `set`, the value this change wrote, also when the key changed again since; nil for
        /// the other kinds.
        ///
        /// The log keeps a change's value with it when the value takes at most `keptValueLimit`
        /// bytes encoded, for as long as it keeps the change (`Configuration.logRetention`). For a
        /// larger value (or a change an earlier version logged), `isValueNotKept` is true and
        /// `value` is what the key held when the observer read the change: the change's own value
        /// unless the key changed again, nil if it was removed since.
        public let value: PropertyListValue?
        /// Whether this `set` change's own value was not kept in the log (it took more than
        /// `keptValueLimit` bytes encoded), so that `value` is the key's value when the change was
        /// read.
        public let isValueNotKept: Bool
        /// The store (origin id) that made the change: this one, another process's handle on this
        /// one, or, for a change applied by sync, the device that wrote it.
        public let origin: UInt64
        /// The change's HLC timestamp on this store's clock (for a change applied by sync, the time it
        /// was applied, after the remote write's own HLC).
        public let hlc: HLC
        /// Whether sync applied the change from the server (another device's write), rather than a
        /// process on this machine making it.
        public let isRemote: Bool
        /// Whether this remote change replaced a local value (or deletion) that had not reached the
        /// server, or that predated sync on a joining device: the replaced one is kept in the
        /// suite's conflict journal (`SharedDefaults.conflicts()`).
        public let isConflict: Bool
        /// Where the change came from: this process, another process on this device, or another
        /// device through sync. (A process remembers its last 4,096 commits to a suite: one of its
        /// own changes replayed from further back, with `since`, is reported as another process's.)
        public let source: Source
        /// The domain of the search list the change was made in: `.suite` for the suite's own
        /// changes (its log), another for a change of a managed settings file, the argument
        /// domain, an added suite, the global domain or the registered defaults that changes what
        /// the key reads (see `SharedDefaults.Domain`). For those, `kind` and `value` say what the
        /// key reads now (`set` with another domain's value when a managed file lets go of a key
        /// the suite holds; `removed` when no domain holds it). They are not in the suite's log:
        /// their `sequence` is the log's end when they were seen, `origin` and `hlc` are 0, and
        /// `since` does not replay them.
        public internal(set) var domain: SharedDefaults.Domain = .suite

        /// The largest value, in bytes encoded (about its size as UTF-8 text, for a string), that the
        /// log keeps with its change: 4 KiB, so that the log's values take at most
        /// `logRetention` × 4 KiB (40 MB at the default) however large the values are.
        public static let keptValueLimit = 4096

        /// Where a change came from.
        public enum Source: Sendable, Hashable, CustomStringConvertible {
            /// A write of this process (through any handle on the suite).
            case thisProcess
            /// A write of another process on this device (an extension, the CLI, a daemon).
            case anotherProcess
            /// A write of another device, applied by sync; `deviceID` is that device's store origin
            /// (its `device_id` on the server, and `Change.origin`).
            case anotherDevice(deviceID: UInt64)
            /// A write of a device of another account, applied by sync: in a suite shared between
            /// accounts, `account` is the account the server named for that device's writes, and
            /// `deviceID` its store origin (as for `anotherDevice`).
            case anotherAccount(account: String, deviceID: UInt64)

            public var description: String {
                switch self {
                case .thisProcess: "this process"
                case .anotherProcess: "another process"
                case .anotherDevice(let deviceID): "device \(deviceID)"
                case .anotherAccount(let account, let deviceID): "device \(deviceID) of account \(account)"
                }
            }
        }

        public var description: String {
            let shown = value.map { "\($0)" } ?? "nil"
            let line: String
            switch kind {
            case .set: line = "\(sequence) set \(key) = \(shown)"
            case .removed: line = "\(sequence) removed \(key)"
            case .cleared: line = "\(sequence) cleared"
            case .reset: line = "\(sequence) reset"
            case .restored: line = "\(sequence) restored"
            }
            return domain == .suite ? line : line + " (\(domain))"
        }
    }
}
