import Foundation
import GroupDefaults
import GroupDefaultsSync
import TestSupport
import Testing

/// `groupdefaults-sync status` reports one state, from one snapshot of the suite and the server's
/// answer: its state line, every other line, its JSON and its exit status agree, and the exit
/// status is the one the table of states in docs/guide/sync.md gives that state. Real processes: the real
/// server on loopback, the real tools.
@Suite("status: one state, one exit status", .timeLimit(.minutes(3)))
struct StatusStateTests {
    @Test("right after its token is revoked, status says paused (exit 3), and the device line's error is the state's")
    func revokedToken() async throws {
        try await SyncServer.with { server in
            let phone = ToolDevice("group.status.revoked")
            defer { phone.remove() }
            let tokenID = try await RunTests.configureWithTokenOfItsOwn(phone, server)
            try phone.open().set("ring.caf", forKey: "sound")
            try await expectOK(phone.sync("sync"))
            try await StatusCheck.expect(phone, "ok")

            #expect(try await server.tokenCommand(["revoke", tokenID]).status == 0)
            // No sync since: status asks the server itself.
            let status = try await StatusCheck.expect(phone, "paused")
            #expect(status.stdout.contains("(name unknown: authentication needed: the token was revoked"), "\(status.stdout)")
            #expect(status.stdout.contains("state: paused: authentication needed (the token was revoked)"), "\(status.stdout)")
            #expect(status.stderr.contains("give it a new token"), "\(status.stderr)")

            // A sync records the pause; a new token written into the same file ends it, and status
            // says so at once (the server let the suite's request in), as the device line does.
            #expect(try await phone.sync("sync").status == 3)
            _ = try phone.tokenFile(try await ServerTool.createToken(storage: server.storage))
            try await StatusCheck.expect(phone, "ok")
        }
    }

