import Foundation
import GroupDefaultsWire
import Synchronization

/// A suite read after a handle's own: one added with `addSuite(named:)`, or the global domain.
///
/// It is opened when first read, and only if its file exists: reading through it never creates a
/// suite. While its file is missing it reads as empty, and the file is looked for again at most
/// every 100 ms.
final class LowerSuite: Sendable {
    let name: String
    private let directory: URL
    private let configuration: SharedDefaults.Configuration
    private let path: String
    private let opened = Mutex<(defaults: SharedDefaults?, lookedAt: UInt64?)>((nil, nil))

    init(name: String, directory: URL, configuration: SharedDefaults.Configuration) throws {
        let location = try SuiteLocation(suiteName: name, directory: directory)
        self.name = name
        self.directory = URL(fileURLWithPath: location.directory, isDirectory: true)
        var configuration = configuration
        configuration.arguments = []  // the argument domain is the handle's, read once
        configuration.managedDirectory = nil
        self.configuration = configuration
        path = location.path
    }

    /// The suite, if its file exists (opened once).
    var defaults: SharedDefaults? {
        let now = ManagedSettings.monotonicNanoseconds()
        return opened.withLock { opened in
            if let defaults = opened.defaults { return defaults }
            if let lookedAt = opened.lookedAt, now &- lookedAt < ManagedSettings.freshness { return nil }
            opened.lookedAt = now
            guard FileManager.default.fileExists(atPath: path) else { return nil }
            opened.defaults = try? SharedDefaults(existingSuiteName: name, directory: directory, configuration: configuration)
            return opened.defaults
        }
    }

    /// Looks for the file at the next read (this process just created it).
    func lookAgain() {
        opened.withLock { $0.lookedAt = nil }
    }

    /// The value stored under `key`, if the suite exists and holds one.
    func storedValue(forKey key: String) throws -> PropertyListValue? {
        try defaults?.storedValue(forKey: key)
    }
}
