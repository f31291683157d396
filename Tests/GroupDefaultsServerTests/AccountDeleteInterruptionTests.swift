import Foundation
import TestSupport
import Testing

/// `groupdefaults-server accounts delete`, stopped at each step it reaches (`InterruptionPoint`:
/// a kill, and a Ctrl-C at its first step), then run again: the delete completes (or says it is
/// done), the account is gone with one audit record, the other account is whole, and on the
/// embedded store nothing of the deleted account is left in any file (no staging folder, no mark).
/// Real processes on both backends.
@Suite("accounts delete, interrupted at each of its steps", .timeLimit(.minutes(3)))
struct AccountDeleteInterruptionTests {
    @Test("run again after an interruption at any step, the delete completes", arguments: StorageBackend.allCases)
    func interruptedAtEveryStep(backend: StorageBackend) async throws {
        let steps = try await Self.withTwoAccounts(backend) { storage in
            let log = ServerTool.temporaryDirectory("gds-interrupt-log")
            defer { try? FileManager.default.removeItem(atPath: log) }
            let deleted = try await Self.delete(storage, environment: ["GROUPDEFAULTS_INTERRUPT_LOG": log])
            #expect(deleted.status == 0, "\(deleted.stderr)")
            return try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        }
        var expected = ["accounts-delete.confirmed", "accounts-delete.deleted"]
        if backend == .lmdb {
            expected = [
                "accounts-delete.confirmed", "accounts-delete.erase-marked", "accounts-delete.deleted", "accounts-delete.erase-staged",
                "accounts-delete.erase-renamed",
            ]
        }
        #expect(steps == expected)
        for (index, step) in steps.enumerated() {
            for signal in index == 0 ? ["SIGKILL", "SIGINT"] : ["SIGKILL"] {
                try await Self.withTwoAccounts(backend) { storage in
                    let interrupted = try await Self.delete(storage, environment: ["GROUPDEFAULTS_INTERRUPT_AT": "\(step)@\(signal)"])
                    #expect(interrupted.status != 0, "stopped at \(step)")
                    let again = try await Self.delete(storage)
                    #expect(again.status == 0, "after \(step)@\(signal): \(again.stderr)")
                    #expect(
                        again.stdout.contains("deleted account zed") || again.stdout.contains("account zed is already deleted"),
                        "after \(step)@\(signal): \(again.stdout)"
                    )
                    try await Self.expectDeleted(storage, after: "\(step)@\(signal)")
                }
            }
        }
    }

    /// A fresh store with zed (a token whose device name carries ZZZMARK) and bob.
    private static func withTwoAccounts<T>(_ backend: StorageBackend, _ body: (_ storage: [String]) async throws -> T) async throws -> T {
        let (storage, cleanup) = try await backend.serverStorage("gds-delete")
        defer { cleanup() }
        _ = try await ServerTool.createToken(storage: storage, account: "zed", ["--device", "phone-ZZZMARK"])
        _ = try await ServerTool.createToken(storage: storage, account: "bob")
        return try await body(storage)
    }

    private static func delete(
        _ storage: [String],
        environment: [String: String] = [:]
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await BuiltExecutable.run(
            ServerTool.executable,
            ["accounts", "delete", "zed", "--yes"] + storage,
            environment: ProcessInfo.processInfo.environment.merging(environment) { $1 }
        )
    }

    /// zed is gone, deleted once (one audit record), bob is whole; on the embedded store no file of
    /// the data directory holds zed's marker, and no erase is left pending.
    private static func expectDeleted(_ storage: [String], after step: String) async throws {
        let list = try await ServerTool.run(["accounts", "list", "--json"] + storage)
        let accounts = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(accounts.compactMap { $0["account"] as? String } == ["bob"], "after \(step): \(list.stdout)")
        let audit = try await ServerTool.run(["audit", "--account", "zed", "--json"] + storage)
        let records = try JSONSerialization.jsonObject(with: Data(audit.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(records.filter { $0["act"] as? String == "account-delete" }.count == 1, "after \(step): \(audit.stdout)")
        guard storage.first == "--data-dir" else { return }
        let directory = storage[1]
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(!names.contains { $0.hasPrefix(".erase-") || $0 == "sync.lmdb-erase-pending" }, "after \(step): \(names)")
        #expect(try AccountEraseTests.occurrences(of: "ZZZMARK", under: directory) == 0, "after \(step)")
    }
}
