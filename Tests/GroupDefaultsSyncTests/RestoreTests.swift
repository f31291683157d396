import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// A server restored from a backup older than the last writes (the real server, two devices, on
/// both backends: `groupdefaults-server backup`/`restore`, or the pg_dump/pg_restore recipe of
/// docs/guide/operating.md): afterwards every acknowledged write of both devices is on the server and on both
/// devices, plain and encrypted suites alike, and no device reports a rollback. One test at a time:
/// each starts servers (of PostgreSQL, whose connections the whole run shares) and restarts them.
@Suite("Restoring the server from a backup", .serialized, .timeLimit(.minutes(3)))
struct RestoreTests {
    @Test(
        "after a restore, every acknowledged write of every device is on the server and on every device, with no alarm",
        arguments: StorageBackend.allCases,
        [false, true]
    )
    func restoreLosesNoWrite(backend: StorageBackend, encrypted: Bool) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.restore"
            let keys = encrypted ? SuiteKeys(recoveryKey: RecoveryKey(), suite: suite) : nil
            let a = try Device(suite, server: server, keys: keys)
            let b = try Device(suite, server: server, keys: keys)
            defer {
                a.remove()
                b.remove()
            }
            try a.set("sound", .string("ring.caf"))
            try a.set("volume", .double(0.5))
            try a.set("draft", .string("hello"))
            try await a.engine.syncOnce()
            try b.set("theme", .string("dark"))
            try await b.engine.syncOnce()
            try await a.engine.syncOnce()

            let backup = try await ServerBackup.take(server)

            // After the backup, acknowledged by the server: sets on both devices, a delete, a new key.
            try a.set("sound", .string("bell.aiff"))
            try a.write("draft", nil)
            #expect(try await a.engine.syncOnce().isInAgreement)
            try b.set("volume", .double(0.9))
            try b.set("badge", .integer(3))
            #expect(try await b.engine.syncOnce().isInAgreement)
            #expect(try await a.engine.syncOnce().isInAgreement)
            let expected = try a.entries()
            #expect(
                expected.mapValues(\.value) == [
                    "sound": .string("bell.aiff"), "volume": .double(0.9), "theme": .string("dark"), "badge": .integer(3),
                ]
            )
            #expect(differences(try b.entries(), expected) == [])

            try await server.killAndRestart { try await ServerBackup.restore(server, from: backup) }
            #expect(differences(try await server.snapshot(suite, keys: keys).entries, expected) != [], "the restored server is behind")

            for device in [a, b, a] {
                let report = try await device.engine.syncOnce()
                #expect(report.refused.isEmpty && report.omitted.isEmpty, "no rollback is reported: \(report.refused) \(report.omitted)")
            }
            #expect(differences(try await server.snapshot(suite, keys: keys).entries, expected) == [], "on the server")
            #expect(differences(try a.entries(), expected) == [], "on device a")
            #expect(differences(try b.entries(), expected) == [], "on device b")
            #expect(try a.defaults.syncEntry(forKey: "draft")?.isDeleted == true, "the deletion stays a deletion")
            let status = b.engine.status
            #expect(status.omitted.isEmpty && status.lastError == nil)
        }
    }

    @Test("PostgreSQL: a pg_restore whose announcement was forgotten still gives a new incarnation (an encrypted suite heals, with no alarm)")
    func unannouncedPostgresRestore() async throws {
        try await SyncServer.with(.postgres) { server in
            let suite = "group.restore.forgotten"
            let keys = SuiteKeys(recoveryKey: RecoveryKey(), suite: suite)
            let a = try Device(suite, server: server, keys: keys)
            defer { a.remove() }
            try a.set("sound", .string("ring.caf"))
            try await a.engine.syncOnce()
            let backup = try await ServerBackup.take(server)
            try a.set("sound", .string("bell.aiff"))
            try a.set("volume", .double(0.9))
            try await a.engine.syncOnce()
            try await server.killAndRestart { try await ServerBackup.restore(server, from: backup, announcing: false) }
            let report = try await a.engine.syncOnce()
            #expect(report.isInAgreement, "no rollback is reported: \(report.refused) \(report.omitted)")
            let held = try await server.snapshot(suite, keys: keys).entries.mapValues(\.value)
            #expect(held == ["sound": .string("bell.aiff"), "volume": .double(0.9)])
        }
    }

    @Test(
        "an encrypted suite whose key was rotated after the backup: the device puts the new epoch's key bag back, and a recovered device opens everything"
    )
    func rotatedAfterBackup() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.restore.rotated"
            let owner = ToolDevice(suite)
            let laptop = ToolDevice(suite)
            defer {
                owner.remove()
                laptop.remove()
            }
            let recovery = try await owner.configureEncrypted(server)
            #expect(try await owner.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await owner.sync("sync").status == 0)
            let backup = try await ServerBackup.take(server)
            #expect(try await owner.sync("rotate-key").status == 0)
            #expect(try await owner.defaultsTool(["write", suite, "volume", "-int", "4"]).status == 0)
            #expect(try await owner.sync("sync").status == 0)
            try await server.killAndRestart { try await ServerBackup.restore(server, from: backup) }

            let healed = try await owner.sync("sync")
            #expect(healed.status == 0, "\(healed.stderr)")
            #expect(try await server.snapshot(suite).entries.values.map { $0.sealed?.epoch } == [2, 2])
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

    @Test("a device in `run` hears of the restore when its event stream ends, and uploads what the restored server lacks")
    func runningDeviceUploads() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.restore.run"
            let phone = ToolDevice(suite)
            defer { phone.remove() }
            try await phone.configure(server)
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)
            let backup = try await ServerBackup.take(server)
            #expect(try await phone.defaultsTool(["write", suite, "sound", "bell.aiff"]).status == 0)
            let run = try phone.start("run", ["--log-level", "info"])
            defer { run.signal(SIGKILL) }
            #expect(await eventually { (try? await server.snapshot(suite).entries["sound"]?.value) == .string("bell.aiff") }, "\(run.stderr)")
            try await server.killAndRestart { try await ServerBackup.restore(server, from: backup) }
            #expect(try await server.snapshot(suite).entries["sound"]?.value == .string("ring.caf"), "the restored server is behind")
            #expect(await eventually { (try? await server.snapshot(suite).entries["sound"]?.value) == .string("bell.aiff") }, "\(run.stderr)")
            #expect(run.stderr.contains("the server was restored from a backup: uploading what this device holds"), "\(run.stderr)")
            #expect(await run.terminate().status == 0)
        }
    }

    @Test("a plain suite heals from a silent rollback too (revisions back, same incarnation); an encrypted one reports it", arguments: [false, true])
    func silentRollback(encrypted: Bool) async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.rollback"
            let keys = encrypted ? SuiteKeys(recoveryKey: RecoveryKey(), suite: suite) : nil
            let a = try Device(suite, server: server, keys: keys)
            defer { a.remove() }
            try a.set("sound", .string("ring.caf"))
            try await a.engine.syncOnce()
            // The data directory copied while the server is stopped, and put back by hand later:
            // the incarnation comes back with it, and nothing announces the restore.
            let directory = server.storage[1]
            let copy = directory + ".copy"
            defer { try? FileManager.default.removeItem(atPath: copy) }
            try await server.killAndRestart { try FileManager.default.copyItem(atPath: directory, toPath: copy) }
            try a.set("sound", .string("bell.aiff"))
            try a.set("volume", .double(0.9))
            try await a.engine.syncOnce()
            try await server.killAndRestart {
                try FileManager.default.removeItem(atPath: directory)
                try FileManager.default.moveItem(atPath: copy, toPath: directory)
            }
            let report = try await a.engine.syncOnce()
            let held = try await server.snapshot(suite, keys: keys).entries.mapValues(\.value)
            if encrypted {
                #expect(!report.isInAgreement, "an encrypted suite reports the rollback")
                #expect(report.refused.contains { $0.reason.contains("rolled back") } || !report.omitted.isEmpty)
                #expect(try a.entries().mapValues(\.value) == ["sound": .string("bell.aiff"), "volume": .double(0.9)], "and keeps what it has")
            } else {
                #expect(report.isInAgreement)
                #expect(held == ["sound": .string("bell.aiff"), "volume": .double(0.9)])
            }
        }
    }
}

