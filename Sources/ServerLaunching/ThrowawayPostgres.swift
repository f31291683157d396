package import Foundation
import Glibc

/// A throwaway PostgreSQL 15 from `Tools/postgres start --until-exit PID` (it stops by itself once
/// this process has exited, or at `stop`), as the tests and the benchmark use it. Calls block their
/// thread.
package final class ThrowawayPostgres: @unchecked Sendable {  // `stopped` is only touched by its owner
    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    package let url: String
    private let tool: String
    private var stopped = false

    /// Where Debian's PostgreSQL 15 keeps its programs (psql and pgbench are also in /usr/bin).
    package static let binDirectory = "/usr/lib/postgresql/15/bin"

    /// Starts a server with `tool` (the path of `Tools/postgres`).
    package init(tool: String) throws {
        self.tool = tool
        let started = try runTool(tool, ["start", "--until-exit", String(getpid())])
        guard started.status == 0, let url = started.stdout.split(separator: "\n").last.map(String.init), url.hasPrefix("postgres://")
        else { throw PostgresFailure("\(tool) start failed (exit \(started.status))", stderr: started.stderr) }
        self.url = url
    }

    /// The server's postmaster (the first line of postmaster.pid in the directory `Tools/postgres`
    /// registered for its port), whose children are the backends.
    package var postmaster: pid_t? {
        guard let port = url.split(separator: ":").last?.split(separator: "/").first else { return nil }
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        guard let directory = try? String(contentsOfFile: "\(base)/groupdefaults-postgres.\(port)", encoding: .utf8),
            let pidFile = try? String(
                contentsOfFile: directory.trimmingCharacters(in: .whitespacesAndNewlines) + "/data/postmaster.pid",
                encoding: .utf8
            )
        else { return nil }
        return pidFile.split(separator: "\n").first.flatMap { pid_t($0) }
    }

    /// Stops the server and removes its directory (once).
    package func stop() throws {
        guard !stopped else { return }
        stopped = true
        _ = try runTool(tool, ["stop", url])
    }

    /// Runs SQL with psql on this server's `postgres` database; its output.
    @discardableResult
    package func psql(_ sql: String) throws -> String {
        try Self.psql(url, sql)
    }

    /// Runs SQL with psql on the database at `url` (administration the storage does not offer:
    /// databases, backends); its output.
    @discardableResult
    package static func psql(_ url: String, _ sql: String) throws -> String {
        let result = try runTool(executable("psql"), ["-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        guard result.status == 0 else { throw PostgresFailure("psql failed (exit \(result.status)): \(sql)", stderr: result.stderr) }
        return result.stdout
    }

    /// A PostgreSQL program (`psql`, `pgbench`): in `binDirectory`, else in /usr/bin.
    package static func executable(_ name: String) -> String {
        let path = binDirectory + "/" + name
        return FileManager.default.isExecutableFile(atPath: path) ? path : "/usr/bin/" + name
    }
}

/// A PostgreSQL program that failed: what was run and its exit status; `stderr` is what it said.
package struct PostgresFailure: Error, CustomStringConvertible {
    /// What failed, e.g. `psql failed (exit 1): SELECT …`.
    package let description: String
    /// What the program wrote to stderr.
    package let stderr: String

    init(_ description: String, stderr: String) {
        self.description = description
        self.stderr = stderr
    }
}

/// Runs `path ARGUMENTS…` to completion: its exit status (128 + the signal's number if one ended it)
/// and output. stderr goes to a file, so that neither output can fill a pipe and stall the child.
package func runTool(_ path: String, _ arguments: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
    let errFile = FileManager.default.temporaryDirectory.appendingPathComponent("tool-stderr-\(UUID().uuidString)")
    _ = FileManager.default.createFile(atPath: errFile.path, contents: nil)
    defer { try? FileManager.default.removeItem(at: errFile) }
    let process = SpawnedProcess()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let out = Pipe()
    let err = try FileHandle(forWritingTo: errFile)
    defer { try? err.close() }
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    return (status, String(decoding: stdout, as: UTF8.self), String(decoding: (try? Data(contentsOf: errFile)) ?? Data(), as: UTF8.self))
}
