import Foundation
import TestSupport
import Testing

/// The demo executables, built next to the test runner.
enum Binary {
    static let hostApp = BuiltExecutable.url("demo-host-app")
    static let notificationService = BuiltExecutable.url("demo-notification-service")
}

/// A temporary directory for one test: `root/` holds the group containers, `files/` the rest.
struct Sandbox {
    static let group = "group.com.example.chat"

    let directory: URL
    var root: URL { directory.appendingPathComponent("root", isDirectory: true) }
    var files: URL { directory.appendingPathComponent("files", isDirectory: true) }
    var container: URL { root.appendingPathComponent(Self.group, isDirectory: true) }
    var sounds: URL { container.appendingPathComponent("Library/Sounds", isDirectory: true) }
    var preferences: URL { container.appendingPathComponent("Library/Preferences", isDirectory: true) }

    /// Writes `data` to `files/NAME` and returns its path.
    @discardableResult
    func file(_ name: String, _ data: Data) throws -> String {
        let url = files.appendingPathComponent(name)
        try data.write(to: url)
        return url.path
    }

    /// Runs `demo-host-app --group GROUP --root ROOT ARGUMENTS…`.
    @discardableResult
    func host(_ arguments: String..., group: String = Sandbox.group) async throws -> ProcessResult {
        try await run(Binary.hostApp, ["--group", group, "--root", root.path] + arguments)
    }

    /// Runs `demo-notification-service --group GROUP --root ROOT ARGUMENTS…`, the payload on stdin
    /// unless a file is among the arguments.
    func service(_ arguments: [String] = [], stdin: Data? = nil, group: String = Sandbox.group) async throws -> ProcessResult {
        try await run(Binary.notificationService, ["--group", group, "--root", root.path] + arguments, stdin: stdin)
    }

    /// Stores `NAME` as the chosen sound by running the host app, expecting success.
    func choose(_ name: String, _ data: Data, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let path = try file("source-" + name, data)
        let result = try await host("choose-sound", name, path)
        #expect(result.succeeded, "choose-sound \(name): \(result)", sourceLocation: sourceLocation)
    }

    func run(_ executable: URL, _ arguments: [String], stdin: Data? = nil) async throws -> ProcessResult {
        try await runProcess(executable, arguments, stdin: stdin)
    }
}

/// Runs `body` with a fresh sandbox, removed afterwards.
func withSandbox<T>(_ body: (Sandbox) async throws -> T) async throws -> T {
    try await withTemporaryDirectory(prefix: "DemoTests") { directory in
        let sandbox = Sandbox(directory: directory)
        try FileManager.default.createDirectory(at: sandbox.files, withIntermediateDirectories: true)
        return try await body(sandbox)
    }
}

/// Expects exactly one non-empty line on stderr, with no crash report, mentioning each fragment.
func expectOneLine(_ stderr: String, mentioning fragments: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    let lines = stderr.split(separator: "\n", omittingEmptySubsequences: false)
    #expect(
        lines.count == 2 && !lines[0].isEmpty && lines[1].isEmpty,
        "stderr should be one line: \(stderr.debugDescription)",
        sourceLocation: sourceLocation
    )
    for marker in ["Fatal error", "Backtrace", "Stack dump", "Crash"] {
        #expect(!stderr.contains(marker), "\(stderr)", sourceLocation: sourceLocation)
    }
    for fragment in fragments {
        #expect(
            stderr.contains(fragment),
            "stderr should mention \(fragment.debugDescription): \(stderr.debugDescription)",
            sourceLocation: sourceLocation
        )
    }
}

/// Expects a failure as the demo executables report one: a non-zero exit status (not a signal)
/// and one line on stderr.
func expectFailure(_ result: ProcessResult, mentioning fragments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(result.reason == .exit && result.status != 0, "\(result)", sourceLocation: sourceLocation)
    expectOneLine(result.stderr, mentioning: fragments, sourceLocation: sourceLocation)
}

/// Parses JSON into Foundation objects, for comparing payloads by meaning.
func json(_ data: Data) throws -> NSDictionary {
    try #require(try JSONSerialization.jsonObject(with: data) as? NSDictionary)
}
