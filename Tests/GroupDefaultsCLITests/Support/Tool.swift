import Foundation
import Glibc
import Testing

/// The `groupdefaults` binary under test, built next to the test runner.
enum Tool {
    static let executable: URL = {
        let testBinary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: testBinary).deletingLastPathComponent().appendingPathComponent("groupdefaults")
    }()
}

/// What a finished process did.
struct ProcessResult: CustomStringConvertible {
    var status: Int32
    var reason: Process.TerminationReason
    var stdoutData: Data
    var stderr: String

    var stdout: String { String(decoding: stdoutData, as: UTF8.self) }

    /// True when the process exited (was not killed by a signal) with status 0.
    var succeeded: Bool { reason == .exit && status == 0 }

    var description: String {
        "status \(status)\(reason == .uncaughtSignal ? " (signal)" : ""), stdout: \(stdout.debugDescription), stderr: \(stderr.debugDescription)"
    }
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

    /// The child's environment: ours, with `$GROUPDEFAULTS_DIR` set to `suites/`, no
    /// `$XDG_DATA_HOME`, and `$HOME` inside the sandbox (so that a tool that ignored the variable
    /// could not touch the real home).
    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["GROUPDEFAULTS_DIR"] = suites.path
        environment["XDG_DATA_HOME"] = nil
        environment["HOME"] = root.appendingPathComponent("home").path
        return environment
    }

    /// Runs `groupdefaults ARGUMENTS…` to completion.
    @discardableResult
    func run(_ arguments: String..., stdin: Data? = nil) throws -> ProcessResult {
        try run(arguments, stdin: stdin)
    }

    @discardableResult
    func run(_ arguments: [String], stdin: Data? = nil, environment: [String: String]? = nil) throws -> ProcessResult {
        try runProcess(Tool.executable, arguments, stdin: stdin, environment: environment ?? self.environment)
    }

    /// Runs the tool and expects it to succeed with nothing on stderr; returns its stdout.
    @discardableResult
    func ok(_ arguments: String..., stdin: Data? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try ok(arguments, stdin: stdin, sourceLocation: sourceLocation)
    }

    @discardableResult
    func ok(_ arguments: [String], stdin: Data? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try run(arguments, stdin: stdin)
        #expect(result.succeeded, "groupdefaults \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.isEmpty, "groupdefaults \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        return result.stdout
    }

    /// The suite's whole content as the tool's lossless typed JSON (compare before and after).
    func contents(_ suite: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        try ok("export", suite, "-", "--format", "json", sourceLocation: sourceLocation)
    }

    /// The suite's whole content, parsed.
    func typedContents(_ suite: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        try JSONValue.parse(contents(suite, sourceLocation: sourceLocation))
    }

    /// Starts `groupdefaults ARGUMENTS…` with its stdout readable line by line.
    func start(_ arguments: [String], blockingTermination: Bool = false) throws -> RunningProcess {
        try RunningProcess(
            Tool.executable, arguments, environment: environment, stderrFile: uniqueFile("stderr"),
            blockingTermination: blockingTermination)
    }

    /// Starts `/bin/sh -c SCRIPT sh ARGUMENTS…`, with `$GD` the tool's path.
    func startShell(_ script: String, _ arguments: [String] = []) throws -> RunningProcess {
        var environment = self.environment
        environment["GD"] = Tool.executable.path
        return try RunningProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", script, "sh"] + arguments, environment: environment,
            stderrFile: uniqueFile("stderr"))
    }

    /// Runs `python3 -c SCRIPT ARGUMENTS…` (with this process's environment, so that the
    /// interpreter is found as in a shell).
    func python(_ script: String, _ arguments: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let result = try runProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script] + arguments, stdin: nil,
            environment: ProcessInfo.processInfo.environment)
        #expect(result.succeeded, "python3: \(result)", sourceLocation: sourceLocation)
        return result.stdout
    }

    /// The suite's last change sequence number, from `info`.
    func lastChange(_ suite: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> UInt64 {
        let info = try ok("info", suite, sourceLocation: sourceLocation)
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

    private func runProcess(_ executable: URL, _ arguments: [String], stdin: Data?, environment: [String: String]) throws -> ProcessResult {
        // Output goes to files, not pipes: no pipe can fill up while we wait.
        let outFile = uniqueFile("stdout"), errFile = uniqueFile("stderr")
        _ = FileManager.default.createFile(atPath: outFile.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
        defer {
            try? FileManager.default.removeItem(at: outFile)
            try? FileManager.default.removeItem(at: errFile)
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        let out = try FileHandle(forWritingTo: outFile), err = try FileHandle(forWritingTo: errFile)
        defer {
            try? out.close()
            try? err.close()
        }
        process.standardOutput = out
        process.standardError = err
        var inFile: URL?
        if let stdin {
            let file = uniqueFile("stdin")
            _ = FileManager.default.createFile(atPath: file.path, contents: stdin)
            inFile = file
            process.standardInput = try FileHandle(forReadingFrom: file)
        } else {
            process.standardInput = FileHandle.nullDevice
        }
        defer { if let inFile { try? FileManager.default.removeItem(at: inFile) } }
        try process.run()
        process.waitUntilExit()
        return ProcessResult(
            status: process.terminationStatus, reason: process.terminationReason,
            stdoutData: try Data(contentsOf: outFile), stderr: String(decoding: try Data(contentsOf: errFile), as: UTF8.self))
    }
}

/// Runs `body` with a fresh sandbox, removed afterwards.
func withSandbox<T>(_ body: (Sandbox) throws -> T) throws -> T {
    let root = FileManager.default.temporaryDirectory
        .appendingPathComponent("groupdefaultsTests-\(UUID().uuidString)", isDirectory: true)
    let sandbox = Sandbox(root: root)
    try FileManager.default.createDirectory(at: sandbox.files, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: root) }
    return try body(sandbox)
}

/// A process that runs while the test reads its stdout line by line.
final class RunningProcess {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let stderrFile: URL
    private var buffer: [UInt8] = []
    private var atEnd = false
    private var inputClosed = false

    /// Starts the process. A child inherits the signal mask of the thread that starts it, and the
    /// test runner's threads block SIGINT and SIGTERM; by default they are unblocked for the child,
    /// as in a process started from a shell. `blockingTermination` starts it with them blocked.
    init(
        _ executable: URL, _ arguments: [String], environment: [String: String], stderrFile: URL,
        blockingTermination: Bool = false
    ) throws {
        self.stderrFile = stderrFile
        _ = FileManager.default.createFile(atPath: stderrFile.path, contents: nil)
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        process.standardInput = input
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        var termination = sigset_t()
        sigemptyset(&termination)
        sigaddset(&termination, SIGINT)
        sigaddset(&termination, SIGTERM)
        var saved = sigset_t()
        pthread_sigmask(blockingTermination ? SIG_BLOCK : SIG_UNBLOCK, &termination, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        try process.run()
    }

    /// Writes to the process's stdin.
    func send(_ text: String) {
        input.fileHandleForWriting.write(Data(text.utf8))
    }

    func closeInput() {
        guard !inputClosed else { return }
        inputClosed = true
        try? input.fileHandleForWriting.close()
    }

    /// The next line of stdout; nil if stdout ends, or no whole line arrives within `timeout`.
    func nextLine(timeout: Duration = .seconds(60)) -> String? {
        let deadline = ContinuousClock.now + timeout
        let fd = output.fileHandleForReading.fileDescriptor
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if atEnd { return nil }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return nil }
            let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pending, 1, Int32(clamping: milliseconds))
            if ready < 0 {
                if errno == EINTR { continue }
                return nil
            }
            guard ready > 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 {
                atEnd = true
            } else {
                buffer += chunk[..<count]
            }
        }
    }

    /// Reads lines until one satisfies `predicate`; false if stdout ends or the time runs out first.
    func waitForLine(timeout: Duration = .seconds(60), where predicate: (String) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while let line = nextLine(timeout: deadline - ContinuousClock.now) {
            if predicate(line) { return true }
        }
        return false
    }

    func signal(_ signal: Int32) {
        guard process.isRunning else { return }
        _ = Glibc.kill(process.processIdentifier, signal)
    }

    /// Reads stdout (kept for `finish`) until it ends, which it does when the process exits;
    /// false if it has not ended within `timeout`.
    func waitForEnd(timeout: Duration = .seconds(20)) -> Bool {
        var lines: [String] = []
        let deadline = ContinuousClock.now + timeout
        while let line = nextLine(timeout: deadline - ContinuousClock.now) { lines.append(line) }
        let ended = atEnd
        // Put the lines back, for `finish`.
        buffer = Array(lines.map { $0 + "\n" }.joined().utf8) + buffer
        return ended
    }

    /// Sends `signal` and collects the result once the process has ended; nil (after recording
    /// an issue) if it is still running `timeout` later. `stop` then kills it.
    func end(with signal: Int32, timeout: Duration = .seconds(20), sourceLocation: SourceLocation = #_sourceLocation) -> ProcessResult? {
        self.signal(signal)
        guard waitForEnd(timeout: timeout) else {
            Issue.record("still running \(timeout) after signal \(signal)", sourceLocation: sourceLocation)
            return nil
        }
        return finish()
    }

    /// Closes stdin, waits for the process to end, and collects the rest of stdout and stderr.
    func finish() -> ProcessResult {
        closeInput()
        var rest = buffer
        buffer = []
        if !atEnd { rest += output.fileHandleForReading.readDataToEndOfFile() }
        atEnd = true
        process.waitUntilExit()
        let stderr = (try? Data(contentsOf: stderrFile)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return ProcessResult(status: process.terminationStatus, reason: process.terminationReason, stdoutData: Data(rest), stderr: stderr)
    }

    /// For `defer`: kills the process if a failed test left it running, and reaps it.
    func stop() {
        if process.isRunning {
            signal(SIGKILL)
        }
        _ = finish()
    }
}

// MARK: - Expectations

/// Expects a failure reported as the tool promises: a non-zero exit status (not a signal), exactly
/// one line on stderr (no stack trace), and that line mentioning each of `fragments`.
func expectOneLineFailure(
    _ result: ProcessResult, mentioning fragments: [String] = [], _ context: String = "",
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.reason == .exit, "\(context): ended by a signal: \(result)", sourceLocation: sourceLocation)
    #expect(result.status != 0, "\(context): \(result)", sourceLocation: sourceLocation)
    let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
    #expect(
        lines.count == 2 && !lines[0].isEmpty && lines[1].isEmpty,
        "\(context): stderr should be exactly one line: \(result.stderr.debugDescription)", sourceLocation: sourceLocation)
    for marker in ["Fatal error", "Backtrace", "Stack dump", "Current stack trace", "Crash"] {
        #expect(!result.stderr.contains(marker), "\(context): \(result)", sourceLocation: sourceLocation)
    }
    for fragment in fragments {
        #expect(result.stderr.contains(fragment), "\(context): stderr should mention \(fragment.debugDescription): \(result)", sourceLocation: sourceLocation)
    }
}

// MARK: - JSON

/// Any JSON value, for comparing JSON texts by meaning (integers kept apart from other numbers).
enum JSONValue: Equatable, Decodable, CustomStringConvertible {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let bool = try? container.decode(Bool.self) {
            self = .bool(bool)
        } else if let int = try? container.decode(Int64.self) {
            self = .integer(int)
        } else if let double = try? container.decode(Double.self) {
            self = .double(double)
        } else if let string = try? container.decode(String.self) {
            self = .string(string)
        } else if let array = try? container.decode([JSONValue].self) {
            self = .array(array)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    static func parse(_ text: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let bool): "\(bool)"
        case .integer(let int): "\(int)"
        case .double(let double): "\(double)"
        case .string(let string): string.debugDescription
        case .array(let elements): "[" + elements.map(\.description).joined(separator: ", ") + "]"
        case .object(let object):
            "{" + object.sorted { $0.key < $1.key }.map { "\($0.key.debugDescription): \($0.value)" }.joined(separator: ", ") + "}"
        }
    }
}
