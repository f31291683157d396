import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// An account deleted (`groupdefaults-server accounts delete`) while its device runs, then its
/// name used again (a new token, put in the device's token file): the device says the account was
/// deleted, pauses keeping everything, uploads nothing into the new account and never takes it for
/// a restore; a new device of the new account works; `configure` again starts over in the new
/// account. The real server on both backends and a real `groupdefaults-sync run`.
@Suite("A deleted account's name used again is a new account", .serialized, .timeLimit(.minutes(2)))
struct AccountIncarnationTests {
    @Test("the old account's device pauses and uploads nothing into the new one, until it starts over", arguments: StorageBackend.allCases)
    func recreatedAccount(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.zed"
            let phone = ToolDevice(suite)
            let tablet = ToolDevice(suite)
            defer {
                phone.remove()
                tablet.remove()
            }
            let oldToken = try await ServerTool.createToken(storage: server.storage, account: "zed")
            try await phone.configure(server, token: oldToken)
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            let run = try phone.start("run", ["--log-level", "info"])
            defer { run.signal(SIGKILL) }
            #expect(await eventually { (try? await server.client(suite, token: oldToken).snapshot(after: nil, limit: 10).entries.count) == 1 })

            let deleted = try await ServerTool.run(["accounts", "delete", "zed", "--yes"] + server.storage)
            #expect(deleted.status == 0, "\(deleted.stderr)")
            #expect(try await phone.defaultsTool(["write", suite, "draft", "hello"]).status == 0)  // made while deleted
            let newToken = try await ServerTool.createToken(storage: server.storage, account: "zed")
            _ = try phone.tokenFile(newToken)

            #expect(await eventually { run.stderr.contains("this account was deleted on the server") }, "\(run.stderr)")
            let status = try await phone.sync("status", ["--json"])
            #expect(status.status == 3, "\(status.stderr)")
            #expect(status.stdout.contains("\"state\" : \"account_deleted\""), "\(status.stdout)")
            #expect(
                status.stderr.contains("`groupdefaults-sync configure --directory \(phone.directory.path) \(suite)"),
                "the remedy: \(status.stderr)"
            )
            let newAccount = server.client(suite, token: newToken)
            #expect(try await newAccount.snapshot(after: nil, limit: 10).entries.isEmpty, "nothing uploaded into the new account")
            #expect(!run.stderr.contains("restored from a backup"), "\(run.stderr)")
            let kept = try phone.open()
            #expect(kept.string(forKey: "sound") == "ring.caf" && kept.string(forKey: "draft") == "hello", "the device keeps its data")

            // A new device of the new account works as any.
            try await tablet.configure(server, token: newToken)
            #expect(try await tablet.defaultsTool(["write", suite, "theme", "dark"]).status == 0)
            let synced = try await tablet.sync("sync")
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(try await newAccount.snapshot(after: nil, limit: 10).entries.map(\.key) == ["theme"], "still nothing of the old account")

            // Nobody ran `configure` yet: the log says only what happened.
            #expect(!run.stderr.contains("configured again") && !run.stderr.contains("sync starts over"), "\(run.stderr)")

