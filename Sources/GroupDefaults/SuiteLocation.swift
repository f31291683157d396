import Foundation
import GroupDefaultsWire

/// Where a suite's files are: `<directory>/<suiteName>.lmdb`, its `-lock` file and the
/// `.lmdb-notify` sidecar.
///
/// Paths are plain strings, handled with POSIX calls: opening a suite is on the cold-start path of
/// short-lived processes, and Foundation's URL machinery costs hundreds of microseconds there.
struct SuiteLocation: Sendable {
    let suiteName: String
    /// The directory, absolute.
    let directory: String

    /// The file extension of a suite's data file.
    static let fileExtension = "lmdb"
    private static let longestSuffix = ".lmdb-notify"
    private static let maximumFileNameBytes = 255

    init(suiteName: String, directory: URL?) throws {
        let directory = Self.absoluteDirectory(directory)
        try Self.validate(suiteName: suiteName, directory: directory)
        self.suiteName = suiteName
        self.directory = directory
    }

    var path: String { directory + "/" + suiteName + "." + Self.fileExtension }

    /// `directory` (or the default directory) as an absolute path without a trailing slash.
    static func absoluteDirectory(_ directory: URL?) -> String {
        let slash = UInt8(ascii: "/")
        var directory = directory?.path ?? defaultDirectory()
        if directory.utf8.first != slash {
            directory = FileManager.default.currentDirectoryPath + "/" + directory
        }
        while directory.utf8.count > 1 && directory.utf8.last == slash { directory.removeLast() }
        return directory
    }

    /// `$GROUPDEFAULTS_DIR`, else `$XDG_DATA_HOME/groupdefaults`, else `~/.local/share/groupdefaults`.
    static func defaultDirectory() -> String {
        if let dir = environment("GROUPDEFAULTS_DIR"), !dir.isEmpty {
            return dir
        }
        if let xdg = environment("XDG_DATA_HOME"), xdg.utf8.first == UInt8(ascii: "/") {
            return xdg + "/groupdefaults"
        }
        let home = environment("HOME") ?? FileManager.default.homeDirectoryForCurrentUser.path
        return home + "/.local/share/groupdefaults"
    }

    private static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    private static func validate(suiteName: String, directory: String) throws {
        func invalid(_ reason: String) -> SharedDefaultsError {
            SharedDefaultsError(.invalidSuiteName, suite: suiteName, path: directory, reason)
        }
        if suiteName.isEmpty { throw invalid("a suite name must not be empty") }
        if suiteName == "." || suiteName == ".." { throw invalid("a suite name must not be '.' or '..'") }
        if suiteName.utf8.contains(UInt8(ascii: "/")) {
            throw invalid("a suite name must not contain '/'; give its folder as the suite's directory")
        }
        if suiteName.utf8.contains(0) { throw invalid("a suite name must not contain a NUL character") }
        if let problem = NameKind.suite.problem(with: suiteName) { throw invalid(problem) }
        let limit = maximumFileNameBytes - longestSuffix.utf8.count
        if suiteName.utf8.count > limit {
            throw invalid("a suite name may be at most \(limit) bytes of UTF-8 (it names a file); this one has \(suiteName.utf8.count)")
        }
    }

    /// Creates the directory (and its parents) if missing, with `mode` for the ones created, and
    /// returns its canonical path (symbolic links resolved), so that one file has one name.
    func createDirectory(mode: UInt32) throws -> String {
        var st = stat()
        var found = stat(directory, &st) == 0
        if !found {
            do {
                try FileManager.default.createDirectory(
                    atPath: directory,
                    withIntermediateDirectories: true,
                    attributes: [.posixPermissions: NSNumber(value: mode)]
                )
            } catch {
                // Another process may have created it at the same moment.
                if stat(directory, &st) != 0 {
                    throw SharedDefaultsError(
                        .notWritable,
                        suite: suiteName,
                        path: directory,
                        "cannot create the suite directory: \(Self.describe(error))"
                    )
                }
            }
            found = stat(directory, &st) == 0
        }
        guard found, st.st_mode & S_IFMT == S_IFDIR else {
            throw SharedDefaultsError(
                .notWritable,
                suite: suiteName,
                path: directory,
                "the suite directory is not a directory"
            )
        }
        guard let resolved = realpath(directory, nil) else { return directory }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func describe(_ error: any Error) -> String {
        let ns = error as NSError
        if let underlying = ns.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return ns.localizedDescription
    }
}