/// A backup of a test server's store by the documented means: `groupdefaults-server backup` while
/// it serves, or the pg_dump recipe of docs/guide/operating.md; and its restore, while it is stopped.
enum ServerBackup {
    /// The path of a new backup of `server`'s store.
    static func take(_ server: SyncServer) async throws -> String {
        let path = ServerTool.temporaryDirectory("gds-server-backup")
        switch server.backend {
        case .lmdb:
            let result = try await ServerTool.run(["backup", "--to", path] + server.storage)
            guard result.status == 0 else { throw FixtureError("backup failed: \(result.stderr)") }
        case .postgres:
            // docs/guide/operating.md, "Backups and restore": pg_dump --format=custom --file PATH "$URL"
            try await PostgresFixture.runProgram(
                "pg_dump",
                ["--format=custom", "--exclude-schema=groupdefaults_kept_authority", "--file", path, server.storage[1]]
            )
        }
        return path
    }

    /// Puts the backup at `path` back as `server`'s store (the server is stopped).
    static func restore(_ server: SyncServer, from path: String, announcing: Bool = true) async throws {
        defer { try? FileManager.default.removeItem(atPath: path) }
        switch server.backend {
        case .lmdb:
            let result = try await ServerTool.run(["restore", "--from", path] + server.storage)
            guard result.status == 0 else { throw FixtureError("restore failed: \(result.stderr)") }
        case .postgres:
            // docs/guide/operating.md: groupdefaults-server restore --prepare --postgres-url "$URL", then
            // pg_restore --clean --if-exists --single-transaction --dbname "$URL" PATH, then
            // groupdefaults-server restore --announce --postgres-url "$URL".
            var kept: [String] = []
            if announcing {
                let prepared = try await ServerTool.run(["restore", "--prepare"] + server.storage)
                guard prepared.status == 0, let id = prepared.stdout.split(separator: "\n").first?.split(separator: " ").last else {
                    throw FixtureError("restore --prepare failed: \(prepared.stderr)")
                }
                kept = ["--kept", String(id)]
            }
            try await PostgresFixture.runProgram(
                "pg_restore",
                ["--clean", "--if-exists", "--single-transaction", "--dbname", server.storage[1], path]
            )
            guard announcing else { return }
            let result = try await ServerTool.run(["restore", "--announce"] + kept + server.storage)
            guard result.status == 0 else { throw FixtureError("restore --announce failed: \(result.stderr)") }
        }
    }
}
