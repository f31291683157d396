import Foundation
import Glibc
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

/// `groupdefaults-server accounts list|export|delete` and `audit`, as separate processes beside a
/// running server, on both backends.
@Suite("Accounts and the audit log (live)", .timeLimit(.minutes(2)))
struct AccountsAndAuditTests {
    private func push(_ port: Int, _ token: String, suite: String, _ ops: [PushOp]) async throws {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            let response = try await client.post("/v1/suites/\(suite)/push", headers: API.auth(token), body: API.push(ops))
            #expect(response.status == .ok)
        }
    }

    @Test(
        "list, export to a new 0600 file, delete beside a running server: the account's stream ends, its token gets 401, bob's data stays; every act audited without a secret",
        arguments: StorageBackend.allCases
    )
    func accountsBesideARunningServer(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.serverStorage("gds-accounts")
        defer { cleanup() }
        let alice = try await ServerTool.createToken(storage: storage, ["--device", "phone-AAAMARK"])
        let bobMade = try await ServerTool.run(["token", "create"] + storage + ["--account", "bob"])
        let bob = bobMade.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let server = try await ServerProcess(dataDirectory: nil, extraArguments: storage + ["--heartbeat", "1"])
        defer { server.signal(SIGTERM) }
        try await push(server.port, alice, suite: "group.AAAMARK", [API.set("k-AAAMARK", "v-AAAMARK"), API.delete("gone-AAAMARK")])
        try await push(server.port, bob, suite: "group.BBBMARK", [API.set("k-BBBMARK", "v-BBBMARK")])

        let list = try await ServerTool.run(["accounts", "list"] + storage)
        #expect(list.status == 0, "\(list.stderr)")
        let lines = list.stdout.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(lines.map { $0.first ?? "" } == ["alice", "bob"])
        #expect(lines.first?[1] == "group.AAAMARK" && lines.first?[2] == "tokens 1/1 active", "\(lines)")
        let json = try await ServerTool.run(["accounts", "list", "--json"] + storage)
        #expect(json.status == 0 && json.stdout.contains("\"account\" : \"bob\""), "\(json)")

        // Export: to stdout, and to a new file (0600) that is never overwritten.
        let folder = ServerTool.temporaryDirectory("gds-export")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/alice.json"
        let exported = try await ServerTool.run(["accounts", "export", "alice", "--to", file] + storage)
        #expect(exported.status == 0 && exported.stdout.isEmpty, "\(exported)")
        let document = try String(contentsOfFile: file, encoding: .utf8)
        #expect(document.contains("\"format\" : \"groupdefaults-account-export\"") && document.contains("\"version\" : 2"))
        #expect(document.contains("v-AAAMARK") && document.contains("gone-AAAMARK") && !document.contains("BBBMARK"))
        #expect(!document.contains(alice))
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)
        let again = try await ServerTool.run(["accounts", "export", "alice", "--to", file] + storage)
        #expect(again.status == 1 && again.stderr == "groupdefaults-server: cannot create \(file): it exists (give a new path)\n", "\(again)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == document)
        let unknownExport = try await ServerTool.run(["accounts", "export", "nobody"] + storage)
        #expect(unknownExport.status == 1 && unknownExport.stderr.split(separator: "\n").count == 1, "\(unknownExport)")

        // An open stream of alice's; delete needs --yes when nobody can be asked.
        let url = "http://127.0.0.1:\(server.port)/v1/suites/group.AAAMARK/events"
        let live = try Curl(["-H", "Authorization: Bearer \(alice)", "-H", "Last-Event-ID: 0", url])
        #expect(await live.events(2).count == 2)
        let refused = try await ServerTool.run(["accounts", "delete", "alice"] + storage)
        #expect(refused.status == 1 && refused.stderr.contains("give --yes"), "\(refused)")
        let deleted = try await ServerTool.run(["accounts", "delete", "alice", "--yes"] + storage)
        // The embedded store's file keeps the bytes while the server has it open (AccountEraseTests).
        let said =
            backend == .lmdb
            ? "deleted account alice; a server or another command has the store open: "
                + "its bytes leave the store's file when the store is next opened alone\n" : "deleted account alice\n"
        #expect(deleted.status == 0 && deleted.stdout == said, "\(deleted)")
        #expect(await live.events(1, timeout: .seconds(5)).map(\.event) == ["unauthorized"])
        _ = await live.waitForExit()
        try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            let gone = try await client.get("/v1/suites", headers: API.auth(alice))
            #expect(gone.status == .unauthorized)
            let kept = try await client.get("/v1/suites", headers: API.auth(bob))
            #expect(kept.status == .ok)
        }
        // Deleted already (a delete run again, as after an interruption): said, and done.
        let deletedAgain = try await ServerTool.run(["accounts", "delete", "alice", "--yes"] + storage)
        #expect(deletedAgain.status == 0 && deletedAgain.stdout.hasPrefix("account alice is already deleted (at "), "\(deletedAgain)")
        let unknown = try await ServerTool.run(["accounts", "delete", "nobody", "--yes"] + storage)
        // The command it names repeats the storage flags given (a PostgreSQL URL too: this one holds no password).
        let listHint = "groupdefaults-server accounts list \(storage[0]) \(storage[1])"
        #expect(unknown.status == 1 && unknown.stderr == "groupdefaults-server: no account is named 'nobody' (see `\(listHint)`)\n", "\(unknown)")
        #expect(try await ServerTool.run(["accounts", "list"] + storage).stdout.hasPrefix("bob\t"))

        // The audit log: each act, who, what, from where; never a token.
        let audit = try await ServerTool.run(["audit", "--json"] + storage)
        #expect(audit.status == 0, "\(audit.stderr)")
        let records = try JSONSerialization.jsonObject(with: Data(audit.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(records.map { $0["act"] as? String ?? "" } == ["token-create", "token-create", "account-export", "account-delete"])
        #expect(
            records.allSatisfy { ($0["actor"] as? String) == "command line" && ($0["source"] as? String)?.hasPrefix("command line (user ") == true }
        )
        #expect(records.last?["account"] as? String == "alice")
        #expect(!audit.stdout.contains(alice) && !audit.stdout.contains(bob))
        let aliceOnly = try await ServerTool.run(["audit", "--account", "bob", "--since", "1h"] + storage)
        #expect(
            aliceOnly.status == 0 && aliceOnly.stdout.split(separator: "\n").count == 1 && aliceOnly.stdout.contains("token-create"),
            "\(aliceOnly)"
        )
        let future = try await ServerTool.run(["audit", "--since", "2999-01-01"] + storage)
        #expect(future.status == 0 && future.stdout == "no records\n", "\(future)")
        // Revoking bob's token and resetting his suite are audited too, with their targets.
        let bobID = try #require(try await ServerTool.tokenIDs(storage: storage).first)
        let revoked = try await ServerTool.run(["token", "revoke", bobID] + storage)
        #expect(revoked.status == 0 && revoked.stdout == "revoked token \(bobID) of account bob: its next request is refused\n", "\(revoked)")
        // Again: nothing changes, it says so, and the audit log records no second revocation.
        let revokedAgain = try await ServerTool.run(["token", "revoke", bobID] + storage)
        #expect(
            revokedAgain.status == 0 && revokedAgain.stdout.contains("was revoked already") && revokedAgain.stdout.contains("nothing changed"),
            "\(revokedAgain)"
        )
        #expect(try await ServerTool.run(["suites", "reset", "--account", "bob", "--suite", "group.BBBMARK", "--yes"] + storage).status == 0)
        let bobs = try await ServerTool.run(["audit", "--account", "bob"] + storage)
        let rows = bobs.stdout.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(
            rows.map { $0.count > 3 ? [$0[1], $0[3]] : [] } == [
                ["token-create", "token \(bobID)"], ["token-revoke", "token \(bobID)"], ["suite-reset", "suite group.BBBMARK"],
            ],
            "\(bobs)"
        )
        let bad = try await ServerTool.run(["audit", "--since", "yesterday"] + storage)
        #expect(bad.status == 1 && bad.stderr.split(separator: "\n").count == 1 && bad.stderr.contains("--since takes"), "\(bad)")
    }

    @Test(
        "console sign-ins on the real server, failed and not, are audited with the client's address; the password is in neither the log nor the store",
        arguments: StorageBackend.allCases
    )
    func consoleSignInsAudited(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.serverStorage("gds-audit-console")
        defer { cleanup() }
        let password = "correct horse \(UUID().uuidString)"
        let wrong = "wrong horse \(UUID().uuidString)"
        let made = try await runProcess(
            ServerTool.executable,
            ["admin", "create", "--create", "--name", "ops"] + storage,
            stdin: Data((password + "\n").utf8)
        )
        #expect(made.status == 0, "\(made.stderr)")
        let server = try await ServerProcess(dataDirectory: nil, extraArguments: storage)
        defer { server.signal(SIGTERM) }
        let base = "http://127.0.0.1:\(server.port)/console/sign-in"
        let folder = ServerTool.temporaryDirectory("gds-cookies")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jar = folder + "/cookies"
        // Each attempt: the form (its token, and the cookie it must match), then the POST.
        func signIn(_ password: String) async throws -> String {
            let form = try await Curl.run(["-c", jar, "-b", jar, base])
            let csrf = try #require(form.stdout.firstMatch(of: #/name="csrf" value="([^"]+)"/#)?.output.1)
            let answer = try await Curl.run([
                "-c", jar, "-b", jar, "-o", "/dev/null", "-w", "%{http_code}", "--data-urlencode", "csrf=\(csrf)", "--data-urlencode", "name=ops",
                "--data-urlencode", "password=\(password)", base,
            ])
            return answer.stdout
        }
        #expect(try await signIn(wrong) == "401")
        #expect(try await signIn(password) == "303")

        let audit = try await ServerTool.run(["audit", "--json"] + storage)
        let records = try JSONSerialization.jsonObject(with: Data(audit.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(records.map { $0["act"] as? String ?? "" } == ["admin-create", "sign-in-failed", "sign-in"], "\(audit)")
        #expect(records.dropFirst().allSatisfy { $0["source"] as? String == "console, 127.0.0.1" }, "\(audit)")
        #expect(records.last?["actor"] as? String == "ops" && records[1]["outcome"] as? String == "failed")
        for secret in [password, wrong] { #expect(!audit.stdout.contains(secret)) }
        server.signal(SIGTERM)
        _ = await server.waitForExit()
        let stored: String
        if backend == .postgres {
            stored = try await PostgresFixture.dump(storage[1])
        } else {
            stored = String(decoding: try Data(contentsOf: URL(fileURLWithPath: storage[1] + "/sync.lmdb")), as: UTF8.self)
        }
        #expect(stored.contains("sign-in-failed"), "the scan reads the audit log")
        for secret in [password, wrong] { #expect(!stored.contains(secret)) }
    }
}
