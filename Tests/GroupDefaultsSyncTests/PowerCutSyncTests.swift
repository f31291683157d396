import Foundation
import Glibc
import GroupDefaults
import TestSupport
import Testing

/// A synced suite that a reboot put back to its last durability point gets back from the server
/// what it had pushed after that point (the real tools, the real server, a reboot as a process sees
/// one: `Reboot`).
@Suite("Power cuts and sync", .timeLimit(.minutes(2)))
struct PowerCutSyncTests {
    @Test("a synced suite put back after a power cut reads the server again: what it pushed since its point comes back")
    func restoredSuiteHeals() async throws {
        try await SyncServer.with { server in
            let phone = ToolDevice("group.powercut.sync")
            defer { phone.remove() }
            try await phone.configure(server)
            #expect(try await phone.defaultsTool(["write", phone.suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)

            // The durability point as it is now; later points, as a power cut may leave them: lost.
            let suitePath = phone.directory.appendingPathComponent(phone.suite + ".lmdb").path
            let kept = phone.directory.appendingPathComponent("point-before")
            try FileManager.default.copyItem(atPath: suitePath + "-safe", toPath: kept.path)
            #expect(try await phone.defaultsTool(["write", phone.suite, "sound", "chime.caf"]).status == 0)
            #expect(try await phone.defaultsTool(["write", phone.suite, "volume", "-int", "7"]).status == 0)
            let pushed = try await phone.sync("sync")
            #expect(pushed.status == 0 && pushed.stdout.contains("pushed 2"), "\(pushed)")
            #expect(rename(kept.path, suitePath + "-safe") == 0)

            // After the reboot the suite is at the older point, and says so; its next sync brings
            // back from the server what it had pushed since.
            let reboot = try Reboot(in: phone.directory)
            let info = try await phone.defaultsTool(["info", phone.suite], launcher: reboot.launcher)
            #expect(info.status == 0 && info.stdout.contains("last restore: 20"), "\(info)")
            #expect(info.stdout.contains("sync cursor: none"), "\(info.stdout)")
            let before = try await phone.defaultsTool(["read", phone.suite, "sound"], launcher: reboot.launcher)
            #expect(before.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ring.caf", "\(before)")
            let healed = try await phone.sync("sync", launcher: reboot.launcher)
            #expect(healed.status == 0, "\(healed)")
            let sound = try await phone.defaultsTool(["read", phone.suite, "sound"], launcher: reboot.launcher)
            #expect(sound.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "chime.caf", "\(sound)")
            let volume = try await phone.defaultsTool(["read", phone.suite, "volume"], launcher: reboot.launcher)
            #expect(volume.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "7", "\(volume)")
            let conflicts = try await phone.sync("conflicts", launcher: reboot.launcher)
            #expect(conflicts.stdout.contains("no replaced values kept"), "its own older value is no conflict: \(conflicts)")
        }
    }
}
