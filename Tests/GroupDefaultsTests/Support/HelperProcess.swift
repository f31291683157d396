import Foundation
import Glibc
import ServerLaunching
import TestSupport
import Testing

/// The `GroupDefaultsTestHelper` executable, run as a separate process (see its main.swift).
struct HelperProcess {
    /// The helper binary, built next to the test bundle.
    static let executable = BuiltExecutable.url("GroupDefaultsTestHelper")

    struct Result {
        var status: Int32
        var reason: Process.TerminationReason
        var stdout: String
        var stderr: String
    }

    private let running: RunningProcess

    /// The helper's process.
    var process: SpawnedProcess { running.process }

    /// Starts `GroupDefaultsTestHelper COMMAND DIRECTORY SUITE ARGS…`, or with `launcher`
    /// (`["unshare", "--pid", …]`) `LAUNCHER… GroupDefaultsTestHelper COMMAND …`. The helper gets
    /// this thread's signal mask, as a child started with `Process` does.
    /// `environment` replaces this process's environment for the helper when given.
    init(
        _ command: String,
        directory: URL,
        suite: String,
        _ arguments: [String] = [],
        launcher: [String] = [],
        environment: [String: String]? = nil
    ) throws {
        let helper = [command, directory.path, suite] + arguments
        if let program = launcher.first {
            running = try RunningProcess(
                URL(fileURLWithPath: program),
                launcher.dropFirst() + [Self.executable.path] + helper,
                environment: environment,
                terminationSignals: .inherited
            )
        } else {
            running = try RunningProcess(Self.executable, helper, environment: environment, terminationSignals: .inherited)
        }
    }

    /// Releases a helper started with `--wait-for-go`.
    func go() {
        running.send("go\n")
    }

    /// Waits until the helper prints a line equal to `expected`; false if it ends first or has not
    /// printed it within `timeout` seconds. Lines before it are consumed; lines after it are kept for
    /// the next call and for `finish`.
    func waitForLine(_ expected: String, timeout: Int32 = 60) async -> Bool {
        await waitForLine(timeout: timeout) { $0 == expected } != nil
    }

    /// Waits until the helper prints a line for which `matches` is true, and returns it; nil if it
    /// ends first or prints none within `timeout` seconds. Consumes lines as `waitForLine(_:)`.
    func waitForLine(timeout: Int32 = 60, where matches: (String) -> Bool) async -> String? {
        await running.firstLine(timeout: .seconds(timeout), where: matches)
    }

    func send(_ signal: Int32) {
        let rc = Glibc.kill(process.processIdentifier, signal)
        precondition(rc == 0, "kill(\(process.processIdentifier), \(signal)) failed: errno \(errno)")
    }

    /// For `defer`: kills the helper if it still runs (a failed test may leave it running), and
    /// closes its stdin.
    func stop() {
        running.stop()
    }

    /// Waits for the helper to end and collects what it printed.
    func finish() async -> Result {
        let result = await running.finish()
        return Result(
            status: result.status,
            reason: result.reason,
            stdout: result.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            stderr: result.stderr
        )
    }

    /// Runs a helper to completion.
    static func run(_ command: String, directory: URL, suite: String, _ arguments: [String] = []) async throws -> Result {
        try await HelperProcess(command, directory: directory, suite: suite, arguments).finish()
    }
}
