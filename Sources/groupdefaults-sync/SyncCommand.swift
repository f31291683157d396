import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

/// `groupdefaults-sync`: mirrors suites to a `groupdefaults-server`.
@main
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groupdefaults-sync",
        abstract: "Mirror suites to a groupdefaults-server: offline first, last writer wins.",
        discussion: """
            A SUITE is a suite name, found in --directory, else $GROUPDEFAULTS_DIR, else \
            $XDG_DATA_HOME/groupdefaults or ~/.local/share/groupdefaults. Verbs that talk to the \
            server wait at most --connect-timeout (5 seconds) for a connection and --answer-timeout \
            (30 seconds) for each answer; one that cannot reach it says why in one line, at once. \
            A request the server refuses for a while (429, or 503 to a read or a push) is sent \
            again after its Retry-After or a backoff, at most six times within a minute. \
            Exit status: 0 on success, 1 on errors, 3 when authentication is needed (a new token).
            """,
        version: packageVersion,
        subcommands: [
            Configure.self, Pair.self, RotateKey.self, Sync.self, Push.self, Pull.self, Run.self, Status.self, Conflicts.self, Restore.self,
            History.self, Reset.self, Unconfigure.self, Export.self, Share.self, Invitations.self, Members.self, Pin.self, Unpin.self, Unshare.self,
            Leave.self,
        ]
    )

    /// Parses and runs as the other tools do: a command line that does not parse is one line
    /// (naming the nearest option for a mistyped one) and exit status 1.
    static func main() async {
        await main(reportingAs: groupdefaultsSync, helpHint: "see `groupdefaults-sync help`")
    }
}

/// The suite options every verb shares.
struct SuiteOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The folder of the suites.", valueName: "DIR"))
    var directory: String?

    /// Records the folder for the commands the tool prints (`GivenLocation`).
    func validate() throws {
        GivenLocation.record("--directory", directory)
    }

    var directoryURL: URL? { directory.map { URL(fileURLWithPath: $0, isDirectory: true) } }

    func open(_ suite: String) throws -> SharedDefaults {
        try SharedDefaults(existingSuiteName: suite, directory: directoryURL)
    }

    func openOrCreate(_ suite: String) throws -> SharedDefaults {
        try SharedDefaults(suiteName: suite, directory: directoryURL)
    }
}

/// How long the tool waits for the server: the options of every verb that talks to it.
struct ServerOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Seconds to wait for a connection to the server, TLS handshake included.", valueName: "SECONDS"))
    var connectTimeout: Double = 5
    @Option(help: ArgumentHelp("Seconds to wait for each answer once a request is sent.", valueName: "SECONDS"))
    var answerTimeout: Double = 30

    func validate() throws {
        guard connectTimeout > 0, connectTimeout <= 3600 else {
            throw ValidationError("--connect-timeout is a number of seconds, more than 0 and at most 3600")
        }
        guard answerTimeout > 0, answerTimeout <= 3600 else {
            throw ValidationError("--answer-timeout is a number of seconds, more than 0 and at most 3600")
        }
    }

    var connect: Duration { .milliseconds(Int64(connectTimeout * 1000)) }
    var answer: Duration { .milliseconds(Int64(answerTimeout * 1000)) }

    /// An HTTP client that trusts `caFile` too and gives up connecting after `connect`.
    func makeHTTPClient(caFile: String?) throws -> HTTPClient {
        try SyncClient.makeHTTPClient(caFile: caFile, connectTimeout: connect)
    }

    /// `client` with these timeouts (the HTTP client must come from `makeHTTPClient(caFile:)`).
    func applied(to client: SyncClient) -> SyncClient {
        var client = client
        client.connectTimeout = connect
        client.timeout = answer
        return client
    }

    /// `options` with these timeouts, for an engine on an HTTP client from `makeHTTPClient(caFile:)`.
    func applied(to options: SyncEngine.Options) -> SyncEngine.Options {
        var options = options
        options.connectTimeout = connect
        options.answerTimeout = answer
        return options
    }
}

/// How the tool reports a failure: one line on stderr saying what to do, and exit status 1, or 3
/// when authentication is needed.
let groupdefaultsSync = CommandLineTool(name: "groupdefaults-sync", root: SyncCommand.self) { error in
    switch error {
    case let error as SyncError:
        CommandFailure(describe(error), status: error.kind == .authenticationNeeded ? 3 : 1)
    case let error as SharedDefaultsError where error.code == .suiteNotFound:
        CommandFailure("the suite \(error.suiteName) does not exist")
    case let error as SharedDefaultsError where error.code == .invalidSuiteName && error.suiteName.contains("/"):
        CommandFailure("\(error) (--directory DIR)")
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
    case .authenticationNeeded where error.code == .accountDeleted:
        return error.description(remedy: remedyWords)
    case .authenticationNeeded where error.code == .notAMember:
        return "\(error.detail): ask its owner for a new invitation and join again "
            + "(`groupdefaults-sync configure --invitation CODE --server URL --token-file PATH --as SUITE`), or stop syncing it (`groupdefaults-sync unconfigure SUITE`)"
    case .authenticationNeeded:
        return "\(error); nothing pending was lost: give it a new token with `groupdefaults-sync configure SUITE --server URL --token-file PATH`"
    case .unavailable where error.isLasting:
        return "\(error); nothing pending was lost: check the server's URL (`groupdefaults-sync configure SUITE --server URL --token-file PATH`)"
    case .unavailable:
        return "\(error); nothing pending was lost: try again later"
    default:
        return error.description(remedy: remedyWords)
    }
}

/// What to do about a key error, in this tool's verbs and options.
func remedyWords(_ remedy: SyncError.Remedy) -> String {
    switch remedy {
    case .getSuiteKeys:
        "configure it with --pairing-code (from groupdefaults-sync pair on a device that has it) or --recovery-key"
    case .pairAgain:
        "pair this device again (groupdefaults-sync pair on a device that has the new key, then configure --pairing-code here)"
    case .rotateAgain:
        "run `groupdefaults-sync rotate-key SUITE` again on this device to store it"
    case .pairFromThisDevice:
        "pair that device from this one (`groupdefaults-sync pair SUITE`), or have the operator reset the suite again (`groupdefaults-server suites reset --keys --account ACCOUNT --suite SUITE`) and sync this device first"
    case .setUpAgainOrReset:
        "configure it again with the suite's own recovery key or a pairing code, or have its operator reset it (`groupdefaults-server suites reset --keys --account ACCOUNT --suite SUITE`)"
    case .keepCopy:
        "the suite's owner's account was deleted: this copy joins none of the new account's suites, nor yours; keep it on this device only "
            + "(`groupdefaults-sync unconfigure SUITE`)"
    case .startOver:
        "to start over in the new account, configure the suite again (`groupdefaults-sync configure SUITE --server URL --token-file PATH`: "
            + "what this device holds is uploaded there), or keep it on this device only (`groupdefaults-sync unconfigure SUITE`)"
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
