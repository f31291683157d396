import Crypto
import Foundation
import Glibc
import GroupDefaultsWire
import TestSupport
import Testing

/// `groupdefaults-server backup` and `restore` on the embedded store, with the real executable: a
/// backup taken while a server serves, put back with a new incarnation, and every kind of bad input
/// refused in one line with nothing changed.
@Suite("Server backup and restore", .timeLimit(.minutes(1)))
struct BackupCommandTests {
    /// A data directory with a token made in it, a scratch folder for backups, removed afterwards.
    private func withStore(_ body: (_ dataDirectory: String, _ scratch: String) async throws -> Void) async throws {
        let dataDirectory = ServerTool.temporaryDirectory("gds-backup")
        let scratch = ServerTool.temporaryDirectory("gds-backups")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: dataDirectory)
            try? FileManager.default.removeItem(atPath: scratch)
        }
        _ = try await ServerTool.createToken(dataDirectory)
        try await body(dataDirectory, scratch)
    }

    /// The `Server-Incarnation` header of the server's `/v1/health`.
    private func incarnation(_ server: ServerProcess) async throws -> String? {
        let answer = try await Curl.run(["--head", server.url.appendingPathComponent("v1/health").absoluteString])
        return answer.stdout.split(separator: "\r\n").first { $0.lowercased().hasPrefix("server-incarnation:") }
            .map { String($0.dropFirst("server-incarnation:".count)).trimmingCharacters(in: .whitespaces) }
    }

    private func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? 0) & 0o777
    }

    private func digest(_ path: String) throws -> String {
        SHA256.hash(data: try Data(contentsOf: URL(fileURLWithPath: path))).map { String(format: "%02x", $0) }.joined()
    }

    @Test("a backup taken while the server serves, restored while it is stopped, brings back the store with a new incarnation")
    func backupThenRestore() async throws {
        try await withStore { dataDirectory, scratch in
            let server = try await ServerProcess(dataDirectory: dataDirectory)
            let before = try await incarnation(server)
            #expect(before?.count == 32)
            let backup = scratch + "/store.backup"
            let made = try await ServerTool.run(["backup", "--to", backup, "--data-dir", dataDirectory])
            #expect(made.status == 0, "\(made.stderr)")
            #expect(made.stdout.hasPrefix("backed up to \(backup) ("))
            #expect(try mode(backup) == 0o600)
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch) == ["store.backup"], "no temporary file is left")

            // A token made after the backup stays after the restore, with the one before.
            _ = try await ServerTool.createToken(dataDirectory)
            let tokensAtRestore = try await ServerTool.tokenIDs(storage: ["--data-dir", dataDirectory])
            let refused = try await ServerTool.run(["restore", "--from", backup, "--data-dir", dataDirectory])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("a server or another command is using the store in \(dataDirectory): stop it, then restore"))
            await server.stop()

            let restored = try await ServerTool.run(["restore", "--from", backup, "--data-dir", dataDirectory])
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(try await ServerTool.tokenIDs(storage: ["--data-dir", dataDirectory]) == tokensAtRestore)
            #expect(tokensAtRestore.count == 2)
            #expect(try mode(dataDirectory + "/sync.lmdb") == 0o600)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dataDirectory).allSatisfy { !$0.hasPrefix(".restore-") })
            let again = try await ServerProcess(dataDirectory: dataDirectory)
            let after = try await incarnation(again)
            #expect(after != nil && after != before, "a restore gives the storage a new incarnation")
            #expect(restored.stdout.contains(after ?? "?"))

            // A restore made otherwise is announced, also only while no server runs.
            let busy = try await ServerTool.run(["restore", "--announce", "--data-dir", dataDirectory])
            #expect(busy.status == 1 && busy.stderr.contains("stop it, then announce the restore"), "\(busy.stderr)")
            await again.stop()
            let announced = try await ServerTool.run(["restore", "--announce", "--data-dir", dataDirectory])
            #expect(announced.status == 0, "\(announced.stderr)")
            #expect(announced.stdout.hasPrefix("new incarnation ") && !announced.stdout.contains(after ?? "?"))
        }
    }

    @Test("a backup to a path that exists or cannot be written is one line, exit 1, and nothing is written")
    func backupBadPaths() async throws {
        try await withStore { dataDirectory, scratch in
            let existing = scratch + "/existing"
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: existing))
            let cases: [(path: String, says: String)] = [
                (existing, "a file already exists at \(existing); a backup never overwrites one"),
                (scratch + "/missing/backup", "cannot write \(scratch)/missing/backup: its directory does not exist"),
                (existing + "/backup", "cannot write \(existing)/backup: its directory does not exist"),
            ]
            for (path, says) in cases {
                let result = try await ServerTool.run(["backup", "--to", path, "--data-dir", dataDirectory])
                #expect(result.status == 1)
                #expect(result.stderr.hasPrefix("groupdefaults-server: \(says)"), "\(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1)
            }
            #expect(try String(contentsOfFile: existing, encoding: .utf8) == "keep me")
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch) == ["existing"])
        }
    }

    @Test("a restore from a file that is not a backup, or a truncated or damaged one, is one line, exit 1, and the store is unchanged")
    func restoreBadBackups() async throws {
        try await withStore { dataDirectory, scratch in
            let backup = scratch + "/good"
            #expect(try await ServerTool.run(["backup", "--to", backup, "--data-dir", dataDirectory]).status == 0)
            let good = try Data(contentsOf: URL(fileURLWithPath: backup))
            var flipped = good
            flipped[good.count / 2] ^= 0x40
            let files: [(name: String, bytes: Data?, says: String)] = [
                ("text", Data("hello\n".utf8), "is not a backup made by `groupdefaults-server backup`"),
                ("lmdb", try Data(contentsOf: URL(fileURLWithPath: dataDirectory + "/sync.lmdb")), "is not a backup made by"),
                ("truncated", good.prefix(good.count - 4096), "is damaged: it holds"),
                ("flipped", flipped, "is damaged: its bytes do not match the digest"),
                ("missing", nil, "no such file"),
            ]
            let store = try digest(dataDirectory + "/sync.lmdb")
            for (name, bytes, says) in files {
                let path = scratch + "/" + name
                if let bytes { try bytes.write(to: URL(fileURLWithPath: path)) }
                let result = try await ServerTool.run(["restore", "--from", path, "--data-dir", dataDirectory])
                #expect(result.status == 1, "\(name)")
                #expect(result.stderr.contains(says), "\(name): \(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(name)")
                #expect(try digest(dataDirectory + "/sync.lmdb") == store, "\(name) changed the store")
            }
        }
    }

    @Test(
        "what a command run as root makes in a service's data directory (the in-use lock, a restored store) belongs to the directory's owner",
        .enabled(if: geteuid() == 0)
    )
    func rootLeavesFilesToTheOwner() async throws {
        try await withStore { dataDirectory, scratch in
            let backup = scratch + "/backup"
            #expect(try await ServerTool.run(["backup", "--to", backup, "--data-dir", dataDirectory]).status == 0)
            #expect(chown(dataDirectory, 65534, 65534) == 0)
            try FileManager.default.removeItem(atPath: dataDirectory + "/sync.lmdb-in-use")
            #expect(try await ServerTool.run(["token", "list", "--data-dir", dataDirectory]).status == 0)
            #expect(try await ServerTool.run(["restore", "--from", backup, "--data-dir", dataDirectory]).status == 0)
            for file in ["sync.lmdb-in-use", "sync.lmdb"] {
                let owner = try FileManager.default.attributesOfItem(atPath: dataDirectory + "/" + file)[.ownerAccountID] as? NSNumber
                #expect(owner?.intValue == 65534, "\(file)")
            }
        }
    }

    @Test("with PostgreSQL, backup and restore --from point to the pg_dump recipe")
    func postgresPointsToRecipe() async throws {
        let url = "postgres://u@127.0.0.1:1/db"
        let backup = try await ServerTool.run(["backup", "--to", "/tmp/x", "--postgres-url", url])
        #expect(backup.status == 1)
        #expect(backup.stderr.contains("the store is PostgreSQL: back it up with PostgreSQL's tools (pg_dump"))
        let restore = try await ServerTool.run(["restore", "--from", "/tmp/x", "--postgres-url", url])
        #expect(restore.status == 1)
        #expect(restore.stderr.contains("pg_restore"))
        let neither = try await ServerTool.run(["restore", "--data-dir", "/tmp/x"])
        #expect(neither.status == 1)
        #expect(neither.stderr.contains("give either --from PATH or --announce"))
    }
}
