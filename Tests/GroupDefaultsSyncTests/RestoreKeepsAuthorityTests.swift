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
}
