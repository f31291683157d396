import Foundation
import GroupDefaultsWire
import HTTPTypes
import HummingbirdTesting
import NIOCore
import TestSupport
import Testing

/// `groupdefaults-server restore --from` keeps the security state of the store it replaces, with
/// the real executable: what was revoked, deleted or removed after the backup stays so, tokens made
/// since go on working, and the audit log keeps every record.
@Suite("Restore keeps tokens, operators, deletions and the audit log", .timeLimit(.minutes(1)))
struct RestoreKeepsSecurityStateTests {
    /// The status of a push of one value to `suite` with `token`, as a device uploads.
    private func status(_ port: Int, _ token: String, push suite: String) async throws -> Int {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            Int(try await client.post("/v1/suites/\(suite)/push", headers: API.auth(token), body: API.push([API.set("k", "v")])).status.code)
        }
    }

    @Test("revoked, deleted and removed after the backup stay so; a token made since works; the audit log holds every act and the restore")
    func restoreKeepsSecurityState() async throws {
        let dataDirectory = ServerTool.temporaryDirectory("gds-restore-keeps")
        let scratch = ServerTool.temporaryDirectory("gds-restore-keeps-backups")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: dataDirectory)
            try? FileManager.default.removeItem(atPath: scratch)
        }
        let storage = ["--data-dir", dataDirectory]
        func tool(_ arguments: [String]) async throws -> String {
            let result = try await ServerTool.run(arguments + storage)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            return result.stdout
        }
        func addOperator(_ name: String) async throws {
            let password = Data("password of \(name) \(UUID().uuidString)\n".utf8)
            let made = try await runProcess(ServerTool.executable, ["admin", "create", "--name", name] + storage, stdin: password)
            #expect(made.status == 0, "\(made.stderr)")
        }
        let alice = try await ServerTool.createToken(storage: storage)
        let carol = try await tool(["token", "create", "--account", "carol"]).trimmingCharacters(in: .whitespacesAndNewlines)
        try await addOperator("ops")
        try await addOperator("gone")
        let dave = try await tool(["token", "create", "--account", "dave"]).trimmingCharacters(in: .whitespacesAndNewlines)
        var server = try await ServerProcess(dataDirectory: dataDirectory)
        #expect(try await status(server.port, carol, push: "group.carol-CCCMARK") == 200)
        #expect(try await status(server.port, dave, push: "group.dave-DDDMARK") == 200)
        let backup = scratch + "/store.backup"
        let madeBackup = try await tool(["backup", "--to", backup])
        let keyFile = scratch + "/backup.key"
        let key = try #require(madeBackup.split(separator: "\n").first { $0.hasPrefix("backup key: ") }).dropFirst("backup key: ".count)
        try Data((key + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)

        // After the backup: alice's token revoked, a new one made, carol deleted, an operator removed.
        let aliceID = try #require(try await ServerTool.tokenIDs(storage: storage).first)
        _ = try await tool(["token", "revoke", aliceID])
        let newer = try await ServerTool.createToken(storage: storage)
        _ = try await tool(["accounts", "delete", "carol", "--yes"])
        // dave deleted, then made again: his new token stays, his data of before the deletion does not come back.
        _ = try await tool(["accounts", "delete", "dave", "--yes"])
        let daveAgain = try await tool(["token", "create", "--account", "dave"]).trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try await tool(["admin", "remove", "--name", "gone"])
        await server.stop()

        let restored = try await tool(["restore", "--from", backup])
        #expect(
            restored.contains(
                "accounts, tokens, members, invitations, pinned keys, key bags, devices, operators and the audit log kept as they were; 2 deleted accounts deleted again"
            ),
            "\(restored)"
        )

        // Their bytes are not in the restored store's file (erased from the staged copy, as after a delete; before
        // anything else opens it and finds the erase the delete left pending).
        let file = String(decoding: try Data(contentsOf: URL(fileURLWithPath: dataDirectory + "/sync.lmdb")), as: UTF8.self)
        #expect(!file.contains("CCCMARK") && !file.contains("DDDMARK"))
        server = try await ServerProcess(dataDirectory: dataDirectory)
        #expect(try await status(server.port, alice, push: "group.a") == 401)
        #expect(try await status(server.port, newer, push: "group.a") == 200)
        #expect(try await status(server.port, carol, push: "group.carol-CCCMARK") == 401)
        #expect(try await status(server.port, dave, push: "group.dave") == 401)
        #expect(try await status(server.port, daveAgain, push: "group.dave") == 200)
        await server.stop()
        let tokens = try await tool(["token", "list"])
        #expect(tokens.split(separator: "\n").first { $0.hasPrefix(aliceID + "\t") }?.contains("\trevoked ") == true, "\(tokens)")
        #expect(!tokens.contains("\tcarol\t"), "\(tokens)")
        // `accounts list` shows every account with a suite, a token or a device: carol has none left.
        let accounts = try await tool(["accounts", "list"])
        #expect(accounts.split(separator: "\n").map { $0.split(separator: "\t").first ?? "" } == ["alice", "dave"], "\(accounts)")
        #expect(!accounts.contains("DDDMARK") && accounts.contains("group.dave"), "\(accounts)")
        let operators = try await tool(["admin", "list"])
        #expect(operators.split(separator: "\n").map { $0.split(separator: "\t").first ?? "" } == ["ops"], "\(operators)")

        let audit = try await tool(["audit", "--json"])
        let acts = (try JSONSerialization.jsonObject(with: Data(audit.utf8)) as? [[String: Any]] ?? []).map { $0["act"] as? String ?? "" }
        #expect(
            acts == [
                "token-create", "token-create", "admin-create", "admin-create", "token-create", "backup", "token-revoke", "token-create",
                "account-delete", "account-delete", "token-create", "admin-remove", "restore",
            ],
            "\(audit)"
        )

        // On a new machine (no store to keep them from) they are the backup's, and it says so.
        let fresh = scratch + "/new-machine"
        let onNew = try await ServerTool.run(["restore", "--from", backup, "--data-dir", fresh, "--backup-key-file", keyFile])
        #expect(onNew.status == 0, "\(onNew.stderr)")
        #expect(
            onNew.stdout.contains(
                "accounts, tokens, members, invitations, pinned keys, key bags, devices, operators and the audit log are the backup's: there was no store"
            ),
            "\(onNew.stdout)"
        )
        #expect(try await ServerTool.run(["token", "list", "--data-dir", fresh]).stdout.contains("\tcarol\t"))
        // Over a store that does not open: the same, and why.
        try Data(repeating: 0x5A, count: 64 << 10).write(to: URL(fileURLWithPath: fresh + "/sync.lmdb"))
        let overDamaged = try await ServerTool.run(["restore", "--from", backup, "--data-dir", fresh])
        #expect(overDamaged.status == 0, "\(overDamaged.stderr)")
        #expect(overDamaged.stdout.contains("are the backup's: the store could not be read: "), "\(overDamaged.stdout)")
        #expect(overDamaged.stdout.split(separator: "\n").count == 2, "\(overDamaged.stdout)")
        #expect(try await ServerTool.run(["token", "list", "--data-dir", fresh]).stdout.contains("\tcarol\t"))
    }

    @Test("an account deleted after the backup stays deleted even when the backup's newest audit record came from a clock that was ahead")
    func deletedAccountWithClockAhead() async throws {
        let dataDirectory = ServerTool.temporaryDirectory("gds-restore-ahead")
        let scratch = ServerTool.temporaryDirectory("gds-restore-ahead-backups")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: dataDirectory)
            try? FileManager.default.removeItem(atPath: scratch)
        }
        let storage = ["--data-dir", dataDirectory]
        let zed = try await ServerTool.createToken(storage: storage, account: "zed")
        var server = try await ServerProcess(dataDirectory: dataDirectory)
        #expect(try await status(server.port, zed, push: "group.zed-ZZZMARK") == 200)
        await server.stop()
        // A command run while the machine's clock was an hour ahead writes the newest audit record.
        let ahead = try await BuiltExecutable.run(
            URL(fileURLWithPath: "/usr/bin/faketime"),
            ["-f", "+1h", ServerTool.executable.path, "token", "create", "--account", "ops"] + storage
        )
        #expect(ahead.status == 0, "\(ahead.stderr)")
        let backup = scratch + "/store.backup"
        #expect(try await ServerTool.run(["backup", "--to", backup] + storage).status == 0)
        #expect(try await ServerTool.run(["accounts", "delete", "zed", "--yes"] + storage).status == 0)
        let zedAgain = try await ServerTool.createToken(storage: storage, account: "zed")
        let restored = try await ServerTool.run(["restore", "--from", backup] + storage)
        #expect(restored.status == 0 && restored.stdout.contains("1 deleted account deleted again"), "\(restored)")
        server = try await ServerProcess(dataDirectory: dataDirectory)
        defer { server.signal(SIGTERM) }
        let suites = try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            try await client.get("/v1/suites", headers: API.auth(zedAgain)).body.map { String(buffer: $0) } ?? ""
        }
        #expect(!suites.contains("ZZZMARK"), "the new zed sees the old one's suite: \(suites)")
    }
}
