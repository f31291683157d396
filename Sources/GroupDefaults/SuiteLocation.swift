import Foundation

/// Where a suite's files are: `<directory>/<suiteName>.lmdb`, its `-lock` file and the
/// `.lmdb-notify` sidecar.
struct SuiteLocation: Sendable {
    let suiteName: String
    let directory: URL

    /// The file extension of a suite's data file.
    static let fileExtension = "lmdb"
    private static let longestSuffix = ".lmdb-notify"
    private static let maximumFileNameBytes = 255

    init(suiteName: String, directory: URL?) throws {
        let directory = directory ?? Self.defaultDirectory()
        try Self.validate(suiteName: suiteName, directory: directory)
        self.suiteName = suiteName
        self.directory = directory.standardizedFileURL
    }

    var path: String { directory.appendingPathComponent(suiteName + "." + Self.fileExtension).path }
    var sidecarPath: String { path + "-notify" }

    /// `$GROUPDEFAULTS_DIR`, else `$XDG_DATA_HOME/groupdefaults`, else `~/.local/share/groupdefaults`.
    static func defaultDirectory() -> URL {
        let environment = ProcessInfo.processInfo.environment
        if let dir = environment["GROUPDEFAULTS_DIR"], !dir.isEmpty {
            return URL(fileURLWithPath: dir, isDirectory: true)
        }
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("groupdefaults", isDirectory: true)
        }
        return FileManager.default.homeDirectoryForCurrentUser
            .appendingPathComponent(".local/share/groupdefaults", isDirectory: true)
    }

    private static func validate(suiteName: String, directory: URL) throws {
        func invalid(_ reason: String) -> SharedDefaultsError {
            SharedDefaultsError(.invalidSuiteName, suite: suiteName, path: directory.path, reason)
        }
        if suiteName.isEmpty { throw invalid("a suite name must not be empty") }
        if suiteName == "." || suiteName == ".." { throw invalid("a suite name must not be '.' or '..'") }
        if suiteName.contains("/") { throw invalid("a suite name must not contain '/'; pass the folder as `directory`") }
        if suiteName.utf8.contains(0) { throw invalid("a suite name must not contain a NUL character") }
        let limit = maximumFileNameBytes - longestSuffix.utf8.count
        if suiteName.utf8.count > limit {
            throw invalid("a suite name may be at most \(limit) bytes of UTF-8 (it names a file); this one has \(suiteName.utf8.count)")
        }
    }

    /// Creates the directory (and its parents) if missing, with `mode` for the ones created.
    func createDirectory(mode: UInt32) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory) {
            if !isDirectory.boolValue {
                throw SharedDefaultsError(.notWritable, suite: suiteName, path: directory.path,
                                          "the suite directory is a file, not a directory")
            }
            return
        }
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: NSNumber(value: mode)])
        } catch {
            throw SharedDefaultsError(.notWritable, suite: suiteName, path: directory.path,
                                      "cannot create the suite directory: \(Self.describe(error))")
        }
    }

    private static func describe(_ error: any Error) -> String {
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return ns.localizedDescription
    }
}
