import ArgumentParser
import Foundation
import GroupDefaults

/// The options every verb that names a suite shares.
struct SuiteOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The folder of the suites.", valueName: "DIR"))
    var directory: String?

    var directoryURL: URL? { directory.map { URL(fileURLWithPath: $0, isDirectory: true) } }

    /// Opens an existing suite for reading or editing: a name, or the path of a `.lmdb` file.
    func open(_ suite: String) throws -> SharedDefaults {
        if let file = Self.fileURL(suite) {
            return try SharedDefaults(fileURL: file)
        }
        return try SharedDefaults(existingSuiteName: suite, directory: directoryURL)
    }

    /// Opens a suite for writing, creating it if needed.
    func openOrCreate(_ suite: String) throws -> SharedDefaults {
        if let file = Self.fileURL(suite) {
            if FileManager.default.fileExists(atPath: file.path) { return try SharedDefaults(fileURL: file) }
            return try SharedDefaults(
                suiteName: file.deletingPathExtension().lastPathComponent, directory: file.deletingLastPathComponent())
        }
        return try SharedDefaults(suiteName: suite, directory: directoryURL)
    }

    /// The suite's file, if `suite` is a path rather than a name.
    static func fileURL(_ suite: String) -> URL? {
        suite.hasSuffix(".lmdb") && suite.contains("/") || suite.hasSuffix(".lmdb") && FileManager.default.fileExists(atPath: suite)
            ? URL(fileURLWithPath: suite) : nil
    }
}

/// A failure the tool reports in one line on stderr, exiting with `status`.
struct Failure: Error {
    let message: String
    var status: Int32 = 1
    /// Printed without the tool's name, as `defaults` prints it (scripts match these lines).
    var asDefaultsPrintsIt = false

    init(_ message: String, status: Int32 = 1) {
        self.message = message
        self.status = status
    }

    /// `The domain/default pair of (SUITE, KEY) does not exist`.
    static func missingKey(_ suite: String, _ key: String) -> Failure {
        var failure = Failure("The domain/default pair of (\(suite), \(key)) does not exist")
        failure.asDefaultsPrintsIt = true
        return failure
    }

    /// `Domain SUITE does not exist`.
    static func missingSuite(_ suite: String) -> Failure {
        var failure = Failure("Domain \(suite) does not exist")
        failure.asDefaultsPrintsIt = true
        return failure
    }
}

/// Runs a verb's body: any failure becomes one line on stderr and a non-zero exit status, never a
/// stack trace.
func perform(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let failure as Failure {
        printError(failure.message, prefixed: !failure.asDefaultsPrintsIt)
        throw ExitCode(failure.status)
    } catch let error as SharedDefaultsError where error.code == .suiteNotFound {
        printError(Failure.missingSuite(error.suiteName).message, prefixed: false)
        throw ExitCode(1)
    } catch let error as SharedDefaultsError {
        printError(error.description)
        throw ExitCode(1)
    } catch let error as ExitCode {
        throw error
    } catch {
        printError("\(error)")
        throw ExitCode(1)
    }
}

func printError(_ message: String, prefixed: Bool = true) {
    FileHandle.standardError.write(Data(((prefixed ? "groupdefaults: " : "") + message + "\n").utf8))
}

/// Writes text to stdout at once (so that `watch` output reaches a pipe line by line).
func output(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
