import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync

/// `groupdefaults-sync`: mirrors suites to a `groupdefaults-server`.
@main
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groupdefaults-sync",
        abstract: "Mirror suites to a groupdefaults-server: offline first, last writer wins.",
        discussion: """
            A SUITE is a suite name, found in --directory, else $GROUPDEFAULTS_DIR, else \
            $XDG_DATA_HOME/groupdefaults or ~/.local/share/groupdefaults. Exit status: 0 on success, \
            1 on errors, 3 when authentication is needed (a new token).
            """,
        version: packageVersion,
        subcommands: [Configure.self, Pair.self, RotateKey.self, Sync.self, Push.self, Pull.self, Run.self, Status.self, Conflicts.self, Restore.self, History.self, Reset.self, Unconfigure.self]
    )
}

/// The suite options every verb shares.
struct SuiteOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The folder of the suites.", valueName: "DIR"))
    var directory: String?

    var directoryURL: URL? { directory.map { URL(fileURLWithPath: $0, isDirectory: true) } }

    func open(_ suite: String) throws -> SharedDefaults {
        try SharedDefaults(existingSuiteName: suite, directory: directoryURL)
    }

    func openOrCreate(_ suite: String) throws -> SharedDefaults {
        try SharedDefaults(suiteName: suite, directory: directoryURL)
    }
}

/// How the tool reports a failure: one line on stderr saying what to do, and exit status 1, or 3
/// when authentication is needed.
let groupdefaultsSync = CommandLineTool(name: "groupdefaults-sync") { error in
    switch error {
    case let error as SyncError:
        CommandFailure(describe(error), status: error.kind == .authenticationNeeded ? 3 : 1)
    case let error as SharedDefaultsError where error.code == .suiteNotFound:
        CommandFailure("the suite \(error.suiteName) does not exist")
    default:
        CommandFailure("\(error)")
    }
}

/// Runs a verb as `groupdefaultsSync` reports failures.
func perform(_ body: () async throws -> Void) async throws {
    try await groupdefaultsSync.perform(body)
}

/// What a person should read for a failed sync: what happened and what to do.
func describe(_ error: SyncError) -> String {
    switch error.kind {
    case .authenticationNeeded:
        return "\(error); nothing pending was lost: give it a new token with `groupdefaults-sync configure SUITE --server URL --token-file PATH`"
    case .unavailable:
        return "\(error); nothing pending was lost: try again later"
    default:
        return error.description
    }
}

/// Writes `groupdefaults-sync: MESSAGE` to stderr.
func printError(_ message: String) {
    groupdefaultsSync.printError(message)
}

/// Writes a line to stdout at once.
func output(_ text: String) {
    CommandLineSupport.output(text)
}
