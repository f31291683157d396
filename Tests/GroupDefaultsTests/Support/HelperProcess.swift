import Foundation
import Glibc
import Testing

/// The `GroupDefaultsTestHelper` executable, run as a separate process (see its main.swift).
struct HelperProcess {
    /// The helper binary, built next to the test bundle.
    static let executable: URL = {
        let testBinary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: testBinary).deletingLastPathComponent()
            .appendingPathComponent("GroupDefaultsTestHelper")
    }()

    struct Result {
        var status: Int32
        var reason: Process.TerminationReason
        var stdout: String
        var stderr: String
    }

    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let errors = Pipe()
    /// What the helper printed that `waitForLine` read past its line, for the next call and `finish`.
    private let unread = UnreadBytes()

    private final class UnreadBytes {
        var bytes: [UInt8] = []
    }

    /// Starts `GroupDefaultsTestHelper COMMAND DIRECTORY SUITE ARGS…`, or with `launcher`
    /// (`["unshare", "--pid", …]`) `LAUNCHER… GroupDefaultsTestHelper COMMAND …`.
    init(_ command: String, directory: URL, suite: String, _ arguments: [String] = [], launcher: [String] = []) throws {
        let helper = [command, directory.path, suite] + arguments
        if let program = launcher.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = launcher.dropFirst() + [Self.executable.path] + helper
        } else {
            process.executableURL = Self.executable
            process.arguments = helper
        }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// Releases a helper started with `--wait-for-go`.
    func go() {
        input.fileHandleForWriting.write(Data("go\n".utf8))
    }

    /// Blocks until the helper prints a line equal to `expected`; false if it ends first or prints
    /// nothing for `timeout` seconds. Lines before it are consumed; lines after it are kept for the
    /// next call and for `finish`.
    func waitForLine(_ expected: String, timeout: Int32 = 60) -> Bool {
        waitForLine(timeout: timeout) { $0 == expected } != nil
    }

    /// Blocks until the helper prints a line for which `matches` is true, and returns it; nil if it
    /// ends first or prints nothing for `timeout` seconds. Consumes lines as `waitForLine(_:)`.
    func waitForLine(timeout: Int32 = 60, where matches: (String) -> Bool) -> String? {
        let fd = output.fileHandleForReading.fileDescriptor
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            while let newline = unread.bytes.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: unread.bytes[..<newline], as: UTF8.self)
                unread.bytes.removeSubrange(...newline)
                if matches(line) { return line }
            }
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, timeout * 1000) == 1 else { return nil }
            let count = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { return nil }
            unread.bytes += chunk[..<count]
        }
    }

    func send(_ signal: Int32) {
        let rc = Glibc.kill(process.processIdentifier, signal)
        precondition(rc == 0, "kill(\(process.processIdentifier), \(signal)) failed: errno \(errno)")
    }

    /// Waits for the helper to end and collects what it printed.
    func finish() -> Result {
        input.fileHandleForWriting.closeFile()
        let out = Data(unread.bytes) + output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, reason: process.terminationReason,
            stdout: String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines),
            stderr: String(decoding: err, as: UTF8.self))
    }

    /// Runs a helper to completion.
    static func run(_ command: String, directory: URL, suite: String, _ arguments: [String] = []) throws -> Result {
        try HelperProcess(command, directory: directory, suite: suite, arguments).finish()
    }
}
