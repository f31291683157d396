import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire

/// `groupdefaults-server`: serve the sync API (`serve`, the default; `check-config` shows its
/// settings), or manage its tokens, the devices it has seen and the console's operators, or back up
/// and restore its store.
@main
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groupdefaults-server",
        abstract: "The GroupDefaults sync server.",
        discussion: """
            Exit status: 0 on success (and when `serve` ends at SIGTERM or SIGINT), 1 on errors and \
            for a command line that does not parse (one line on stderr).
            """,
        version: packageVersion,
        subcommands: [
            Serve.self, CheckConfig.self, TokenCommand.self, DevicesCommand.self, AdminCommand.self, SuitesCommand.self, BackupCommand.self,
            RestoreCommand.self, AccountsCommand.self, AuditCommand.self,
        ],
        defaultSubcommand: Serve.self
    )

    /// Parses and runs the command: a failure, or a command line that does not parse, is one line on
    /// stderr and exit status 1; help and `--version` print as usual.
    static func main() async {
        await main(reportingAs: groupdefaultsServer, helpHint: "see `groupdefaults-server help`") {
            let arguments = Array(CommandLine.arguments.dropFirst())
            try refuseConsoleValue(arguments)
            return commandLine(arguments)
        }
    }

    /// `--console on` and `--console off`, the flag's form before it became a switch, said as what to
    /// write now rather than as an unexpected argument (a service file may still have them).
    static func refuseConsoleValue(_ arguments: [String]) throws {
        let values = ["on", "off", "true", "false"]
        for (index, argument) in arguments.enumerated() {
            let value =
                argument.hasPrefix("--console=")
                ? String(argument.dropFirst("--console=".count))
                : argument == "--console" && index + 1 < arguments.count ? arguments[index + 1] : nil
            guard let value, values.contains(value.lowercased()) else { continue }
            throw CommandFailure(
                "--console takes no value: give --console or --no-console (a settings file or the environment may say GROUPDEFAULTS_SERVER_CONSOLE=\(value))"
            )
        }
    }

    /// `serve` before a line that starts with an option of it (`groupdefaults-server --port 0`):
    /// ArgumentParser takes the default command only for a line without arguments.
    static func commandLine(_ arguments: [String]) -> [String] {
        guard let first = arguments.first, first.hasPrefix("-") else { return arguments }
        let ownOptions = ["-h", "--help", "--version"]
        if ownOptions.contains(first) || first.hasPrefix("--generate-completion-script") || first.hasPrefix("--experimental") {
            return arguments
        }
        return ["serve"] + arguments
    }
}

/// How the server's commands report a failure: a `CommandFailure`, a storage error, a certificate
/// that cannot be loaded, a database that cannot be reached at start or an operator that cannot be
/// made or removed is one line on stderr and exit status 1.
let groupdefaultsServer = CommandLineTool(name: "groupdefaults-server", root: ServerCommand.self) { error in
    switch error {
    case let failure as SyncStorageError: CommandFailure(failure.detail)
    case let failure as TLSFilesError: CommandFailure("\(failure)")
    case let failure as StorageStartError: CommandFailure("\(failure)", details: failure.details)
    case let failure as ConsoleRecordError: CommandFailure(failure.description)
    case let failure as BackupFailure: CommandFailure(failure.description)
    default: nil
    }
}
