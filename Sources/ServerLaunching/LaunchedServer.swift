import Dispatch
package import Foundation
import Glibc

/// A running `groupdefaults-server serve` on loopback, as the tests and the benchmark start it: the
/// real executable, its port read from its first line.
///
/// The calls that wait (`init`, `waitForExit`) block their thread; async callers run them off the
/// cooperative pool.
package final class LaunchedServer: @unchecked Sendable {  // the process is only touched by its owner
    /// The server's process.
    package let process = SpawnedProcess()
    /// The port it announced.
    package let port: Int
    private let stdout = Pipe()

    /// Starts `EXECUTABLE serve --port PORT --log-level warning ARGUMENTS…` (`PORT` 0: a free one) and
    /// returns once it has announced its port on its first line. stderr is dropped, or with
    /// `keepsStderr` shared with this process.
    package init(executable: URL, port: Int = 0, arguments: [String], keepsStderr: Bool = false) throws {
        process.executableURL = executable
        process.arguments = ["serve", "--port", String(port), "--log-level", "warning"] + arguments
        process.standardOutput = stdout
        if !keepsStderr { process.standardError = FileHandle.nullDevice }
        try process.run()
        let line = Self.firstLine(of: stdout.fileHandleForReading)
        let prefix = arguments.contains("--tls-cert") ? "listening on https://127.0.0.1:" : "listening on http://127.0.0.1:"
        guard line.hasPrefix(prefix), let port = Int(line.dropFirst(prefix.count)) else {
            process.terminate()
            throw ServerStartFailure(line: line)
        }
        self.port = port
    }

    /// The server's process id (for CPU and memory accounting).
    package var pid: pid_t { process.processIdentifier }

    /// The first line the server writes (its `listening on` line), read byte by byte so that nothing
    /// after it is consumed.
    private static func firstLine(of handle: FileHandle) -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(handle.fileDescriptor, &byte, 1) == 1, byte != 10 { bytes.append(byte) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What the server wrote to stdout after its first line, read to the end (call once it exited).
    package func remainingOutput() -> String {
        String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Sends `number` to the server, if it still runs (never to a process id that may have been
    /// reused since it exited).
    package func signal(_ number: Int32) {
        process.signalIfRunning(number)
    }

    /// Waits for the process to end: its exit status, or the signal's number and `bySignal`.
    package func waitForExit() -> (status: Int32, bySignal: Bool) {
        process.waitUntilExit()
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    deinit {
        process.signalIfRunning(SIGKILL)
    }
}

/// The server ended or printed something else before announcing its port.
package struct ServerStartFailure: Error, CustomStringConvertible {
    /// What it printed first.
    package let line: String
    /// The line, quoted.
    package var description: String { "the server did not announce its port; its first line: \(line.debugDescription)" }
}
