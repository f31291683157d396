package import Foundation
import Glibc
import ServerLaunching

/// An executable of this package, built next to the test runner (`swift build --build-tests`
/// builds the executables the test target depends on).
package enum BuiltExecutable {
    /// The directory of the test runner, where the package's executables are built.
    package static let directory: URL = {
        let testBinary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: testBinary).deletingLastPathComponent()
    }()

    /// The product `name` (e.g. `groupdefaults`), next to the test runner.
    package static func url(_ name: String) -> URL {
        directory.appendingPathComponent(name)
    }

    /// Runs `executable ARGUMENTS…` to completion: its exit status and output. `environment`
    /// replaces this process's when given.
    package static func run(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String]? = nil
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let result = try await runProcess(executable, arguments, environment: environment)
        return (status: result.status, stdout: result.stdout, stderr: result.stderr)
    }
}

/// What a finished process did.
package struct ProcessResult: Sendable, CustomStringConvertible {
    /// The exit status, or the signal's number when `reason` is `.uncaughtSignal`.
    package var status: Int32
    /// Whether the process exited or a signal ended it.
    package var reason: Process.TerminationReason
    /// Everything it wrote to stdout.
    package var stdoutData: Data
    /// Everything it wrote to stderr.
    package var stderr: String
    /// From its start to its end (not counting any wait before it was started).
    package var elapsed: Duration

    /// Creates a result from what a process did.
    package init(status: Int32, reason: Process.TerminationReason, stdoutData: Data, stderr: String, elapsed: Duration = .zero) {
        self.status = status
        self.reason = reason
        self.stdoutData = stdoutData
        self.stderr = stderr
        self.elapsed = elapsed
    }

    /// stdout as text.
    package var stdout: String { String(decoding: stdoutData, as: UTF8.self) }

    /// True when the process exited (was not killed by a signal) with status 0.
    package var succeeded: Bool { reason == .exit && status == 0 }

    /// The status and both outputs, for test messages.
    package var description: String {
        "status \(status)\(reason == .uncaughtSignal ? " (signal)" : ""), stdout: \(stdout.debugDescription), stderr: \(stderr.debugDescription)"
    }
}

/// Runs `executable ARGUMENTS…` to completion and collects what it did. stdin is `stdin`, or empty;
/// `environment` replaces this process's when given. Output goes to files, not pipes, so that no
/// pipe can fill up while we wait, and the wait holds no thread (`SpawnedProcess.exited()`). A
/// process still running after `timeLimit` is killed (SIGKILL), and its result says so.
package func runProcess(
    _ executable: URL,
    _ arguments: [String],
    stdin: Data? = nil,
    environment: [String: String]? = nil,
    timeLimit: Duration = .seconds(300)
) async throws -> ProcessResult {
    let scratch = FileManager.default.temporaryDirectory
    let id = UUID().uuidString
    let outFile = scratch.appendingPathComponent("process-stdout-\(id)")
    let errFile = scratch.appendingPathComponent("process-stderr-\(id)")
    let inFile = scratch.appendingPathComponent("process-stdin-\(id)")
    _ = FileManager.default.createFile(atPath: outFile.path, contents: nil)
    _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
    defer {
        for file in [outFile, errFile, inFile] { try? FileManager.default.removeItem(at: file) }
    }
    let process = SpawnedProcess()
    process.executableURL = executable
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = try FileHandle(forWritingTo: outFile)
    let err = try FileHandle(forWritingTo: errFile)
    defer {
        try? out.close()
        try? err.close()
    }
    process.standardOutput = out
    process.standardError = err
    if let stdin {
        _ = FileManager.default.createFile(atPath: inFile.path, contents: stdin)
        process.standardInput = try FileHandle(forReadingFrom: inFile)
    } else {
        process.standardInput = FileHandle.nullDevice
    }
    let started = ContinuousClock.now
    try process.run()
    let killer = Task {
        try await Task.sleep(for: timeLimit)
        process.signalIfRunning(SIGKILL)
    }
    await process.exited()
    killer.cancel()
    let elapsed = ContinuousClock.now - started
    return ProcessResult(
        status: process.terminationStatus,
        reason: process.terminationReason,
        stdoutData: try Data(contentsOf: outFile),
        stderr: String(decoding: try Data(contentsOf: errFile), as: UTF8.self),
        elapsed: elapsed
    )
}
