import Dispatch
import Foundation
import Glibc
import Testing

/// The real `groupdefaults-server` executable, built next to the test runner.
enum ServerTool {
    static let executable: URL = {
        let testBinary = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: testBinary).deletingLastPathComponent().appendingPathComponent("groupdefaults-server")
    }()

    /// Runs `groupdefaults-server ARGUMENTS…` to completion (off the cooperative pool).
    static func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                do {
                    let process = Process()
                    process.executableURL = executable
                    process.arguments = arguments
                    let out = Pipe(), err = Pipe()
                    process.standardOutput = out
                    process.standardError = err
                    try process.run()
                    let stdout = out.fileHandleForReading.readDataToEndOfFile()
                    let stderr = err.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    continuation.resume(returning: (process.terminationStatus, String(decoding: stdout, as: UTF8.self),
                                                    String(decoding: stderr, as: UTF8.self)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}

extension ServerTool {
    /// A fresh path for a data directory (not created: the server makes it, 0700).
    static func temporaryDirectory(_ prefix: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    }

    /// `token create --data-dir DIRECTORY --account alice EXTRA…`, as a separate process: the token,
    /// which must be the only line it prints.
    static func createToken(_ dataDirectory: String, _ extra: [String] = []) async throws -> String {
        let result = try await run(["token", "create", "--data-dir", dataDirectory, "--account", "alice"] + extra)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        return String(lines.first ?? "")
    }
}

/// A running `groupdefaults-server serve --port 0` on a data directory.
final class ServerProcess: @unchecked Sendable {  // the process is only touched from the test's task
    let process = Process()
    let port: Int
    private let stdout = Pipe()

    /// Serves the embedded store in `dataDirectory`, or, with nil, what `extraArguments` say
    /// (`--postgres-url`).
    init(dataDirectory: String?, extraArguments: [String] = []) async throws {
        process.executableURL = ServerTool.executable
        process.arguments = ["serve", "--port", "0", "--log-level", "warning"]
            + (dataDirectory.map { ["--data-dir", $0] } ?? []) + extraArguments
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = try await Self.firstLine(of: stdout.fileHandleForReading)
        let prefix = extraArguments.contains("--tls-cert") ? "listening on https://127.0.0.1:" : "listening on http://127.0.0.1:"
        guard line.hasPrefix(prefix), let port = Int(line.dropFirst(prefix.count)) else {
            process.terminate()
            throw ServerStartFailure(line: line)
        }
        self.port = port
    }

    /// The first line the server writes (its `listening on` line); the read blocks, so it runs on a
    /// dispatch queue.
    private static func firstLine(of handle: FileHandle) async throws -> String {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var bytes: [UInt8] = []
                var byte: UInt8 = 0
                while read(handle.fileDescriptor, &byte, 1) == 1, byte != 10 { bytes.append(byte) }
                continuation.resume(returning: String(decoding: bytes, as: UTF8.self))
            }
        }
    }

    /// What the server wrote to stdout after its first line, read to the end (call once it exited).
    func remainingOutput() -> String {
        String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the process to end (off the cooperative pool); its exit status, or nil if a signal killed it.
    func waitForExit() async -> (status: Int32, bySignal: Bool) {
        let process = self.process
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                process.waitUntilExit()
                continuation.resume(returning: (process.terminationStatus, process.terminationReason == .uncaughtSignal))
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

struct ServerStartFailure: Error, CustomStringConvertible {
    let line: String
    var description: String { "the server did not announce its port; its first line: \(line.debugDescription)" }
}
