import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// A restore brings back the backup's data and keeps the present's authority (members, roles,
/// invitations, key bags), with the real tools on both backends (the embedded store's `restore
/// --from`, PostgreSQL's `restore --prepare`, `pg_restore` and `restore --announce`): a member
/// removed after the backup stays removed, a revoked invitation stays revoked, and an encrypted
/// suite rotated after the backup goes on.
extension RestoreTests {
    @Test(
        "a member removed and an invitation revoked after the backup stay so after a restore; the data comes back",
        arguments: StorageBackend.allCases
    )
    func restoreKeepsMembersAndInvitations(backend: StorageBackend) async throws {
        try await SharingTests.Family.with(backend) { family in
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            let code = try await family.invite("admin")
            let backup = try await ServerBackup.take(family.server)

            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            let listed = try await family.alicePhone.sync("invitations", ["--json"])
            let waiting = try #require(
                try JSONDecoder().decode(InvitationList.self, from: Data(listed.stdout.utf8)).invitations.first { $0.state == .pending }
            )
            try await expectOK(family.alicePhone.sync("invitations", ["--revoke", waiting.id]))
            try family.alicePhone.open().set("after", forKey: "late")
            try await expectOK(family.alicePhone.sync("sync"))
            try await family.server.killAndRestart { try await ServerBackup.restore(family.server, from: backup) }

            let refused = try await family.bobPhone.sync("sync")
            #expect(refused.status == 3 && refused.stderr.contains("not shared with this account"), "\(refused)")
            let revoked = try await family.join(code, on: family.bobTablet)
            #expect(revoked.status != 0 && revoked.stderr.contains("the invitation was revoked"), "\(revoked.stderr)")
            let members = try await family.alicePhone.sync("members", ["--json"])
            #expect(try JSONDecoder().decode(MemberList.self, from: Data(members.stdout.utf8)).members.map(\.account) == ["alice"])
            let invitations = try await family.alicePhone.sync("invitations", ["--json"])
            #expect(
                try JSONDecoder().decode(InvitationList.self, from: Data(invitations.stdout.utf8)).invitations.allSatisfy { $0.state != .pending },
                "\(invitations.stdout)"
            )
            // The data is the backup's, and the owner's device brings back what it wrote since.
            try await expectOK(family.alicePhone.sync("sync"))
            #expect(try await family.server.snapshot("family").entries["late"]?.value == .string("after"))
        }
    }

    @Test(
        "an encrypted shared suite rotated after the backup goes on after a restore: the owner syncs and rotates, the member syncs, the removed one stays out",
        arguments: StorageBackend.allCases
    )
    func encryptedSuiteRotatedAfterBackupGoesOn(backend: StorageBackend) async throws {
        try await EncryptedSharingTests.Family.with(backend) { family in
            let backup = try await ServerBackup.take(family.server)
            let removed = try await family.alicePhone.sync("unshare", ["--account", "carol"])
            #expect(removed.status == 0 && removed.stdout.contains("rotated family to key epoch 2"), "\(removed)")
            try await family.server.killAndRestart { try await ServerBackup.restore(family.server, from: backup) }

            try family.alicePhone.open().set("after-restore", forKey: "note")
            try await expectOK(family.alicePhone.sync("sync"))
            try await expectOK(family.bob.sync("sync"))
            #expect(try family.bob.open().string(forKey: "note") == "after-restore")
            let rotated = try await family.alicePhone.sync("rotate-key")
            #expect(rotated.status == 0 && rotated.stdout.contains("epoch 3"), "\(rotated)")
            try await expectOK(family.bob.sync("sync"))
            let refused = try await family.carol.sync("sync")
            #expect(refused.status == 3 && refused.stderr.contains("not shared with this account"), "\(refused)")
        }
    }

    @Test(
        "a rotation of an encrypted shared suite stopped after its bag was signed, then a restore: the owner's device stores the bag with the members' part, and the members read what is written next",
        arguments: StorageBackend.allCases
    )
    func stoppedRotationThenARestore(backend: StorageBackend) async throws {
        try await EncryptedSharingTests.Family.with(backend) { family in
            let backup = try await ServerBackup.take(family.server)
            let stopped = try await InterruptionTests.run(
                family.alicePhone,
                "rotate-key",
                [],
                InterruptionTests.environment(at: "rotate-key.bag-signed")
            )
            InterruptionTests.expectStopped(stopped, by: SIGKILL, "rotate-key stopped at its signed bag")
            try await family.server.killAndRestart { try await ServerBackup.restore(family.server, from: backup) }

            try family.alicePhone.open().set("after-restore", forKey: "note")
            let synced = try await family.alicePhone.sync("sync")
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            for member in [family.bob, family.carol] {
                try await expectOK(member.sync("sync"))
                #expect(try member.open().string(forKey: "note") == "after-restore")
            }
        }
    }
}

