package import ArgumentParser
package import Foundation
import GroupDefaultsWire
import SystemCalls

/// A failure a tool reports as one line on stderr, exiting with `status`.
package struct CommandFailure: Error, Sendable, CustomStringConvertible {
    /// The line, without the tool's name.
    package var message: String
    /// The exit status (1 unless the tool promises another).
    package var status: Int32
    /// False for lines printed without the tool's name (as macOS `defaults` prints its own).
    package var showsToolName = true
    /// Lines that detail the message, one for each thing it names (each host tried), printed after
    /// it indented, each made printable on its own.
    package var details: [String] = []

    /// A failure reported as `TOOL: MESSAGE` (and its `details`, a line each), exiting with `status`.
    package init(_ message: String, status: Int32 = 1, details: [String] = []) {
        self.message = message
        self.status = status
        self.details = details
    }

    /// The message.
    package var description: String { message }
}

/// How an executable reports failures: one line on stderr after its name, and an exit status; never
/// a stack trace. Each executable maps its own domain errors (a suite that does not exist, a sync
/// that needs a new token, a storage error) to the failure it reports.
package struct CommandLineTool: Sendable {
    /// The name each line on stderr starts with, e.g. `groupdefaults`.
    package let name: String
    /// The tool's root command, whose tree says which options each verb takes (for
    /// `pasteable(_:)`); nil for a tool that prints no command to run.
    private let root: (any ParsableCommand.Type)?
    private let failure: @Sendable (any Error) -> CommandFailure?

    /// - Parameters:
    ///   - name: The executable's name, printed before each line.
    ///   - root: The tool's root command (nil for a tool that prints no command to run).
    ///   - failure: The failure to report for an error that is not a `CommandFailure`; nil leaves the
    ///     error to whoever runs the command (ArgumentParser, or `main(reportingAs:helpHint:)`).
    package init(
        name: String,
        root: (any ParsableCommand.Type)? = nil,
        failure: @escaping @Sendable (any Error) -> CommandFailure? = { _ in nil }
    ) {
        self.name = name
        self.root = root
        self.failure = failure
    }

    /// Writes `NAME: MESSAGE` to stderr as one line, unbuffered, its commands made pasteable.
    package func printError(_ message: String) {
        CommandLineSupport.printError(pasteable(message), tool: name)
    }

    /// Writes `text`, which names a command to run, to stdout as one line, its commands made
    /// pasteable.
    package func outputHint(_ text: String) {
        output(pasteable(text))
    }

    /// `message` with each command of this tool it names in backticks given the location options
    /// this process was given (`GivenLocation`) that the command's verb takes: pasted as is, it
    /// acts on the same suites or store.
    package func pasteable(_ message: String) -> String {
        guard let root else { return message }
        return PasteableHint.complete(message, tool: name, root: root, flags: GivenLocation.flags)
    }

    /// Runs a verb's body: a failure becomes one line on stderr and `ExitCode(status)`.
    /// ArgumentParser's `ExitCode` and `CleanExit` pass through, as do errors `failure` leaves alone.
    package func perform(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch {
            throw reported(error)
        }
    }

    /// The async twin of `perform(_:)`.
    package func perform(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            throw reported(error)
        }
    }

    /// Reports `error` if it is a failure of this tool, returning the `ExitCode` to throw instead;
    /// otherwise returns `error` itself.
    private func reported(_ error: any Error) -> any Error {
        // ArgumentParser's own answers pass through: exit codes, and help (`help VERB` runs a
        // command that throws a request for help, which is no failure).
        if error is ExitCode || error is CleanExit || ArgumentParserAnswer.exitCode(for: error) == .success { return error }
        guard let failure = error as? CommandFailure ?? failure(error) else { return error }
        if failure.showsToolName {
            printError(failure.message)
        } else {
            writeAll(Data((printable(pasteable(failure.message)) + "\n").utf8), to: STDERR_FILENO)
        }
        for detail in failure.details { writeAll(Data(("  " + printable(detail) + "\n").utf8), to: STDERR_FILENO) }
        return ExitCode(failure.status)
    }
}

extension ParsableCommand {
    /// Parses and runs the command as `tool`: a failure is one line on stderr and its exit status, and
    /// a command line that does not parse is one line ending in `; HELPHINT` and exit status 1 (help,
    /// `--version` and completion scripts print as usual). An option the command does not have is
    /// named, with the nearest one it has (`unknown option '--sever'; did you mean '--server'?`),
    /// whatever else is wrong. A `CommandFailure` thrown by `validate()` is reported as it is.
    package static func main(reportingAs tool: CommandLineTool, helpHint: String, arguments given: [String]? = nil) {
        let arguments = given ?? Array(CommandLine.arguments.dropFirst())
        do {
            var command = try parseAsRoot(arguments)
            try tool.perform { try command.run() }
        } catch {
            exit(reporting: error, as: tool, helpHint: helpHint, arguments: arguments)
        }
    }

