/// Why a suite could not be opened, read or written, naming the suite and its file.
///
/// Match on the code:
/// ```swift
/// do { try defaults.write { try $0.set(.string(long), forKey: key) } }
/// catch SharedDefaultsError.Code.valueTooLarge { … }
/// ```
public struct SharedDefaultsError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is; stable, for code to match on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, the same as its constant's (`"valueTooLarge"`).
        public let rawValue: String
        init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The suite name is empty, `.` or `..`, contains `/` or NUL, or is too long for a file name.
        public static let invalidSuiteName = Code("invalidSuiteName")
        /// The suite's file does not exist, and the call opens only existing suites
        /// (`init(existingSuiteName:)`, `init(fileURL:)`); nothing was created.
        public static let suiteNotFound = Code("suiteNotFound")
        /// No value is stored under the key, and the call needs one (`rename`).
        public static let keyNotFound = Code("keyNotFound")
        /// The key a call must not replace already holds a value (`rename(_:to:replacing:)` with
        /// `replacing: false`); nothing was changed.
        public static let keyExists = Code("keyExists")
        /// The key is empty or longer than LMDB's key limit (511 bytes of UTF-8).
        public static let invalidKey = Code("invalidKey")
        /// The value is of a type a suite cannot store (not a property-list type).
        public static let unsupportedValue = Code("unsupportedValue")
        /// The encoded value is larger than `Configuration.maximumValueSize`.
        public static let valueTooLarge = Code("valueTooLarge")
        /// The suite file is not an LMDB file, is truncated, or its structure is damaged.
        public static let corruptFile = Code("corruptFile")
        /// A stored value does not decode (damaged bytes); the other keys are unaffected.
        public static let corruptValue = Code("corruptValue")
        /// The suite was written by a newer version of GroupDefaults.
        public static let unsupportedFormat = Code("unsupportedFormat")
        /// The directory cannot be created, or the suite's files cannot be created or written
        /// (permissions, a read-only file system).
        public static let notWritable = Code("notWritable")
        /// The suite reached `Configuration.maximumMapSize`; nothing already stored was lost.
        public static let storeFull = Code("storeFull")
        /// A read-only transaction (`read`) was asked to write.
        public static let readOnlyTransaction = Code("readOnlyTransaction")
        /// A transaction was used outside its closure or on another thread, or a write was started
        /// inside a `read` on the same thread (LMDB allows one transaction per thread).
        public static let transactionMisuse = Code("transactionMisuse")
        /// The file system has no room for the suite to grow; nothing stored was lost, and the write
        /// that needed the room changed nothing.
        public static let diskFull = Code("diskFull")
        /// Every reader slot of the suite's lock file is taken (`Configuration.maximumReaders`, one per
        /// thread of every process that reads the suite).
        public static let tooManyReaders = Code("tooManyReaders")
        /// This handle was opened before the process forked; a child must open the suite again.
        public static let usedAfterFork = Code("usedAfterFork")
        /// The handle asks for file settings that differ from those the suite is already open with in
        /// this process (`maximumValueSize`, `logRetention`, `changeDetection`, map limits, file
        /// sharing, reader slots).
        public static let conflictingConfiguration = Code("conflictingConfiguration")
        /// A remote change carries a timestamp too far ahead of this machine's clock (sync). Applying
        /// pulled entries no longer throws it: such an entry is refused on its own and kept in the
        /// conflict journal (`Conflict.refusal`); the code stays for code that matches it.
        public static let clockSkew = Code("clockSkew")
        /// The conflict journal holds no replaced value of the key (or no entry of that id) to restore.
        public static let conflictNotFound = Code("conflictNotFound")
        /// The key is forced by an administrator's managed settings file: a write to it was stored,
        /// but reads give the managed value (`objectIsForced(forKey:)`). Reported by the setters in
        /// `lastError`; not an error of the write itself.
        public static let managedKey = Code("managedKey")
        /// On a member's device, the suite's owner pinned the key: a write to it was stored, but
        /// sync does not push it and puts the owner's value back (`pinnedKeys`). Reported by the
        /// setters in `lastError`.
        public static let pinnedKey = Code("pinnedKey")
        /// Any other failure of the file system or of LMDB.
        public static let storageFailure = Code("storageFailure")
    }

    /// What kind of failure this is: match on it rather than on the message.
    public let code: Code
    /// The name of the suite concerned.
    public let suiteName: String
    /// The suite's file (or, for a directory problem, the directory).
    public let path: String
    /// The key concerned, if any.
    public let key: String?
    /// What went wrong, in words.
    public let reason: String

    init(_ code: Code, suite: String, path: String, key: String? = nil, _ reason: String) {
        self.code = code
        self.suiteName = suite
        self.path = path
        self.key = key
        self.reason = reason
    }

    public var description: String {
        var text = "suite '\(suiteName)' (\(path))"
        if let key { text += ", key '\(key.count > 80 ? key.prefix(77) + "..." : key)'" }
        return text + ": " + reason
    }
}

extension SharedDefaultsError.Code {
    /// Lets `catch SharedDefaultsError.Code.invalidKey` match.
    public static func ~= (code: Self, error: any Error) -> Bool {
        (error as? SharedDefaultsError)?.code == code
    }
}
