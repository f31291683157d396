import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import Logging
import TestSupport

/// One device in process: its own directory holding its copy of the suite, and a sync engine on it
/// that talks to the test's server with the test's token.
final class Device: Sendable {
    let directory: URL
    let defaults: SharedDefaults
    let engine: SyncEngine

    /// Opens (creating) `suite` in a fresh directory, its clock moved by `clockOffset`. With
    /// `synced`, the suite is marked synced at once (every write from then on is pending);
    /// otherwise call `enableSync()` when the device joins. With `keys`, the suite is end-to-end
    /// encrypted with them. With `client` and `shared`, the device is another account's, a member
    /// of the suite (the client names the owner).
    init(
        _ suite: String,
        server: SyncServer,
        clockOffset: Duration = .zero,
        synced: Bool = true,
        options: SyncEngine.Options = Device.quickOptions,
        keys: SuiteKeys? = nil,
        client: SyncClient? = nil,
        shared: Membership? = nil
    ) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("gds-device-\(UUID().uuidString)", isDirectory: true)
        var configuration = SharedDefaults.Configuration()
        configuration.clockOffsetMilliseconds =
            clockOffset.components.seconds * 1000
            + clockOffset.components.attoseconds / 1_000_000_000_000_000
        defaults = try SharedDefaults(suiteName: suite, directory: directory, configuration: configuration)
        engine = SyncEngine(
            defaults: defaults,
            client: client ?? server.client(suite),
            options: options,
            logger: Device.logger,
            keys: keys,
            shared: shared
        )
        if synced { try enableSync(server) }
    }

    /// Marks the suite synced with `server` (what `groupdefaults-sync configure` does).
    func enableSync(_ server: SyncServer) throws {
        try defaults.enableSync(server: server.url.absoluteString)
    }

    /// Retries come quickly in tests (the server is local; failures are what is tested).
    static let quickOptions: SyncEngine.Options = {
        var options = SyncEngine.Options()
        options.initialBackoff = .milliseconds(20)
        options.maximumBackoff = .milliseconds(500)
        return options
    }()

    /// The engine's warnings are expected in tests that break things: only errors are shown.
    static let logger: Logger = {
        var logger = Logger(label: "GroupDefaultsSyncTests")
        logger.logLevel = .error
        return logger
    }()

    /// Sets `key` (nil: removes it) and returns the stamp the store gave the change (nil: removing
    /// a key the device never had changes nothing).
    @discardableResult
    func write(_ key: String, _ value: PropertyListValue?) throws -> SyncEntry? {
        try writeEntry(defaults, key, value)
    }

    /// Sets `key` and returns the stamp the store gave the change.
    @discardableResult
    func set(_ key: String, _ value: PropertyListValue) throws -> SyncEntry {
        guard let entry = try writeEntry(defaults, key, value) else { throw FixtureError("no entry for \(key) right after setting it") }
        return entry
    }

    /// Every key's stored value with its stamp (tombstones left out).
    func entries() throws -> [String: SyncEntry] {
        try storedEntries(defaults)
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Sets `key` in `defaults` (nil: removes it) and returns the stamp the store gave the change, read
/// right after the write; nil when a key that never existed was removed (nothing changed).
@discardableResult
func writeEntry(_ defaults: SharedDefaults, _ key: String, _ value: PropertyListValue?) throws -> SyncEntry? {
    try defaults.write { (tx: SharedDefaults.Transaction) throws -> Void in
        if let value { try tx.set(value, forKey: key) } else { try tx.removeValue(forKey: key) }
    }
    let entry = try defaults.syncEntry(forKey: key)
    if value != nil && entry == nil { throw FixtureError("no entry for \(key) right after setting it") }
    return entry
}

/// Every key's stored value in `defaults` with its stamp (tombstones left out).
func storedEntries(_ defaults: SharedDefaults) throws -> [String: SyncEntry] {
    var entries: [String: SyncEntry] = [:]
    for key in try defaults.read({ (tx: SharedDefaults.Transaction) in try tx.keys }) {
        if let entry = try defaults.syncEntry(forKey: key), !entry.isDeleted { entries[key] = entry }
    }
    return entries
}

/// Two entries say the same thing: same value (or both deleted) and same stamp. The revision, which
/// only the server's copies carry, is left out.
func sameEntry(_ a: SyncEntry?, _ b: SyncEntry?) -> Bool {
    a?.value == b?.value && a?.hlc == b?.hlc && a?.origin == b?.origin
}

/// Entries by key, compared as `sameEntry` does; a readable list of the differences.
func differences(_ actual: [String: SyncEntry], _ expected: [String: SyncEntry]) -> [String] {
    Set(actual.keys).union(expected.keys).sorted().compactMap { key in
        let a = actual[key]
        let e = expected[key]
        guard !sameEntry(a, e) else { return nil }
        func describe(_ entry: SyncEntry?) -> String {
            guard let entry else { return "absent" }
            return "\(entry.value.map { "\($0)" } ?? "deleted") @\(entry.hlc)/\(entry.origin)"
        }
        return "\(key): \(describe(a)), expected \(describe(e))"
    }
}
