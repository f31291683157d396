import Dispatch
package import Foundation
import Glibc
import Testing

/// The real `groupdefaults-server` executable, built next to the test runner.
package enum ServerTool {
    package static let executable = BuiltExecutable.url("groupdefaults-server")

    /// Runs `groupdefaults-server ARGUMENTS…` to completion (off the cooperative pool).
    package static func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await BuiltExecutable.run(executable, arguments)
    }

    /// A fresh path for a data directory (not created: the server makes it, 0700).
    package static func temporaryDirectory(_ prefix: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    }

    /// `token create --data-dir DIRECTORY --account alice EXTRA…`, as a separate process: the token,
    /// which must be the only line it prints.
    package static func createToken(_ dataDirectory: String, _ extra: [String] = []) async throws -> String {
        try await createToken(storage: ["--data-dir", dataDirectory], extra)
    }

    /// `token create STORAGE… --account alice EXTRA…` (`STORAGE` is `--data-dir DIR` or
    /// `--postgres-url URL`): the token, which must be the only line it prints.
    package static func createToken(storage: [String], _ extra: [String] = []) async throws -> String {
        let result = try await run(["token", "create"] + storage + ["--account", "alice"] + extra)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 1)
        return String(lines.first ?? "")
    }

    /// The ids of the tokens `token list STORAGE…` shows, oldest first.
    package static func tokenIDs(storage: [String]) async throws -> [String] {
        let list = try await run(["token", "list"] + storage)
        #expect(list.status == 0, "\(list.stderr)")
        return list.stdout.split(separator: "\n").compactMap { $0.split(separator: "\t").first.map(String.init) }
    }
}

/// A running `groupdefaults-server serve` on a data directory or a PostgreSQL database.
package final class ServerProcess: @unchecked Sendable {  // the process is only touched from the test's task
    package let process = Process()
    package let port: Int
    private let stdout = Pipe()

    /// Serves the embedded store in `dataDirectory`, or, with nil, what `extraArguments` say
    /// (`--postgres-url`), on `port` (0: a free one, announced on the first line).
    package init(dataDirectory: String?, port: Int = 0, extraArguments: [String] = []) async throws {
        process.executableURL = ServerTool.executable
        process.arguments = ["serve", "--port", String(port), "--log-level", "warning"]
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

    /// `http://127.0.0.1:PORT`.
    package var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

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
    package func remainingOutput() -> String {
        String(decoding: stdout.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Sends `number` to the server, if it still runs (never to a process id that may have been
    /// reused since it exited).
    package func signal(_ number: Int32) {
        if process.isRunning { kill(process.processIdentifier, number) }
    }

    /// Waits for the process to end (off the cooperative pool); its exit status, or nil if a signal killed it.
    package func waitForExit() async -> (status: Int32, bySignal: Bool) {
        let process = self.process
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                process.waitUntilExit()
                continuation.resume(returning: (process.terminationStatus, process.terminationReason == .uncaughtSignal))
            }
        }
    }

    /// SIGTERM, then SIGKILL if it has not exited within `grace`; returns once it is gone.
    package func stop(grace: Duration = .seconds(10)) async {
        guard process.isRunning else { return }
        signal(SIGTERM)
        let exited = Task { await waitForExit() }
        let killer = Task {
            try await Task.sleep(for: grace)
            self.signal(SIGKILL)
        }
        _ = await exited.value
        killer.cancel()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

package struct ServerStartFailure: Error, CustomStringConvertible {
    package let line: String
    package var description: String { "the server did not announce its port; its first line: \(line.debugDescription)" }
}
