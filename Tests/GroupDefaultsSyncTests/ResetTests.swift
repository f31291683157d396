import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import TestSupport
import Testing

/// `groupdefaults-server suites reset`, through the tools: the operator clears a suite, and its
/// devices, at their next sync, join it again and upload what they hold; nothing a device holds is
/// lost, in a plain suite and in an encrypted one whose key was rotated.
@Suite("Suite reset", .timeLimit(.minutes(3)))
struct ResetTests {
    @Test(
        "after an operator's reset, each device joins again at its next sync and uploads its values; an encrypted suite keeps its epoch and its recovery key",
        arguments: StorageBackend.allCases
    )
    func devicesJoinAgain(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            // A plain suite on two devices, each with a value of its own.
            let plain = "group.reset.plain"
            let phone = ToolDevice(plain)
            let tablet = ToolDevice(plain)
            defer {
                phone.remove()
                tablet.remove()
            }
            for device in [phone, tablet] {
                let configured = try await device.sync(
                    "configure",
                    ["--server", server.url.absoluteString, "--token-file", try device.tokenFile(server.token)]
                )
                #expect(configured.status == 0, "\(configured.stderr)")
            }
            #expect(try await phone.defaultsTool(["write", plain, "sound", "ring.caf"]).status == 0)
            #expect(try await tablet.defaultsTool(["write", plain, "volume", "-int", "7"]).status == 0)
            for device in [phone, tablet, phone] { #expect(try await device.sync("sync").status == 0) }

            // Without --yes, nothing changes.
            let asked = try await ServerTool.run(["suites", "reset", "--account", "alice", "--suite", plain] + server.storage)
            #expect(
                asked.status == 0 && asked.stdout.contains("would delete alice/\(plain)'s 2 keys") && asked.stdout.contains("add --yes"),
                "\(asked.stdout) \(asked.stderr)"
            )
            #expect(try await server.snapshot(plain).entries.count == 2)
            let reset = try await ServerTool.run(["suites", "reset", "--account", "alice", "--suite", plain, "--yes"] + server.storage)
            #expect(reset.status == 0, "\(reset.stderr)")
            #expect(reset.stdout.contains("reset (2 keys deleted)"), "\(reset.stdout)")
            #expect(try await server.snapshot(plain).entries.isEmpty)

            // The tablet writes meanwhile; each device's next sync joins again.
            #expect(try await tablet.defaultsTool(["write", plain, "theme", "dark"]).status == 0)
            for device in [phone, tablet, phone] { #expect(try await device.sync("sync").status == 0) }
            let entries = try await server.snapshot(plain).entries
            #expect(
                entries["sound"]?.value == .string("ring.caf") && entries["volume"]?.value == .integer(7)
                    && entries["theme"]?.value == .string("dark")
            )
            #expect(try phone.open().string(forKey: "theme") == "dark")
            #expect(try tablet.open().string(forKey: "sound") == "ring.caf")

            // A running device learns of a reset from its event stream (woken by the tablet's
            // uploads) and uploads what it holds, with no local change to prompt it: the ringtone,
            // which only the phone has, is on the server again.
            #expect(try await phone.defaultsTool(["write", plain, "ringtone", "harp.caf"]).status == 0)
            let run = try phone.start("run", ["--log-level", "info"])
            defer { run.signal(SIGKILL) }
            #expect(await eventually { (try? await server.snapshot(plain).entries["ringtone"]) != nil }, "\(run.stderr)")
            #expect(try await ServerTool.run(["suites", "reset", "--account", "alice", "--suite", plain, "--yes"] + server.storage).status == 0)
            #expect(try await tablet.defaultsTool(["write", plain, "alarm", "bell"]).status == 0)
            #expect(try await tablet.sync("sync").status == 0)
            #expect(await eventually { (try? await server.snapshot(plain).entries["ringtone"]?.value) == .string("harp.caf") }, "\(run.stderr)")
            #expect(await eventually { (try? phone.open().string(forKey: "alarm")) == "bell" }, "\(run.stderr)")
            #expect(run.stderr.contains("reset by its operator: uploading what this device holds"), "\(run.stderr)")
            #expect(await run.terminate().status == 0)

            // An encrypted suite, rotated to epoch 2, reset: the phone anchors it again at epoch 2,
            // and the recovery key opens everything on a new device.
            let sealed = "group.reset.sealed"
            let owner = ToolDevice(sealed)
            let laptop = ToolDevice(sealed)
            defer {
                owner.remove()
                laptop.remove()
            }
            let recovery = try await owner.configureEncrypted(server)
            #expect(try await owner.defaultsTool(["write", sealed, "sound", "ring.caf"]).status == 0)
            #expect(try await owner.sync("sync").status == 0)
            #expect(try await owner.sync("rotate-key").status == 0)
            #expect(try await owner.defaultsTool(["write", sealed, "volume", "-int", "4"]).status == 0)
            #expect(try await owner.sync("sync").status == 0)
            #expect(try await ServerTool.run(["suites", "reset", "--account", "alice", "--suite", sealed, "--yes"] + server.storage).status == 0)
            let joined = try await owner.sync("sync")
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(try await server.snapshot(sealed).entries.values.map { $0.sealed?.epoch } == [2, 2])
            let recovered = try await laptop.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", try laptop.tokenFile(server.token),
                    "--recovery-key-file", try laptop.tokenFile(String(recovery), name: "recovery"),
                ]
            )
            #expect(recovered.status == 0, "\(recovered.stderr)")
            #expect(try await laptop.sync("sync").status == 0)
            #expect(try laptop.open().string(forKey: "sound") == "ring.caf")
            #expect(try laptop.open().integer(forKey: "volume") == 4)
        }
    }

    @Test(
        "after a reset each key ends with its latest write on every device: a newer deletion stays deleted, an older value does not win",
        arguments: StorageBackend.allCases
    )
    func latestWriteWinsAfterReset(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.reset.latest"
            let phone = ToolDevice(suite)
            let tablet = ToolDevice(suite)
            defer {
                phone.remove()
                tablet.remove()
            }
            for device in [phone, tablet] {
                #expect(
                    try await device.sync("configure", ["--server", server.url.absoluteString, "--token-file", try device.tokenFile(server.token)])
                        .status == 0
                )
            }
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.defaultsTool(["write", suite, "theme", "light"]).status == 0)
            for device in [phone, tablet] { #expect(try await device.sync("sync").status == 0) }
            // The tablet deletes the sound and writes a theme later than the phone's; the phone
            // does not hear of it before the reset.
            #expect(try await tablet.defaultsTool(["delete", suite, "sound"]).status == 0)
            #expect(try await tablet.defaultsTool(["write", suite, "theme", "dark"]).status == 0)
            #expect(try await tablet.sync("sync").status == 0)
            #expect(try await ServerTool.run(["suites", "reset", "--account", "alice", "--suite", suite, "--yes"] + server.storage).status == 0)

            // The phone, with the older copy, comes back first.
            for device in [phone, tablet, phone] { #expect(try await device.sync("sync").status == 0) }
            let entries = try await server.snapshot(suite).entries
            #expect(entries["sound"] == nil, "the deletion stays: \(entries)")
            #expect(entries["theme"]?.value == .string("dark"))
            #expect(try phone.open().object(forKey: "sound") == nil)
            #expect(try phone.open().string(forKey: "theme") == "dark")
            #expect(try tablet.open().object(forKey: "sound") == nil)
            for device in [phone, tablet] {
                let status = try await device.sync("status")
                #expect(status.stdout.contains("pending: 0") && status.stdout.contains("state: ok"), "\(status.stdout)")
            }
        }
    }
}
