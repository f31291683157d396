import Foundation

/// The shared container of an app group: one directory per group identifier, holding the group's
/// suites in `Library/Preferences` and its sounds in `Library/Sounds`, as on Apple's platforms.
///
/// ```swift
/// let container = try AppGroupContainer(groupIdentifier: "group.com.example.chat")
/// try container.createDirectories()
/// let defaults = try SharedDefaults(appGroup: container)      // Library/Preferences/group.com.example.chat.lmdb
/// let sound = container.soundsDirectory.appendingPathComponent("ring.caf")
/// ```
/// The container is `<root>/<groupIdentifier>/`; `root` defaults to the directory suites use when
/// none is given (``SharedDefaults/defaultDirectory``).
public struct AppGroupContainer: Sendable, Hashable {
    /// The group identifier, e.g. `group.com.example.chat`; also the name of the group's suite.
    public let groupIdentifier: String
    /// The container directory, `<root>/<groupIdentifier>/`.
    public let url: URL

    /// Describes the container of `groupIdentifier` under `root`; creates nothing.
    ///
    /// - Throws: `SharedDefaultsError` with code `invalidSuiteName` if the identifier cannot name a
    ///   suite (empty, `.` or `..`, containing `/` or NUL, too long for a file name).
    public init(groupIdentifier: String, root: URL? = nil) throws {
        let location = try SuiteLocation(suiteName: groupIdentifier, directory: root)
        self.groupIdentifier = groupIdentifier
        self.url = URL(fileURLWithPath: location.directory, isDirectory: true)
            .appendingPathComponent(groupIdentifier, isDirectory: true)
    }

    /// `Library/Preferences` in the container: where the group's suites live.
    public var preferencesDirectory: URL {
        url.appendingPathComponent("Library/Preferences", isDirectory: true)
    }

    /// `Library/Sounds` in the container: where notification sounds are looked up.
    public var soundsDirectory: URL {
        url.appendingPathComponent("Library/Sounds", isDirectory: true)
    }

    /// Creates the container, `Library/Preferences` and `Library/Sounds` if missing (mode 0700 for
    /// the directories it creates).
    ///
    /// - Throws: `SharedDefaultsError` with code `notWritable` if a directory cannot be created.
    public func createDirectories() throws {
        for directory in [url, preferencesDirectory, soundsDirectory] {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue {
                continue
            }
            do {
                try FileManager.default.createDirectory(
                    at: directory,
                    withIntermediateDirectories: true,
                    attributes: [.posixPermissions: NSNumber(value: 0o700)]
                )
            } catch {
                // Another process may have created it at the same moment.
                guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory),
                    isDirectory.boolValue
                else {
                    throw SharedDefaultsError(
                        .notWritable,
                        suite: groupIdentifier,
                        path: directory.path,
                        "cannot create the app group container's directory: \((error as NSError).localizedDescription)"
                    )
                }
            }
        }
    }
}

extension SharedDefaults {
    /// Opens (creating if needed) the app group's suite: the suite named by the group identifier,
    /// in the container's `Library/Preferences`. Creates the container's directories if missing.
    ///
    /// ```swift
    /// let defaults = try SharedDefaults(appGroup: AppGroupContainer(groupIdentifier: "group.com.example.chat"))
    /// defaults.set("ring.caf", forKey: "sound")
    /// ```
    /// - Throws: as `AppGroupContainer.createDirectories()` and `init(suiteName:directory:configuration:)`.
    public convenience init(appGroup container: AppGroupContainer, configuration: Configuration = .init()) throws {
        try container.createDirectories()
        try self.init(
            suiteName: container.groupIdentifier,
            directory: container.preferencesDirectory,
            configuration: configuration
        )
    }
}