    /// The async twin of `main(reportingAs:helpHint:)`, for commands with async verbs. `arguments`
    /// (nil: the process's) may rewrite the command line first; what it throws is reported as any
    /// failure.
    package static func main(
        reportingAs tool: CommandLineTool,
        helpHint: String,
        arguments: @Sendable () throws -> [String]? = { nil }
    ) async {
        var line = Array(CommandLine.arguments.dropFirst())
        do {
            line = try arguments() ?? line
            var command = try parseAsRoot(line)
            if var command = command as? any AsyncParsableCommand {
                try await tool.perform { try await command.run() }
            } else {
                try tool.perform { try command.run() }
            }
        } catch {
            exit(reporting: error, as: tool, helpHint: helpHint, arguments: line)
        }
    }

    private static func exit(reporting error: any Error, as tool: CommandLineTool, helpHint: String, arguments: [String]) -> Never {
        if let failure = error as? CommandFailure {
            tool.printError(failure.message)
            exit(withError: ExitCode(failure.status))
        }
        if exitCode(for: error) == .success || error is CleanExit || error is ExitCode {
            exit(withError: error)  // help, --version, or a failure already reported
        }
        // A command line that does not parse is bad use: status 1, as every other mistake.
        if let refusal = unsupportedCompletionShell(in: arguments) {
            // ArgumentParser's answer is two lines, and the option is none of the command's.
            tool.printError(refusal)
        } else if let unknown = UnknownOption.first(in: arguments, root: self) {
            tool.printError(unknown.suggestion == nil ? unknown.message + "; " + helpHint : unknown.message)
        } else if let (option, value) = negativeValue(in: arguments), message(for: error).hasPrefix("Missing value for") {
            // ArgumentParser takes `-1` for an option of its own, and says the value is missing.
            tool.printError("\(option) \(value): a negative number is not accepted here; " + helpHint)
        } else {
            let message = oneLine(message(for: error)) ?? "invalid command line"
            tool.printError(message + "; " + helpHint)
        }
        exit(withError: ExitCode.failure)
    }
}

/// The sentence for `--generate-completion-script SHELL` (or `=SHELL`, or no shell and a `$SHELL`
/// it has no script for) that names a shell ArgumentParser makes no completions for: the ones it
/// makes, from `CompletionShell.allCases`. Nil when the command line asks for no completions.
func unsupportedCompletionShell(in arguments: [String]) -> String? {
    let option = "--generate-completion-script"
    let shells = CompletionShell.allCases.map(\.rawValue)
    let list = shells.dropLast().joined(separator: ", ") + " and " + (shells.last ?? "")
    for (index, argument) in arguments.enumerated() {
        if argument == "--" { return nil }
        let shell: String?
        if argument.hasPrefix(option + "=") {
            shell = String(argument.dropFirst(option.count + 1))
        } else if argument == option {
            shell = arguments.dropFirst(index + 1).first.flatMap { $0.hasPrefix("-") ? nil : $0 }
        } else {
            continue
        }
        guard let shell else {
            let current = ProcessInfo.processInfo.environment["SHELL"].map { " ($SHELL is \($0))" } ?? ""
            return "\(option): name the shell\(current): completions are made for \(list)"
        }
        if shells.contains(shell) { return nil }
        return "\(option) \(shell): completions are made for \(list) only"
    }
    return nil
}

/// The first `--option` (before a `--` that ends the options) followed by a negative number
/// (`-1`, `-0.5`, `-5m`), and that number.
func negativeValue(in arguments: [String]) -> (option: String, value: String)? {
    for (option, value) in zip(arguments, arguments.dropFirst()) {
        if option == "--" { return nil }
        guard option.hasPrefix("--"), !option.contains("="), value.count > 1, value.hasPrefix("-") else { continue }
        if let digit = value.dropFirst().first, digit.isNumber || digit == "." { return (option, value) }
    }
    return nil
}

/// ArgumentParser's message for a command line as one line: its first line, and a list that
/// follows it ("Please provide one of the following:" and the values, a line each) joined on.
package func oneLine(_ message: String) -> String? {
    let lines = message.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    guard let first = lines.first else { return nil }
    guard first.hasSuffix(":"), lines.count > 1 else { return first }
    let items = lines.dropFirst().map { $0.hasPrefix("- ") ? String($0.dropFirst(2)) : $0 }
    return first + " " + items.joined(separator: ", ")
}

/// Writes `TOOL: MESSAGE` to stderr as one line, unbuffered: the message through `printable`, so
/// that a name or value it echoes can neither forge another line nor reach the terminal as an
/// escape sequence.
package func printError(_ message: String, tool: String) {
    writeAll(Data((tool + ": " + printable(message) + "\n").utf8), to: STDERR_FILENO)
}

/// Writes a line to stdout at once (so that a pipe receives output line by line, and a process that
/// ends with `_exit` loses nothing).
package func output(_ text: String) {
    writeAll(Data((text + "\n").utf8), to: STDOUT_FILENO)
}

/// Writes every byte, unbuffered (a process that ends with `_exit` flushes no buffer). A failure
/// (standard output or error closed) has nowhere to be told, so it ends the writing silently.
package func writeAll(_ data: Data, to fd: Int32) {
    _ = data.withUnsafeBytes { SystemCall.writeAll(fd, $0) }
}

/// A command type to ask ArgumentParser what it makes of an error (its `exitCode(for:)` is a
/// static requirement of `ParsableCommand`).
private struct ArgumentParserAnswer: ParsableCommand {}