    @Test(
        "after the owner's unshare, a member's status says not shared (exit 3), before and after its next sync, and its shared line says the same"
    )
    func removedMember() async throws {
        try await SharingTests.Family.with(.lmdb) { family in
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            let member = try await StatusCheck.expect(family.bobPhone, "ok")
            #expect(member.stdout.contains("shared: alice's suite family, as a write member\n"), "\(member.stdout)")

            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            for _ in 0..<2 {
                let status = try await StatusCheck.expect(family.bobPhone, "not_shared")
                #expect(
                    status.stdout.contains("shared: alice's suite family, no longer shared with this account (it was a write member)"),
                    "\(status.stdout)"
                )
                #expect(status.stdout.contains("state: not shared: alice's suite 'family' is not shared with this account"), "\(status.stdout)")
                // Then sync records it: status says the same.
                #expect(try await family.bobPhone.sync("sync").status == 3)
            }
        }
    }

    @Test(
        "a removed member's device whose token is then refused says paused, not not_shared: invited back from another device, its next token makes it ok"
    )
    func removedMemberWithRefusedToken() async throws {
        try await SharingTests.Family.with(.lmdb) { family in
            let phone = family.bobPhone
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await expectOK(phone.sync("sync"))
            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            #expect(try await phone.sync("sync").status == 3)  // not_shared, recorded
            try await StatusCheck.expect(phone, "not_shared")

            // bob is invited back and joins on his tablet; the phone's token is now one the
            // server refuses. Until it has a new one nobody can tell it that bob is a member again.
            #expect(try await family.join(try await family.invite("write"), on: family.bobTablet).status == 0)
            let othersTokens = Set(try await ServerTool.tokenIDs(storage: family.server.storage))
            let phoneToken = try await ServerTool.createToken(storage: family.server.storage, account: "bob")
            let phoneTokenID = try #require(Set(try await ServerTool.tokenIDs(storage: family.server.storage)).subtracting(othersTokens).first)
            _ = try phone.tokenFile(phoneToken, name: "bob.token")
            #expect(try await family.server.tokenCommand(["revoke", phoneTokenID]).status == 0)
            let paused = try await StatusCheck.expect(phone, "paused")
            #expect(paused.stderr.contains("give it a new token"), "\(paused.stderr)")

            _ = try phone.tokenFile(family.bobToken, name: "bob.token")
            try await StatusCheck.expect(phone, "ok")
            try await expectOK(phone.sync("sync"))
        }
    }

    @Test("a read member with local changes: status says they are kept (exit 1), never ok")
    func readMemberKeepsChanges() async throws {
        try await SharingTests.Family.with(.lmdb) { family in
            #expect(try await family.join(try await family.invite("read")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            try await StatusCheck.expect(family.bobPhone, "ok")
            try family.bobPhone.open().set("mine", forKey: "note")
            let status = try await StatusCheck.expect(family.bobPhone, "kept_local")
            #expect(
                status.stdout.contains(
                    "state: local changes kept: 1 local change(s) stay on this device, not sent: this account is a read member of alice's suite family"
                ),
                "\(status.stdout)"
            )
            #expect(status.stdout.contains("pending: 1 (note) kept on this device"), "\(status.stdout)")
        }
    }

    @Test("status through the states one server reaches: each exits with the documented status for it, and no line contradicts it")
    func statesInATable() async throws {
        try await SyncServer.with(.lmdb, ["--max-value-bytes", "64"]) { server in
            let devices = (0..<5).map { ToolDevice("group.status.\($0)") }
            defer { for device in devices { device.remove() } }
            let states: [(state: String, device: ToolDevice, reach: () async throws -> Void)] = [
                ("not_synced", devices[0], { try devices[0].open().set(1, forKey: "plain") }),
                (
                    "ok", devices[1],
                    {
                        try await devices[1].configure(server)
                        try devices[1].open().set("ring.caf", forKey: "sound")
                        try await expectOK(devices[1].sync("sync"))
                    }
                ),
                (
                    "set_aside", devices[1],
                    {
                        try devices[1].open().set(String(repeating: "x", count: 200), forKey: "large")
                        #expect(try await devices[1].sync("sync").status == 1)
                    }
                ),
                (
                    // Writing with a read-only token: the recorded pause stands though the server
                    // answers status's question, which only reads.
                    "paused", devices[4],
                    {
                        let readOnly = try await ServerTool.createToken(storage: server.storage, account: "alice", ["--read-only"])
                        try await devices[4].configure(server, token: readOnly)
                        try devices[4].open().set("ring.caf", forKey: "sound")
                        #expect(try await devices[4].sync("sync").status == 3)
                    }
                ),
                (
                    "offline", devices[2],
                    {
                        // Configured as `configure` stores it, for a port nothing listens on.
                        let port = try closedPort()
                        let url = try #require(URL(string: "http://127.0.0.1:\(port)"))
                        try SyncSettings(server: url, tokenFile: try devices[2].tokenFile(server.token)).store(in: try devices[2].open())
                    }
                ),
                (
                    "account_deleted", devices[3],
                    {
                        let old = try await ServerTool.createToken(storage: server.storage, account: "zed")
                        try await devices[3].configure(server, token: old)
                        try devices[3].open().set("ring.caf", forKey: "sound")
                        try await expectOK(devices[3].sync("sync"))
                        #expect(try await ServerTool.run(["accounts", "delete", "zed", "--yes"] + server.storage).status == 0)
                        _ = try devices[3].tokenFile(try await ServerTool.createToken(storage: server.storage, account: "zed"))
                    }
                ),
            ]
            for (state, device, reach) in states {
                try await reach()
                try await StatusCheck.expect(device, state)
            }
        }
    }

    @Test("every state of the documented table is reached by a test that checks status whole (`StatusCheck`), or named as one no test reaches")
    func everyStateIsChecked() throws {
        let reachedHere = ["not_synced", "ok", "paused", "not_shared", "kept_local", "set_aside", "offline", "account_deleted"]
        let reachedElsewhere = ["rotation_due"]  // RemovalRotationTests
        // Reached only by an engine's own failure that a test cannot cause through the tools
        // without a wrong clock (faketime) or a tampered server; their words are SyncHealth's.
        let notReached = ["clock_behind", "failing", "refused", "omitted"]
        #expect(Set(StatusCheck.documented.keys) == Set(reachedHere + reachedElsewhere + notReached), "\(StatusCheck.documented)")
    }
}

/// Runs `status` (text and `--json`) on a device and checks it whole: the JSON's `state`, one exit
/// status for both, the documented exit status for that state (docs/guide/sync.md), and no line that contradicts it.
enum StatusCheck {
    /// The table of states in docs/guide/sync.md: `state` → exit status.
    static let documented: [String: Int32] = {
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/guide/sync.md")
        let text = (try? String(contentsOf: page, encoding: .utf8)) ?? ""
        var table: [String: Int32] = [:]
        var inTable = false
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("| `state` ") {
                inTable = true
                continue
            }
            guard inTable else { continue }
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3, cells[0].hasPrefix("`"), let status = Int32(cells[cells.count - 1]) else { continue }
            table[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = status
        }
        return table
    }()

