package import Foundation
import Glibc
package import ServerLaunching

/// A child process running in the background; its stderr goes to a file (read it at any time),
/// stdout is dropped. Killed with SIGKILL if still running when released.
package final class ChildProcess: @unchecked Sendable {  // the process is only touched from the test's task
    /// The child.
    package let process = SpawnedProcess()
    private let errorFile: URL

    /// Starts `executable ARGUMENTS…`, stdin and stdout /dev/null.
    package init(_ executable: URL, _ arguments: [String]) throws {
        errorFile = FileManager.default.temporaryDirectory.appendingPathComponent("gds-stderr-\(UUID().uuidString)")
        _ = FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        process.executableURL = executable
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: errorFile)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// Its process id.
    package var pid: Int32 { process.processIdentifier }
    /// Whether it still runs.
    package var isRunning: Bool { process.isRunning }

    /// What it wrote to stderr so far.
    package var stderr: String { (try? String(contentsOf: errorFile, encoding: .utf8)) ?? "" }

    /// Sends `number` to the process, if it still runs (never to a process id that may have been
    /// reused since it exited).
    package func signal(_ number: Int32) {
        process.signalIfRunning(number)
    }

    /// Waits for the process to end (holding no thread): its status and whether a signal ended it.
    package func waitForExit() async -> (status: Int32, bySignal: Bool) {
        await process.exited()
        return (process.terminationStatus, process.terminationReason == .uncaughtSignal)
    }

    /// SIGTERM and the exit status (SIGKILL if it has not stopped within `grace`).
    @discardableResult
    package func terminate(grace: Duration = .seconds(10)) async -> (status: Int32, bySignal: Bool) {
        guard process.isRunning else { return await waitForExit() }
        signal(SIGTERM)
        let killer = Task {
            try await Task.sleep(for: grace)
            self.signal(SIGKILL)
        }
        let exit = await waitForExit()
        killer.cancel()
        return exit
    }

    deinit {
        process.signalIfRunning(SIGKILL)
        try? FileManager.default.removeItem(at: errorFile)
    }
}
