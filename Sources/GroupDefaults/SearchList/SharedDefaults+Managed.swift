import Foundation
import GroupDefaultsWire

// Managed settings: the values an administrator forces (see `ManagedSettings` for the files and
// their rules), above everything else in the search list.

extension SharedDefaults {
    /// Whether an administrator forces `key` (a managed settings file holds it): programs then show
    /// the setting as one the user cannot change. A write to it is stored but reads keep giving the
    /// managed value (the setters report `managedKey` in `lastError`).
    ///
    /// The files are `<directory>/<suite>.plist` for every user and
    /// `<directory>/users/<user>/<suite>.plist` for one (winning key by key), in any property-list
    /// format; `directory` is `Configuration.managedDirectory` (`/etc/groupdefaults/managed`, or
    /// `$GROUPDEFAULTS_MANAGED_DIR`). A file that does not parse, is writable by others than its
    /// owner, or holds a key or value the suite could not store is ignored whole, with one line in
    /// the log.
    ///
    /// On a member's device of a suite shared between accounts, a key the suite's owner pinned
    /// (`pinnedKeys`) is forced too: the owner's value stands, and a write of it is stored here but
    /// not pushed; sync puts the owner's value back and keeps the write in the conflict journal.
    public func objectIsForced(forKey key: String) -> Bool {
        searchList.managedEntry(forKey: key.exact) != nil || isPinned(key)
    }

    /// `objectIsForced(forKey:)` for a typed key.
    public func objectIsForced<Value>(for key: Key<Value>) -> Bool {
        objectIsForced(forKey: key.name)
    }

    /// The managed settings of this suite, as this handle reads them.
    public var managedSettings: ManagedSettingsReport {
        ManagedSettingsReport(searchList.managed, suiteName: suiteName)
    }

    /// The managed settings of the suite `suiteName` under `directory` (by default
    /// `Configuration.defaultManagedDirectory`), without opening the suite.
    public static func managedSettings(forSuite suiteName: String, directory: String = Configuration.defaultManagedDirectory) -> ManagedSettingsReport
    {
        ManagedSettingsReport(ManagedSettings.for(directory: directory, suiteName: suiteName), suiteName: suiteName)
    }

    /// The suites that have a managed settings file under `directory` (for every user, or for this
    /// user), sorted.
    public static func managedSuiteNames(directory: String = Configuration.defaultManagedDirectory) -> [String] {
        var names: Set<ExactName> = []
        let folders = [directory] + (ManagedSettings.userName.map { ["\(directory)/users/\($0)"] } ?? [])
        for folder in folders {
            for file in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where file.hasSuffix(".plist") {
                let name = String(file.dropLast(".plist".count))
                // A file whose name is no suite's applies to none.
                if (try? SuiteLocation(suiteName: name, directory: URL(fileURLWithPath: folder))) != nil { names.insert(name.exact) }
            }
        }
        return names.sorted().map(\.text)
    }

    /// After a write of `key` through a setter: says so if the key is managed, or `pinned`.
    func reportShadowedWrite(ofKey key: String, pinned: Bool) {
        guard let managed = searchList.managedEntry(forKey: key.exact) else {
            if pinned {
                report(
                    store.error(
                        .pinnedKey,
                        key: key,
                        "the suite's owner pinned the key: the value was stored here, but sync does not push it, puts the owner's value back and keeps this one in the conflict journal"
                    )
                )
            }
            return
        }
        report(
            store.error(
                .managedKey,
                key: key,
                "the key is managed by \(managed.file): the value was stored, but programs read the managed value while the file holds the key"
            )
        )
    }
}

/// What an administrator forces for one suite, and the managed settings files that were ignored.
public struct ManagedSettingsReport: Sendable {
    /// One forced key.
    public struct Setting: Sendable, Hashable {
        /// The key.
        public let key: String
        /// The value every program reads for it.
        public let value: PropertyListValue
        /// The file that gives it.
        public let file: String
    }

    /// A managed settings file that is present but not used, and why.
    public struct IgnoredFile: Sendable, Hashable {
        /// The file's path.
        public let file: String
        /// Why it is ignored (it does not parse, is writable by others than its owner, …).
        public let reason: String
    }

    /// The suite.
    public let suiteName: String
    /// The forced keys, in key order (by their bytes).
    public let settings: [Setting]
    /// The files ignored.
    public let ignoredFiles: [IgnoredFile]
    /// The files looked at: for every user, then for this user.
    public let files: [String]

    init(_ managed: ManagedSettings?, suiteName: String) {
        self.suiteName = suiteName
        settings = (managed?.current ?? [:]).sorted { $0.key < $1.key }.map { Setting(key: $0.key.text, value: $0.value.value, file: $0.value.file) }
        ignoredFiles = (managed?.ignoredFiles ?? []).map { IgnoredFile(file: $0.file, reason: $0.reason) }
        files = managed?.files ?? []
    }
}
