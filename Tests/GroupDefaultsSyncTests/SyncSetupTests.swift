import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import TestSupport
import Testing

/// `SyncSetup` in process, as an app calls it: what `groupdefaults-sync configure` does, without
/// the tool.
@Suite("Sync set-up in process", .timeLimit(.minutes(2)))
struct SyncSetupTests {
    @Test(
        "new keys on one device, its recovery key on another: the second reads what the first wrote; a plain configuration, or a recovery key for a suite the server lacks, is refused and leaves nothing"
    )
    func newKeysThenRecovery() async throws {
        let suite = "group.setup.inprocess"
        try await SyncServer.with { server in
            try await withTemporaryDirectory { phoneFolder in
                try await withTemporaryDirectory { tabletFolder in
                    let phoneToken = phoneFolder.appendingPathComponent("phone.token").path
                    try TokenFile.create(server.token, at: phoneToken)
                    var setup = SyncSetup(server: server.url, tokenFile: phoneToken)
                    setup.keys = .new
                    let first = try await setup.configure(suiteName: suite, directory: phoneFolder)
                    let recovery = try #require(first.newRecoveryKey)
                    let keyFile = try #require(first.settings.keyFile)
                    var info = stat()
                    #expect(stat(keyFile, &info) == 0 && info.st_mode & 0o777 == 0o600, "the key file is private")
                    let phone = try SharedDefaults(existingSuiteName: suite, directory: phoneFolder)
                    phone.set("chime.caf", forKey: "sound")
                    _ = try await SyncEngine(configured: phone, http: server.http).syncOnce()

                    let tabletToken = tabletFolder.appendingPathComponent("tablet.token").path
                    try TokenFile.create(server.token, at: tabletToken)
                    let plain = SyncSetup(server: server.url, tokenFile: tabletToken)
                    let refusal = await #expect(throws: SyncSetup.Refusal.self) {
                        try await plain.configure(suiteName: suite, directory: tabletFolder)
                    }
                    guard case .serverHoldsEncrypted? = refusal?.reason else {
                        Issue.record("refused for another reason: \(String(describing: refusal))")
                        return
                    }
                    #expect(throws: SharedDefaultsError.self, "no suite was created") {
                        try SharedDefaults(existingSuiteName: suite, directory: tabletFolder)
                    }

                    var recovering = plain
                    recovering.keys = .recoveryKey(recovery)
                    let joined = try await recovering.configure(suiteName: suite, directory: tabletFolder)
                    #expect(joined.newRecoveryKey == nil && joined.settings.keyFile != nil && joined.settings.keyFile != keyFile)
                    let tablet = try SharedDefaults(existingSuiteName: suite, directory: tabletFolder)
                    _ = try await SyncEngine(configured: tablet, http: server.http).syncOnce()
                    #expect(tablet.string(forKey: "sound") == "chime.caf")

                    // A recovery key for a suite the server holds nothing of: nothing to join, nothing made.
                    var elsewhere = recovering
                    elsewhere.keyFile = tabletFolder.appendingPathComponent("other.keys").path
                    let nothing = await #expect(throws: SyncSetup.Refusal.self) {
                        try await elsewhere.configure(suiteName: "group.setup.none", directory: tabletFolder)
                    }
                    guard case .nothingToRecover? = nothing?.reason else {
                        Issue.record("refused for another reason: \(String(describing: nothing))")
                        return
                    }
                    #expect(!FileManager.default.fileExists(atPath: elsewhere.keyFile!), "no key file")
                    #expect(throws: SharedDefaultsError.self, "no suite was created") {
                        try SharedDefaults(existingSuiteName: "group.setup.none", directory: tabletFolder)
                    }
                }
            }
        }
    }
}
