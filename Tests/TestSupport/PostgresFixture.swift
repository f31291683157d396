package import Foundation
import Glibc
import ServerLaunching
import Testing

/// The PostgreSQL server of this test process: `Tools/postgres start`, once, on first use (it stops
/// by itself when this process exits), or the one `GROUPDEFAULTS_POSTGRES_URL` names. Each test
/// gets its own database, so tests run in parallel.
package enum PostgresFixture {
    private static let server = Task<String, any Error> {
        if let url = ProcessInfo.processInfo.environment["GROUPDEFAULTS_POSTGRES_URL"], !url.isEmpty { return url }
        let tool = packageRoot.appendingPathComponent("Tools/postgres").path
        return try await offThePool { try ThrowawayPostgres(tool: tool).url }
    }

    /// The package's root directory (this file is Tests/TestSupport/PostgresFixture.swift).
    package static var packageRoot: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    /// The server's URL (its `postgres` database).
    package static func serverURL() async throws -> String {
        do {
            return try await server.value
        } catch {
            throw FixtureError("PostgreSQL could not be started for the tests: \(error)")
        }
    }

    /// A new, empty database; returns its URL.
    package static func freshDatabase() async throws -> String {
        let url = try await serverURL()
        let name = "gd_test_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await psql(url, "CREATE DATABASE \(name)")
        guard let slash = url.lastIndex(of: "/") else { throw FixtureError("no database in \(url)") }
        return url[...slash] + name
    }

    /// Runs a PostgreSQL program of the fixture's version (`pg_dump`, `pg_restore`) to completion;
    /// throws with what it said when it fails.
    package static func runProgram(_ name: String, _ arguments: [String]) async throws {
        let result = try await offThePool { try runTool(ThrowawayPostgres.executable(name), arguments) }
        guard result.status == 0 else { throw FixtureError("\(name) failed (exit \(result.status)): \(result.stderr)") }
    }

    /// Runs SQL with psql (administration the storage does not offer: databases, backends).
    @discardableResult
    package static func psql(_ url: String, _ sql: String) async throws -> String {
        try await offThePool { try ThrowawayPostgres.psql(url, sql) }.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The whole database as `pg_dump` writes it (a test that looks for what must not be there).
    package static func dump(_ url: String) async throws -> String {
        let result = try await offThePool { try runTool(ThrowawayPostgres.executable("pg_dump"), ["--no-owner", url]) }
        guard result.status == 0 else { throw FixtureError("pg_dump failed (exit \(result.status)): \(result.stderr)") }
        return result.stdout
    }
}

/// Where a server keeps its data in a test: the embedded LMDB store or PostgreSQL. Tests that must
/// hold for both take it as their argument (`@Test(arguments: StorageBackend.allCases)`).
package enum StorageBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case lmdb
    case postgres

    package var testDescription: String { rawValue }

    /// The storage options of `groupdefaults-server serve` and its token commands for a fresh,
    /// empty store (`--data-dir DIR` or `--postgres-url URL`), and how to remove it afterwards.
    package func serverStorage(_ prefix: String = "gds") async throws -> (arguments: [String], cleanup: @Sendable () -> Void) {
        switch self {
        case .lmdb:
            let directory = ServerTool.temporaryDirectory(prefix)
            return (["--data-dir", directory], { try? FileManager.default.removeItem(atPath: directory) })
        case .postgres:
            // The database is dropped with the throwaway server.
            return (["--postgres-url", try await PostgresFixture.freshDatabase()], {})
        }
    }
}

package struct FixtureError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// A child process, awaited without blocking a thread.
package enum Command {
    /// Runs `EXECUTABLE ARGUMENTS…` (found in the PATH) to completion: its stdout, trimmed; throws if
    /// it fails, with what it wrote to stderr.
    @discardableResult
    package static func run(_ executable: String, _ arguments: [String]) async throws -> String {
        let result = try await BuiltExecutable.run(URL(fileURLWithPath: "/usr/bin/env"), [executable] + arguments)
        guard result.status == 0 else {
            throw FixtureError("\(executable) \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)")
        }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
