import Foundation
internal import GroupDefaultsLMDB
import GroupDefaultsWire
import Logging
import Synchronization

/// A suite of settings shared by every process of one app, with the vocabulary of `UserDefaults`.
///
/// ```swift
/// // Host app, settings screen
/// let defaults = try SharedDefaults(suiteName: "group.com.example.chat")
/// defaults.set("ring.caf", forKey: "sound")
///
/// // Notification-service extension: another process, a moment later
/// let shared = try SharedDefaults(suiteName: "group.com.example.chat")
/// shared.string(forKey: "sound")      // "ring.caf": no restart, no synchronize()
/// ```
/// Each suite is one LMDB file. A write is visible to every process the moment the call returns;
/// writes from many processes and threads are serialised by LMDB's writer lock, and readers never
/// wait. The UserDefaults-style setters do not throw: a failure is logged, stored in `lastError` and
/// passed to `Configuration.onError`. `write`, `update` and `Transaction` throw, for code that must
/// know.
public final class SharedDefaults: Sendable {
    /// The suite's name.
    public let suiteName: String
    /// The suite's data file.
    public var fileURL: URL { URL(fileURLWithPath: store.path) }
    /// The settings this handle was opened with.
    public let configuration: Configuration

    let store: SuiteStore
    /// The domains this handle reads through besides its suite.
    let searchList: SearchList
    /// This handle's observers' changes of the other domains.
    let domainChanges: DomainChanges
    private let recentError = Mutex<SharedDefaultsError?>(nil)
    static let defaultLogger = Logger(label: "GroupDefaults")

    /// Opens (creating if needed) the suite `suiteName` in `directory`.
    ///
    /// - Parameters:
    ///   - suiteName: A file name without extension, e.g. `group.com.example.chat`.
    ///   - directory: Where the suite's files live; by default `$GROUPDEFAULTS_DIR`, else
    ///     `$XDG_DATA_HOME/groupdefaults`, else `~/.local/share/groupdefaults`.
    ///   - configuration: How the suite is opened and written (`Configuration`): durability, file
    ///     sharing, map and value sizes, change detection, the logger.
    /// - Throws: `SharedDefaultsError` with code `invalidSuiteName`, `notWritable`, `corruptFile`,
    ///   `unsupportedFormat` or `storageFailure`. A damaged file is reported, never rewritten.
    public init(suiteName: String, directory: URL? = nil, configuration: Configuration = .init()) throws {
        let location = try SuiteLocation(suiteName: suiteName, directory: directory)
        self.suiteName = suiteName
        self.configuration = configuration
        let store = try SuiteStore.acquire(location, configuration: configuration)
        self.store = store
        do {
            let searchList = try SearchList(
                suiteName: suiteName,
                directory: URL(fileURLWithPath: location.directory, isDirectory: true),
                configuration: configuration
            )
            self.searchList = searchList
            domainChanges = DomainChanges(store: store, searchList: searchList)
        } catch {
            store.release()
            throw error
        }
        domainChanges.resolve { [weak self] key in self?.value(forKey: key) }
    }

    deinit {
        store.release()
    }

    /// The most recent failure of a non-throwing call on this handle, if any.
    public var lastError: SharedDefaultsError? {
        recentError.withLock { $0 }
    }

    private var syncsEveryCommit: Bool { configuration.durability == .fsyncEveryCommit }

    // MARK: Throwing API

    /// Runs `body` in one write transaction: all of its changes commit together when it returns,
    /// none if it throws. Other processes see all of them at once, or none.
    ///
    /// LMDB allows one writer at a time across all processes, so keep `body` short. It may run more
    /// than once if the file has to grow, so it should not have side effects other than through the
    /// transaction. Setters and getters of this suite called inside `body` on the same thread join
    /// the transaction.
    ///
    /// With `Configuration.durability` `.fsyncEveryCommit`, a commit whose flush to disk fails still
    /// stands (every process already sees it): the write does not throw, and the failed flush is
    /// reported like a failure of a non-throwing call (`lastError`, `Configuration.onError`), with code
    /// `storageFailure`.
    public func write<T>(_ body: (Transaction) throws -> T) throws -> T {
        try write(renewing: false, body)
    }

