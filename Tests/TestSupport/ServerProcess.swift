import Dispatch
package import Foundation
import Glibc
package import ServerLaunching
import Testing

/// The real `groupdefaults-server` executable, built next to the test runner.
package enum ServerTool {
    package static let executable = BuiltExecutable.url("groupdefaults-server")

    /// Runs `groupdefaults-server ARGUMENTS…` to completion.
    package static func run(
        _ arguments: [String],
        environment: [String: String] = [:]
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let merged = environment.isEmpty ? nil : ProcessInfo.processInfo.environment.merging(environment) { $1 }
        return try await BuiltExecutable.run(executable, arguments, environment: merged)
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

    /// `token create --create STORAGE… --account ACCOUNT EXTRA…` (alice unless told; `STORAGE` is `--data-dir DIR` or
    /// `--postgres-url URL`; the store is made if no server made it yet): the token, which must be
    /// the only line it prints.
    package static func createToken(storage: [String], account: String = "alice", _ extra: [String] = []) async throws -> String {
        let result = try await run(["token", "create", "--create"] + storage + ["--account", account] + extra)
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

/// A running `groupdefaults-server serve` on a data directory or a PostgreSQL database (the launcher
/// the benchmark uses too); its start is awaited off the cooperative pool, its end holding no thread.
package final class ServerProcess: Sendable {
    private let server: LaunchedServer

    /// Serves the embedded store in `dataDirectory`, or, with nil, what `extraArguments` say
    /// (`--postgres-url`), on `port` (0: a free one, announced on the first line); its log goes to
    /// the test's stderr with `keepsStderr`.
    package init(dataDirectory: String?, port: Int = 0, extraArguments: [String] = [], keepsStderr: Bool = false) async throws {
        let arguments = (dataDirectory.map { ["--data-dir", $0] } ?? []) + extraArguments
        server = try await offThePool {
            try LaunchedServer(executable: ServerTool.executable, port: port, arguments: arguments, keepsStderr: keepsStderr)
        }
    }

    /// The server's process.
    package var process: SpawnedProcess { server.process }

    /// The port it announced.
    package var port: Int { server.port }

    /// `http://127.0.0.1:PORT`.
    package var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// What the server wrote to stdout after its first line, read to the end (call once it exited).
    package func remainingOutput() -> String {
        server.remainingOutput()
    }

    /// Sends `number` to the server, if it still runs (never to a process id that may have been
    /// reused since it exited).
    package func signal(_ number: Int32) {
        server.signal(number)
    }

    /// Waits for the process to end (holding no thread): its exit status, and whether a signal ended it.
    package func waitForExit() async -> (status: Int32, bySignal: Bool) {
        await server.process.exited()
        return server.waitForExit()
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
}

/// Runs `work`, which blocks its thread, on a thread of its own: neither on the cooperative pool
/// nor on the shared dispatch queues, which on Linux draw on as few threads as there are cores
/// (and add one at most every second or so while those are blocked).
package func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}
