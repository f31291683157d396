import CommandLineSupport
import Foundation
import Glibc
import TestSupport
import Testing

/// The `groupdefaults` binary under test, built next to the test runner.
enum Tool {
    static let executable = BuiltExecutable.url("groupdefaults")
}

/// A temporary directory for one test: `suites/` is the child's `$GROUPDEFAULTS_DIR` (created by the
/// tool when it first writes), `files/` holds everything else (exports, backups, captured output).
struct Sandbox {
    let root: URL
    var suites: URL { root.appendingPathComponent("suites", isDirectory: true) }
    var files: URL { root.appendingPathComponent("files", isDirectory: true) }

    /// The path of a file in `files/`.
    func path(_ name: String) -> String { files.appendingPathComponent(name).path }

    /// The data file of a suite in `suites/`.
    func suitePath(_ suite: String) -> String { suites.appendingPathComponent(suite + ".lmdb").path }

    /// Where the sandbox's managed settings files go (`$GROUPDEFAULTS_MANAGED_DIR`).
    var managed: URL { root.appendingPathComponent("managed", isDirectory: true) }

    /// The child's environment: ours, with `$GROUPDEFAULTS_DIR` set to `suites/`,
    /// `$GROUPDEFAULTS_MANAGED_DIR` to `managed/`, no `$XDG_DATA_HOME`, and `$HOME` inside the
    /// sandbox (so that a tool that ignored the variable could not touch the real home).
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["GROUPDEFAULTS_DIR"] = suites.path
        environment["GROUPDEFAULTS_MANAGED_DIR"] = managed.path
        environment["XDG_DATA_HOME"] = nil
        environment["HOME"] = root.appendingPathComponent("home").path
        return environment
    }

    /// Runs `groupdefaults ARGUMENTS…` to completion.
    @discardableResult
    func run(_ arguments: String..., stdin: Data? = nil) async throws -> ProcessResult {
        try await run(arguments, stdin: stdin)
    }

    @discardableResult
    func run(_ arguments: [String], stdin: Data? = nil, environment: [String: String]? = nil) async throws -> ProcessResult {
        try await runProcess(Tool.executable, arguments, stdin: stdin, environment: environment ?? self.environment)
    }

    /// Runs the tool and expects it to succeed with nothing on stderr; returns its stdout.
    @discardableResult
    func ok(_ arguments: String..., stdin: Data? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        try await ok(arguments, stdin: stdin, sourceLocation: sourceLocation)
    }

    @discardableResult
    func ok(_ arguments: [String], stdin: Data? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let result = try await run(arguments, stdin: stdin)
        #expect(result.succeeded, "groupdefaults \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.isEmpty, "groupdefaults \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        return result.stdout
    }

    /// The suite's whole content as the tool's lossless typed JSON (compare before and after).
    func contents(_ suite: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        try await ok("export", suite, "-", "--format", "json", sourceLocation: sourceLocation)
    }

    /// The suite's whole content, parsed.
    func typedContents(_ suite: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> JSONValue {
        try JSONValue.parse(await contents(suite, sourceLocation: sourceLocation))
    }

    /// Starts `groupdefaults ARGUMENTS…` with its stdout readable line by line.
    func start(_ arguments: [String], blockingTermination: Bool = false) throws -> RunningProcess {
        try RunningProcess(
            Tool.executable,
            arguments,
            environment: environment,
            stderrFile: uniqueFile("stderr"),
            terminationSignals: blockingTermination ? .blocked : .unblocked
        )
    }

    /// Starts `/bin/sh -c SCRIPT sh ARGUMENTS…`, with `$GD` the tool's path.
    func startShell(_ script: String, _ arguments: [String] = []) throws -> RunningProcess {
        var environment = self.environment
        environment["GD"] = Tool.executable.path
        return try RunningProcess(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", script, "sh"] + arguments,
            environment: environment,
            stderrFile: uniqueFile("stderr")
        )
    }

    /// Runs `python3 -c SCRIPT ARGUMENTS…` (with this process's environment, so that the
    /// interpreter is found as in a shell).
    @discardableResult
    func python(_ script: String, _ arguments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let result = try await runProcess(
            URL(fileURLWithPath: "/usr/bin/env"),
            ["python3", "-c", script] + arguments,
            stdin: nil,
            environment: ProcessInfo.processInfo.environment
        )
        #expect(result.succeeded, "python3: \(result)", sourceLocation: sourceLocation)
        return result.stdout
    }

    /// The suite's last change sequence number, from `info`.
    func lastChange(_ suite: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> UInt64 {
        let info = try await ok("info", suite, sourceLocation: sourceLocation)
        let line = info.split(separator: "\n").first { $0.hasPrefix("last change: ") }
        let number = line.flatMap { UInt64($0.dropFirst("last change: ".count)) }
        return try #require(number, "no last change in \(info.debugDescription)", sourceLocation: sourceLocation)
    }

    /// The names in `suites/` (empty if it does not exist).
    var suiteDirectoryListing: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: suites.path)) ?? []).sorted()
    }

    func uniqueFile(_ prefix: String) -> URL {
        files.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    }
}

/// Runs `body` with a fresh sandbox, removed afterwards.
func withSandbox<T>(_ body: (Sandbox) async throws -> T) async throws -> T {
    try await withTemporaryDirectory(prefix: "groupdefaultsTests") { root in
        let sandbox = Sandbox(root: root)
        try FileManager.default.createDirectory(at: sandbox.files, withIntermediateDirectories: true)
        return try await body(sandbox)
    }
}

// MARK: - Expectations

/// Expects a failure reported as the tool promises: a non-zero exit status (not a signal), exactly
/// one line on stderr (no stack trace), and that line mentioning each of `fragments`.
func expectOneLineFailure(
    _ result: ProcessResult,
    mentioning fragments: [String] = [],
    _ context: String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.reason == .exit, "\(context): ended by a signal: \(result)", sourceLocation: sourceLocation)
    #expect(result.status != 0, "\(context): \(result)", sourceLocation: sourceLocation)
    let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
    #expect(
        lines.count == 2 && !lines[0].isEmpty && lines[1].isEmpty,
        "\(context): stderr should be exactly one line: \(result.stderr.debugDescription)",
        sourceLocation: sourceLocation
    )
    for marker in ["Fatal error", "Backtrace", "Stack dump", "Current stack trace", "Crash"] {
        #expect(!result.stderr.contains(marker), "\(context): \(result)", sourceLocation: sourceLocation)
    }
    for fragment in fragments {
        #expect(
            result.stderr.contains(fragment),
            "\(context): stderr should mention \(fragment.debugDescription): \(result)",
            sourceLocation: sourceLocation
        )
    }
}