    /// `write`; with `renewing`, for this type's own bodies, which never let the transaction out,
    /// the store renews its spare transaction instead of making one (see `SuiteStore.write`).
    private func write<T>(renewing: Bool, _ body: (Transaction) throws -> T) throws -> T {
        try store.write(
            sync: syncsEveryCommit,
            durableWithin: configuration.durabilityInterval,
            renewing: renewing,
            flushFailed: { report($0) },
            body
        )
    }

    /// Runs `body` on a consistent snapshot of the suite; the transaction is read-only.
    public func read<T>(_ body: (Transaction) throws -> T) throws -> T {
        try store.readTransaction(body)
    }

    /// Atomically replaces the value under `key` with `transform(current)`, under LMDB's writer lock:
    /// processes incrementing one counter together never lose an increment. Returning nil removes
    /// the key. Returns the new value.
    ///
    /// ```swift
    /// try defaults.update("unread") { old in .integer((old?.intValue ?? 0) + 1) }
    /// ```
    @discardableResult
    public func update(_ key: String, _ transform: (PropertyListValue?) throws -> PropertyListValue?) throws -> PropertyListValue? {
        try write(renewing: true) { tx in
            let new = try transform(tx.value(forKey: key))
            if let new { try tx.set(new, forKey: key) } else { try tx.removeValue(forKey: key) }
            return new
        }
    }

    /// The value `key` reads as through the search list: a managed value, else the argument
    /// domain's, else the value stored in the suite, else an added suite's, else the global
    /// domain's, else the registered default, else nil (`resolvedValue(forKey:)` says which). A
    /// value that fails to decode is skipped and reported (`lastError`).
    public func value(forKey key: String) -> PropertyListValue? {
        resolvedValue(forKey: key)?.value
    }

    func storedValue(forKey key: String) throws -> PropertyListValue? {
        try store.validate(key: key)
        return try withKeyBytes(key) { k in
            do {
                return try store.read { txn in
                    guard let raw = try txn.get(.values, k) else { return nil }
                    return try StoredRecord.decode(raw).value
                }
            } catch {
                throw store.translate(error, key: key)
            }
        }
    }

    // MARK: Async API

