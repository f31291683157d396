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

    /// Starts `GroupDefaultsTestHelper COMMAND DIRECTORY SUITE ARGS…`.
    init(_ command: String, directory: URL, suite: String, _ arguments: [String] = []) throws {
        process.executableURL = Self.executable
        process.arguments = [command, directory.path, suite] + arguments
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
    /// nothing for `timeout` seconds.
    func waitForLine(_ expected: String, timeout: Int32 = 60) -> Bool {
        let fd = output.fileHandleForReading.fileDescriptor
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pending, 1, timeout * 1000) == 1 else { return false }
            let count = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { return false }
            buffer += chunk[..<count]
            let lines = String(decoding: buffer, as: UTF8.self).split(separator: "\n")
            if lines.contains(where: { $0 == expected }) { return true }
        }
    }

    func send(_ signal: Int32) {
        let rc = Glibc.kill(process.processIdentifier, signal)
        precondition(rc == 0, "kill(\(process.processIdentifier), \(signal)) failed: errno \(errno)")
    }

    /// Waits for the helper to end and collects what it printed.
    func finish() -> Result {
        input.fileHandleForWriting.closeFile()
        let out = output.fileHandleForReading.readDataToEndOfFile()
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