    /// What the state line of each state begins with.
    static let stateWords: [String: String] = [
        "ok": "state: ok", "paused": "state: paused: authentication needed", "not_shared": "state: not shared: ",
        "account_deleted": "state: account deleted: ", "offline": "state: offline: ", "clock_behind": "state: clock behind: ",
        "failing": "state: failing: ", "kept_local": "state: local changes kept: ", "set_aside": "state: not pushed: ",
        "refused": "state: refused ", "omitted": "state: the server's snapshot left out", "rotation_due": "state: key rotation due: ",
    ]

    /// Runs `status` on `device`, expects `state`, and checks that everything agrees; returns the
    /// text run.
    @discardableResult
    static func expect(
        _ device: ToolDevice,
        _ state: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        let text = try await device.sync("status")
        let jsonRun = try await device.sync("status", ["--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(jsonRun.stdout.utf8)) as? [String: Any], sourceLocation: sourceLocation)
        let context = "\(state): \(text.stdout)\(text.stderr)"
        #expect(json["state"] as? String == state, "\(json)", sourceLocation: sourceLocation)
        let documented = try #require(documented[state], "docs/guide/sync.md's table has no row for \(state)", sourceLocation: sourceLocation)
        #expect(
            text.status == documented && jsonRun.status == documented,
            "exit status \(text.status) and \(jsonRun.status)",
            sourceLocation: sourceLocation
        )
        // One line on stderr exactly when the exit status is not 0.
        #expect(text.stderr.split(separator: "\n").count == (documented == 0 ? 0 : 1), "\(context)", sourceLocation: sourceLocation)
        #expect((json["note"] == nil) == (documented == 0), "a note exactly when something needs attention: \(json)", sourceLocation: sourceLocation)

        let lines = text.stdout.split(separator: "\n").map(String.init)
        let stateLines = lines.filter { $0.hasPrefix("state: ") }
        if state == "not_synced" {
            #expect(stateLines.isEmpty && lines.first?.hasSuffix(": not synced") == true, "\(context)", sourceLocation: sourceLocation)
            return text
        }
        #expect(stateLines.count == 1, "one state line: \(context)", sourceLocation: sourceLocation)
        if let words = stateWords[state] {
            #expect(stateLines.first?.hasPrefix(words) == true, "\(context)", sourceLocation: sourceLocation)
        }
        #expect(stateLines.first.map { state == "ok" ? $0 == "state: ok" : $0 != "state: ok" } == true, "\(context)", sourceLocation: sourceLocation)
        // The other lines follow the state: nothing unknown, refused or ended beside a state that
        // needs nothing; the device's error only beside a state of the server's answer.
        let device = lines.first { $0.hasPrefix("device: ") } ?? ""
        if device.contains("name unknown:") {
            #expect(
                ["paused", "not_shared", "account_deleted", "offline", "failing"].contains(state),
                "the device line has an error the state does not: \(context)",
                sourceLocation: sourceLocation
            )
        }
        if let shared = lines.first(where: { $0.hasPrefix("shared: ") }) {
            #expect(
                shared.contains("no longer shared") == (state == "not_shared"),
                "the shared line and the state disagree: \(context)",
                sourceLocation: sourceLocation
            )
            let membership = (json["shared"] as? [String: String])?["membership"]
            #expect((membership == "ended") == (state == "not_shared"), "\(json)", sourceLocation: sourceLocation)
        }
        if lines.contains(where: { $0.hasPrefix("pending: ") && $0.contains("kept on this device") }) {
            #expect(state != "ok", "changes kept on this device beside ok: \(context)", sourceLocation: sourceLocation)
        }
        if documented == 0 {
            for line in lines where !line.hasPrefix("refused: ") && !line.hasPrefix("conflicts kept: ") {
                for word in ["unknown:", "refused", "no longer", "authentication", "cannot reach", "kept on this device", "when: "] {
                    #expect(!line.contains(word), "'\(line)' beside a state that needs nothing: \(context)", sourceLocation: sourceLocation)
                }
            }
        }
        return text
    }
}
