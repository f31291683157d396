import ArgumentParser
import Foundation

/// `groupdefaults-server`: serve the sync API, or manage its tokens.
@main
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groupdefaults-server",
        abstract: "The GroupDefaults sync server.",
        subcommands: [Serve.self, TokenCommand.self],
        defaultSubcommand: Serve.self)

    /// Parses and runs the command: a failure, bad options included, is one line on stderr and exit
    /// status 1; help prints as usual.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let failure as CommandFailure {
            FileHandle.standardError.write(Data("groupdefaults-server: \(failure)\n".utf8))
            exit(withError: ExitCode(1))
        } catch {
            // Help, and failures already reported (`ExitCode`), end as ArgumentParser ends them.
            if error is CleanExit || error is ExitCode || exitCode(for: error) == .success { exit(withError: error) }
            let lines = message(for: error).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            let message = lines.isEmpty ? "invalid command line" : lines.joined(separator: " ")
            FileHandle.standardError.write(Data("groupdefaults-server: \(message); see 'groupdefaults-server help'\n".utf8))
            exit(withError: ExitCode(1))
        }
    }
}
