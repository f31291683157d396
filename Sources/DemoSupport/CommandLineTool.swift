public import ArgumentParser
public import Foundation
import GroupDefaults

/// A failure a demo process reports in one line.
public struct Failure: Error {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// Writes `message` to stderr as one line, after the tool's name.
public func printError(_ message: String, tool: String) {
    writeAll(Data((tool + ": " + message + "\n").utf8), to: STDERR_FILENO)
}

/// Writes every byte, unbuffered (a process that ends with `_exit` flushes no buffer).
public func writeAll(_ data: Data, to fd: Int32) {
    data.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let written = write(fd, raw.baseAddress! + offset, raw.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }
}

extension ParsableCommand {
    /// Parses and runs the command: any failure is one line on stderr and a non-zero exit status;
    /// help prints as usual.
    public static func mainReportingOneLineErrors(tool: String, helpHint: String) {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch let failure as Failure {
            printError(failure.message, tool: tool)
            exit(withError: ExitCode(1))
        } catch let error as SharedDefaultsError {
            printError(error.description, tool: tool)
            exit(withError: ExitCode(1))
        } catch {
            if error is CleanExit || exitCode(for: error) == .success { exit(withError: error) }
            let message = message(for: error).split(separator: "\n").first.map(String.init) ?? "invalid command line"
            printError(message + "; " + helpHint, tool: tool)
            exit(withError: ExitCode(exitCode(for: error).rawValue == 0 ? 1 : exitCode(for: error).rawValue))
        }
    }
}