extension RestoreTests {
    @Test(
        "an encrypted suite made after the backup and rotated since goes on after a restore: its device uploads under the epoch it holds",
        arguments: StorageBackend.allCases
    )
    func encryptedSuiteMadeAfterBackupGoesOn(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.vault"
            let device = ToolDevice(suite)
            defer { device.remove() }
            let backup = try await ServerBackup.take(server)
            let configured = try await device.sync(
                "configure",
                ["--server", server.url.absoluteString, "--token-file", try device.tokenFile(server.token), "--encrypt"]
            )
            #expect(configured.status == 0, "\(configured.stderr)")
            #expect(try await device.defaultsTool(["write", suite, "a", "1"]).status == 0)
            try await expectOK(device.sync("sync"))
            try await expectOK(device.sync("rotate-key"))
            #expect(try await device.defaultsTool(["write", suite, "b", "2"]).status == 0)
            try await expectOK(device.sync("sync"))
            try await server.killAndRestart { try await ServerBackup.restore(server, from: backup) }

            #expect(try await device.defaultsTool(["write", suite, "c", "3"]).status == 0)
            try await expectOK(device.sync("sync"))
            #expect(try await server.snapshot(suite).entries.values.map { $0.sealed?.epoch }.sorted { ($0 ?? 0) < ($1 ?? 0) } == [2, 2, 2])
        }
    }

    @Test(
        "PostgreSQL's recipe refuses what would bring back old authority: a second --prepare, --announce without the id or with a copy that came with the dump; a server does not start while a copy waits"
    )
    func postgresRecipeRefusesStaleCopies() async throws {
        try await SyncServer.with(.postgres) { server in
            func tool(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
                try await ServerTool.run(arguments + server.storage)
            }
            try await server.killAndRestart {
                let prepared = try await tool(["restore", "--prepare"])
                #expect(prepared.status == 0, "\(prepared.stderr)")
                let id = try #require(prepared.stdout.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
                // A dump taken now holds the copy; put back later, its copy is not this one.
                let stale = ServerTool.temporaryDirectory("gds-stale-dump")
                defer { try? FileManager.default.removeItem(atPath: stale) }
                try await PostgresFixture.runProgram("pg_dump", ["--format=custom", "--file", stale, server.storage[1]])
                let again = try await tool(["restore", "--prepare"])
                #expect(again.status == 1 && again.stderr.contains("already kept the authority apart"), "\(again.stderr)")
                let serve = try await tool(["serve", "--port", "0"])
                // The command it names repeats the database's URL (it holds no password).
                #expect(
                    serve.status != 0 && serve.stderr.contains("restore --postgres-url \(server.storage[1]) --announce --kept ID"),
                    "\(serve.stderr)"
                )
                let withoutID = try await tool(["restore", "--announce"])
                #expect(withoutID.status == 1 && withoutID.stderr.contains("--kept ID"), "\(withoutID.stderr)")
                let wrongID = try await tool(["restore", "--announce", "--kept", "0123"])
                #expect(wrongID.status == 1 && wrongID.stderr.contains("is not the copy --prepare made"), "\(wrongID.stderr)")
                #expect(try await tool(["restore", "--discard-kept"]).status == 0)
                let latest = try await tool(["restore", "--prepare"])
                let latestID = try #require(latest.stdout.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
                #expect(latestID != id)
                try await PostgresFixture.runProgram(
                    "pg_restore",
                    ["--clean", "--if-exists", "--single-transaction", "--dbname", server.storage[1], stale]
                )
                let replaced = try await tool(["restore", "--announce", "--kept", latestID])
                #expect(replaced.status == 1 && replaced.stderr.contains("is not the copy --prepare made"), "\(replaced.stderr)")
                #expect(try await tool(["restore", "--discard-kept"]).status == 0)
                #expect(try await tool(["restore", "--announce"]).status == 0)
            }
        }
    }
}
