import ArgumentParser
import CommandLineSupport
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

extension CommandFailure {
    /// `The domain/default pair of (SUITE, KEY) does not exist`, without the tool's name, as
    /// `defaults` prints it (scripts match these lines).
    static func missingKey(_ suite: String, _ key: String) -> CommandFailure {
        var failure = CommandFailure("The domain/default pair of (\(suite), \(key)) does not exist")
        failure.showsToolName = false
        return failure
    }

    /// `Domain SUITE does not exist`, without the tool's name, as `defaults` prints it.
    static func missingSuite(_ suite: String) -> CommandFailure {
        var failure = CommandFailure("Domain \(suite) does not exist")
        failure.showsToolName = false
        return failure
    }
}

/// How `groupdefaults` reports a failure: one line on stderr and exit status 1 (or the status a
/// `CommandFailure` carries), never a stack trace.
let groupdefaults = CommandLineTool(name: "groupdefaults") { error in
    switch error {
    case let error as SharedDefaultsError where error.code == .suiteNotFound: .missingSuite(error.suiteName)
    default: CommandFailure("\(error)")  // a SharedDefaultsError's description included
    }
}

/// Runs a verb's body as `groupdefaults` reports failures.
func perform(_ body: () throws -> Void) throws {
    try groupdefaults.perform(body)
}