    /// `write`, for Swift concurrency: the transaction runs on a thread of its own, never on the
    /// cooperative pool, because it may wait for LMDB's writer lock (held by another process).
    ///
    /// ```swift
    /// try await defaults.write { tx in try tx.set(.integer(3), forKey: "badge") }
    /// ```
    public func write<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await BlockingWork.run { try self.write(body) }
    }

    /// `read`, for Swift concurrency, off the cooperative pool.
    public func read<T: Sendable>(_ body: @escaping @Sendable (Transaction) throws -> T) async throws -> T {
        try await BlockingWork.run { try self.read(body) }
    }

    /// `update`, for Swift concurrency, off the cooperative pool.
    @discardableResult
    public func update(
        _ key: String,
        _ transform: @escaping @Sendable (PropertyListValue?) throws -> PropertyListValue?
    ) async throws -> PropertyListValue? {
        try await BlockingWork.run { try self.update(key, transform) }
    }

    // MARK: UserDefaults vocabulary: writing

    /// Stores `value` (a property-list value, or nil to remove the key). Does not throw: a failure
    /// is logged and kept in `lastError`.
    public func set(_ value: Any?, forKey key: String) {
        guard let value else { return removeObject(forKey: key) }
        guard let converted = PropertyListValue(any: value) else {
            return report(store.error(.unsupportedValue, key: key, PropertyListValue.refusal(of: value) + "; nothing was changed"))
        }
        setValue(converted, forKey: key)
    }

    /// Stores `value` as a string: what `set(_: Any?, forKey:)` does with a `String`, without boxing
    /// it in an `Any` and casting it back. Does not throw: a failure is logged and kept in
    /// `lastError`.
    public func set(_ value: String, forKey key: String) { setValue(.string(value), forKey: key) }
    /// Stores `value` as an integer. Does not throw: a failure is logged and kept in `lastError`.
    public func set(_ value: Int, forKey key: String) { setValue(.integer(value), forKey: key) }
    /// Stores `value` as a double. Does not throw: a failure is logged and kept in `lastError`.
    public func set(_ value: Double, forKey key: String) { setValue(.double(value), forKey: key) }
    /// Stores `value` as a double (property lists have one floating-point type). Does not throw: a
    /// failure is logged and kept in `lastError`.
    public func set(_ value: Float, forKey key: String) { setValue(PropertyListValue(float: value), forKey: key) }
    /// Stores `value` as a boolean. Does not throw: a failure is logged and kept in `lastError`.
    public func set(_ value: Bool, forKey key: String) { setValue(.bool(value), forKey: key) }

    /// Stores a file URL as its path, as Foundation's `UserDefaults` does, and any other URL whole,
    /// as its absolute string (where Foundation on Linux keeps only its path); nil removes the key.
    public func set(_ url: URL?, forKey key: String) {
        guard let url else { return removeObject(forKey: key) }
        setValue(PropertyListValue(url: url), forKey: key)
    }

    /// Removes the value stored under `key`, so that it reads as its registered default, if any.
    /// Does not throw: a failure is logged and kept in `lastError`.
    public func removeObject(forKey key: String) {
        var pinned = false
        attempt {
            try write(renewing: true) { tx in
                try tx.removeValue(forKey: key)
                pinned = try tx.isPinned(key)
            }
        }
        reportShadowedWrite(ofKey: key, pinned: pinned)
    }

    private func setValue(_ value: PropertyListValue, forKey key: String) {
        var pinned = false
        attempt {
            try write(renewing: true) { tx in
                try tx.set(value, forKey: key)
                pinned = try tx.isPinned(key)
            }
        }
        reportShadowedWrite(ofKey: key, pinned: pinned)
    }

    // MARK: UserDefaults vocabulary: reading

    /// The value under `key` (stored, else registered) as a Foundation value: `String`, `Int`,
    /// `Double`, `Bool`, `Date`, `Data`, `[Any]` or `[String: Any]`; nil if there is none.
    public func object(forKey key: String) -> Any? { value(forKey: key)?.anyValue }
    /// The value under `key` as a string, as Foundation's `UserDefaults` gives it: a string as is, a
    /// number as Swift prints it (`42`, `42.0`, `0.1`), a boolean as "1" or "0"; nil for other
    /// types or no value.
    public func string(forKey key: String) -> String? { value(forKey: key)?.coercedString }
    /// The value under `key` as an integer, as Foundation's `UserDefaults` gives it: a number (a
    /// double truncated toward zero; NaN, an infinity or one beyond `Int` as `Int.min`), a boolean
    /// as 1 or 0, a string as `NSString.integerValue` reads it (leading blanks, a sign, decimal
    /// digits: "12abc" is 12, "YES" 0); 0 otherwise.
    public func integer(forKey key: String) -> Int { value(forKey: key)?.coercedInteger ?? 0 }
    /// The value under `key` as a double: a number, a boolean as 1 or 0, a string as
    /// `NSString.doubleValue` reads it ("1e3x" is 1000, "nan" 0); 0 otherwise.
    public func double(forKey key: String) -> Double { value(forKey: key)?.coercedDouble ?? 0 }
    /// `double(forKey:)` as a `Float`.
    public func float(forKey key: String) -> Float { Float(double(forKey: key)) }
    /// The value under `key` as a boolean: true for `true`, a non-zero number, or a string as
    /// `NSString.boolValue` reads it (`Y`, `y`, `T` or `t` first, or a number whose first digit
    /// after any sign and zeros is 1 to 9: "YES", "true", "12"; not "NO", "0.5"); false otherwise.
    public func bool(forKey key: String) -> Bool { value(forKey: key)?.coercedBool ?? false }
    /// The data stored under `key`; nil if there is none or it is another type.
    public func data(forKey key: String) -> Data? { value(forKey: key)?.dataValue }
    /// The value under `key` as a URL: a string with a scheme as that whole URL, any other string
    /// (or UTF-8 data) as a file path with `~` expanded; nil otherwise.
    public func url(forKey key: String) -> URL? { value(forKey: key)?.coercedURL }
    /// The array under `key`, its elements as Foundation values (see `object(forKey:)`); nil if
    /// there is none or it is another type.
    public func array(forKey key: String) -> [Any]? { value(forKey: key)?.arrayValue?.map(\.anyValue) }

    /// The dictionary under `key`, its values as Foundation values (see `object(forKey:)`); nil if
    /// there is none or it is another type.
    public func dictionary(forKey key: String) -> [String: Any]? {
        value(forKey: key)?.dictionaryValue?.mapValues(\.anyValue)
    }

    /// The array under `key` if every element is a string, else nil (as `UserDefaults`).
    public func stringArray(forKey key: String) -> [String]? {
        guard let array = value(forKey: key)?.arrayValue else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(array.count)
        for element in array {
            guard let string = element.stringValue else { return nil }
            strings.append(string)
        }
        return strings
    }

    /// Values to fall back on for keys that are not stored. Never written to the file; shared by
    /// this process's handles on the suite, as UserDefaults' registration domain is.
    public func register(defaults: [String: Any]) {
        var converted: [ExactName: PropertyListValue] = [:]
        for (key, value) in defaults {
            guard let v = PropertyListValue(any: value) else {
                report(store.error(.unsupportedValue, key: key, "cannot register a default of type \(type(of: value))"))
                continue
            }
            converted[key.exact] = v
        }
        let (old, new) = store.registered.withLock { registered in
            let old = registered
            registered.merge(converted) { _, new in new }
            return (old, registered)
        }
        domainChanges.domainChanged(.registration, old: old, new: new, registration: true)
    }

    /// The registered defaults overlaid by every stored value, as Foundation's `UserDefaults` gives
    /// it on Linux: the argument domain, the added suites, the global domain and the managed
    /// settings are not in it (`resolvedValue(forKey:)` reads a key through all of them).
    ///
    /// A `[String: Any]` compares keys as Swift strings (canonical equivalence), so it holds one of
    /// two keys the suite keeps apart because their bytes differ (`"caf\u{E9}"` and `"cafe\u{301}"`):
    /// of such keys, the one last in byte order wins. `storedValues()` gives every key.
    public func dictionaryRepresentation() -> [String: Any] {
        var result: [String: Any] = [:]
        for (key, value) in store.registered.withLock({ $0 }) { result[key.text] = value.anyValue }
        attempt {
            try read { tx in
                try tx.forEachRecord { key, record in
                    switch record {
                    case .success(let record): result[key] = record.value.anyValue
                    case .failure(let error): report(error)
                    }
                }
            }
        }
        return result
    }

    /// Forces every committed write of this suite, from any process, to disk. Not needed for other
    /// processes to see a write (they see it when `set` returns); only for surviving power loss.
    @discardableResult
    public func synchronize() -> Bool {
        do {
            try store.environment.sync()
            return true
        } catch {
            report(store.translate(error, key: nil))
            return false
        }
    }

    // MARK: Errors

    private func attempt(_ body: () throws -> Void) {
        do { try body() } catch { report(error) }
    }

    func report(_ error: any Error) {
        let error =
            (error as? SharedDefaultsError)
            ?? store.error(.storageFailure, key: nil, "\(error)")
        recentError.withLock { $0 = error }
        (configuration.logger ?? Self.defaultLogger).error("\(error)")
        configuration.onError?(error)
    }
}