            // Starting over, deliberately: the running engine joins the new account's suite.
            try await phone.configure(server, token: newToken)
            #expect(
                await eventually {
                    (try? await newAccount.snapshot(after: nil, limit: 10).entries.map(\.key).sorted()) == ["draft", "sound", "theme"]
                },
                "\(run.stderr)"
            )
            #expect(try phone.open().string(forKey: "theme") == "dark")
            #expect(run.stderr.components(separatedBy: "the suite was set up again (configure): sync starts over").count == 2, "\(run.stderr)")
            #expect(await run.terminate().status == 0)
        }
    }

    @Test(
        "a member's copy of the deleted account's suite is told so, also where its account is now a read member of the new account's suite of that name",
        arguments: StorageBackend.allCases
    )
    func memberOfTheDeletedAccount(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "family"
            let zedPhone = ToolDevice(suite)
            let zedTablet = ToolDevice(suite)
            let kimPhone = ToolDevice(suite)
            let kimTablet = ToolDevice(suite)
            defer { for device in [zedPhone, zedTablet, kimPhone, kimTablet] { device.remove() } }
            let zed = try await ServerTool.createToken(storage: server.storage, account: "zed")
            let kim = try await ServerTool.createToken(storage: server.storage, account: "kim")
            try await zedPhone.configure(server, token: zed)
            try await Self.invite(kimPhone, kim, from: zedPhone, role: "write", suite, server)
            #expect(try await kimPhone.sync("sync").status == 0)

            let deleted = try await ServerTool.run(["accounts", "delete", "zed", "--yes"] + server.storage)
            #expect(deleted.status == 0, "\(deleted.stderr)")
            try await zedTablet.configure(server, token: try await ServerTool.createToken(storage: server.storage, account: "zed"))
            try await Self.invite(kimTablet, kim, from: zedTablet, role: "read", suite, server)

            // Kim's phone holds the deleted zed's suite, with a change to push: it is told that
            // account was deleted (its remedy, starting over), not that kim may only read.
            #expect(try await kimPhone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            let synced = try await kimPhone.sync("sync")
            #expect(synced.status != 0)
            #expect(!synced.stderr.contains("insufficient_role"), "\(synced.stderr)")
            let status = try await kimPhone.sync("status", ["--json"])
            #expect(status.stdout.contains("\"state\" : \"account_deleted\""), "\(status.stdout) \(status.stderr)")
        }
    }

    @Test(
        "a member's copy that never synced, or left before it did, is still the deleted owner's: it uploads nothing into the new account, and joining the new account's suite of that name with it is refused",
        arguments: StorageBackend.allCases
    )
    func copyThatNeverSynced(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "family"
            let zedPhone = ToolDevice(suite)
            let zedTablet = ToolDevice(suite)
            let kimPhone = ToolDevice(suite)
            let leeLaptop = ToolDevice(suite)
            defer { for device in [zedPhone, zedTablet, kimPhone, leeLaptop] { device.remove() } }
            let zed = try await ServerTool.createToken(storage: server.storage, account: "zed")
            let kim = try await ServerTool.createToken(storage: server.storage, account: "kim")
            let lee = try await ServerTool.createToken(storage: server.storage, account: "lee")
            try await zedPhone.configure(server, token: zed)
            try await Self.invite(kimPhone, kim, from: zedPhone, role: "write", suite, server)
            try await Self.invite(leeLaptop, lee, from: zedPhone, role: "write", suite, server)
            #expect(try await leeLaptop.sync("leave").status == 0)  // neither synced

            let deleted = try await ServerTool.run(["accounts", "delete", "zed", "--yes"] + server.storage)
            #expect(deleted.status == 0, "\(deleted.stderr)")
            try await zedTablet.configure(server, token: try await ServerTool.createToken(storage: server.storage, account: "zed"))

            // The copy that stayed uploads nothing: the new zed's suite is not shared with kim (the
            // server tells a token an account's incarnation only where it may use the suite).
            #expect(try await kimPhone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await kimPhone.sync("sync").status != 0)
            let status = try await kimPhone.sync("status", ["--json"])
            #expect(status.stdout.contains("\"state\" : \"not_shared\""), "\(status.stdout) \(status.stderr)")

            // The copy that left: joining the new zed's suite with it is refused, nothing uploaded.
            #expect(try await leeLaptop.defaultsTool(["write", suite, "volume", "old-zed-value"]).status == 0)
            let share = try RunningProcess(ToolDevice.syncExecutable, ["share", suite, "--role", "write", "--directory", zedTablet.directory.path])
            defer { share.stop() }
            let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }, "share printed no code")
            let joined = try await leeLaptop.syncTool(
                [
                    "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString, "--token-file",
                    try leeLaptop.tokenFile(lee, name: "member.token"),
                ]
            )
            #expect(joined.status != 0 && joined.stderr.contains("from before the account zed was deleted"), "\(joined)")
            #expect(try await zedTablet.sync("sync").status == 0)
            #expect(try zedTablet.open().string(forKey: "volume") == nil, "nothing of the deleted account's suite reached the new one")
            #expect(try zedTablet.open().string(forKey: "sound") == nil)
        }
    }

    /// `share SUITE --role ROLE` on `owner`, and `configure --invitation` on `device` with `token`.
    static func invite(
        _ device: ToolDevice,
        _ token: String,
        from owner: ToolDevice,
        role: String,
        _ suite: String,
        _ server: SyncServer
    ) async throws {
        let share = try RunningProcess(ToolDevice.syncExecutable, ["share", suite, "--role", role, "--directory", owner.directory.path])
        let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }, "share printed no code")
        let joined = try await device.syncTool(
            [
                "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString, "--token-file",
                try device.tokenFile(token, name: "member.token"),
            ]
        )
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(await share.finish().status == 0)
    }
}
