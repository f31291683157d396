import Crypto
import Foundation
import Glibc
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsServer

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

            // The backup's own hint, pasted as is into a shell, restores this store (it once named no
            // data directory, and made a new store in the home folder).
            let hint = try #require(made.stdout.split(separator: "`").dropFirst().first.map(String.init), "\(made.stdout)")
            let home = scratch + "/home"
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            let tools = BuiltExecutable.url("groupdefaults-server").deletingLastPathComponent().path
            let restored = try await runProcess(
                URL(fileURLWithPath: "/bin/sh"),
                ["-c", hint],
                environment: ["PATH": tools + ":/usr/bin:/bin", "HOME": home]
            )
            #expect(restored.status == 0, "\(hint): \(restored.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: home).isEmpty, "nothing made elsewhere")
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
                ("text", Data("hello\n".utf8), "is not a backup (`groupdefaults-server backup --data-dir \(dataDirectory) --to FILE` makes them)"),
                ("lmdb", try Data(contentsOf: URL(fileURLWithPath: dataDirectory + "/sync.lmdb")), "is not a backup ("),
                ("truncated", good.prefix(good.count - 4096), "is damaged: it holds"),
                ("flipped", flipped, "was modified or damaged: its bytes do not match the MAC its server's backup key made"),
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

    /// The backup at `path` with its header replaced by `header(content)`.
    private func rewritten(_ path: String, to target: String, header: (Data) -> String) throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        let content = bytes[(bytes.firstIndex(of: 0x0A)! + 1)...]
        try (Data(header(Data(content)).utf8) + content).write(to: URL(fileURLWithPath: target))
    }

    @Test(
        "backups are authenticated by the server's backup key, shown once: a modified backup, with its digest recomputed or signed by another key, is refused; a new machine restores with the key"
    )
    func backupKeyAuthenticates() async throws {
        try await withStore { dataDirectory, scratch in
            let first = try await ServerTool.run(["backup", "--to", scratch + "/first", "--data-dir", dataDirectory])
            #expect(first.status == 0, "\(first.stderr)")
            let keyLine = try #require(first.stdout.split(separator: "\n").first { $0.hasPrefix("backup key: gdbk1-") }, "\(first.stdout)")
            let key = String(keyLine.dropFirst("backup key: ".count))
            #expect(try mode(dataDirectory + "/backup.key") == 0o600)
            let second = try await ServerTool.run(["backup", "--to", scratch + "/second", "--data-dir", dataDirectory])
            #expect(second.status == 0 && !second.stdout.contains("gdbk1-"), "the key is shown once: \(second.stdout)")

            // A store with one byte changed and the old unkeyed header recomputed (what a forger
            // without the key can do), the same under another key's MAC, and one byte changed alone.
            let store = try digest(dataDirectory + "/sync.lmdb")
            var changed = try Data(contentsOf: URL(fileURLWithPath: scratch + "/first"))
            changed[changed.count - 100] ^= 0x01
            try changed.write(to: URL(fileURLWithPath: scratch + "/changed"))
            try rewritten(scratch + "/changed", to: scratch + "/unkeyed") { content in
                "groupdefaults-server backup 1 \(content.count) \(SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined())\n"
            }
            try rewritten(scratch + "/changed", to: scratch + "/otherkey") { content in
                let other = SymmetricKey(size: .bits256)
                let id = HMAC<SHA256>.authenticationCode(for: Data("groupdefaults-server backup key id".utf8), using: other).prefix(8)
                    .map { String(format: "%02x", $0) }.joined()
                let head = "groupdefaults-server backup 2 \(content.count) \(id)\n"
                let mac = HMAC<SHA256>.authenticationCode(for: Data(head.utf8) + content, using: other).map { String(format: "%02x", $0) }.joined()
                return head.dropLast() + " " + mac + "\n"
            }
            for (name, says) in [
                ("changed", "was modified or damaged"), ("unkeyed", "was made by an older version, without a backup key"),
                ("otherkey", "was made with another backup key"),
            ] {
                let result = try await ServerTool.run(["restore", "--from", scratch + "/" + name, "--data-dir", dataDirectory])
                #expect(result.status == 1 && result.stderr.contains(says), "\(name): \(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(name)")
                #expect(try digest(dataDirectory + "/sync.lmdb") == store, "\(name) changed the store")
            }
            // An unkeyed backup the operator vouches for.
            try rewritten(scratch + "/first", to: scratch + "/old") { content in
                "groupdefaults-server backup 1 \(content.count) \(SHA256.hash(data: content).map { String(format: "%02x", $0) }.joined())\n"
            }
            let vouched = try await ServerTool.run(["restore", "--from", scratch + "/old", "--data-dir", dataDirectory, "--allow-unauthenticated"])
            #expect(vouched.status == 0, "\(vouched.stderr)")

            // A new machine: refused without the key, or with a wrong one; restored with it, and keeps it.
            let fresh = scratch + "/new-machine"
            let without = try await ServerTool.run(["restore", "--from", scratch + "/first", "--data-dir", fresh])
            #expect(without.status == 1 && without.stderr.contains("--backup-key-file"), "\(without.stderr)")
            let wrongFile = scratch + "/wrong.key"
            try Data("gdbk1-\(String(repeating: "ab", count: 32))\n".utf8).write(to: URL(fileURLWithPath: wrongFile))
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: wrongFile)
            let wrong = try await ServerTool.run(["restore", "--from", scratch + "/first", "--data-dir", fresh, "--backup-key-file", wrongFile])
            #expect(wrong.status == 1 && wrong.stderr.contains("was made with another backup key"), "\(wrong.stderr)")
            let keyFile = scratch + "/server.key"
            try Data((key + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: keyFile)
            let restored = try await ServerTool.run(["restore", "--from", scratch + "/first", "--data-dir", fresh, "--backup-key-file", keyFile])
            #expect(restored.status == 0, "\(restored.stderr)")
            #expect(try String(contentsOfFile: fresh + "/backup.key", encoding: .utf8) == key + "\n")
            #expect(try mode(fresh + "/backup.key") == 0o600)
        }
    }

    @Test("the bytes a restore stages are checked against the MAC again: a backup swapped for another after the check does not pass")
    func stagedBytesAreCheckedAgain() async throws {
        try await withStore { dataDirectory, scratch in
            let backup = scratch + "/backup"
            #expect(try await ServerTool.run(["backup", "--to", backup, "--data-dir", dataDirectory]).status == 0)
            let checked = try LMDBBackup.checkedContent(of: backup, key: try BackupKey.load(in: dataDirectory), allowUnauthenticated: false)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: backup))
            let staged = scratch + "/staged"
            try bytes[checked.offset...].write(to: URL(fileURLWithPath: staged))
            try checked.verify(staged, backup: backup)
            var swapped = Data(bytes[checked.offset...])
            swapped[swapped.count - 100] ^= 0x01
            try swapped.write(to: URL(fileURLWithPath: staged))
            #expect(throws: BackupFailure.self) { try checked.verify(staged, backup: backup) }
        }
    }

    @Test("a backup or a restore killed at any step leaves no file behind and the store whole; the next run completes")
    func interruptedBackupAndRestore() async throws {
        try await withStore { dataDirectory, scratch in
            let steps = scratch + "/steps"
            let log = ["GROUPDEFAULTS_INTERRUPT_LOG": steps]
            #expect(try await ServerTool.run(["backup", "--to", scratch + "/whole", "--data-dir", dataDirectory], environment: log).status == 0)
            #expect(try await ServerTool.run(["restore", "--from", scratch + "/whole", "--data-dir", dataDirectory], environment: log).status == 0)
            // (A restore's copy is rebuilt as an account's erase is: those steps are the erase's test.)
            let reached = try String(contentsOfFile: steps, encoding: .utf8).split(separator: "\n").map(String.init)
                .filter { $0.hasPrefix("backup.") || $0.hasPrefix("restore.") }
            #expect(reached == ["backup.copied", "backup.written", "restore.staged", "restore.prepared", "restore.renamed"], "\(reached)")
            for step in reached {
                let stop = ["GROUPDEFAULTS_INTERRUPT_AT": step]
                if step.hasPrefix("backup.") {
                    let killed = try await ServerTool.run(["backup", "--to", scratch + "/cut", "--data-dir", dataDirectory], environment: stop)
                    #expect(killed.status != 0, "\(step)")
                    #expect(try FileManager.default.contentsOfDirectory(atPath: scratch).sorted() == ["steps", "whole"], "\(step) left a file")
                } else {
                    let killed = try await ServerTool.run(["restore", "--from", scratch + "/whole", "--data-dir", dataDirectory], environment: stop)
                    #expect(killed.status != 0, "\(step)")
                    #expect(try await ServerTool.run(["token", "list", "--data-dir", dataDirectory]).status == 0, "\(step): the store opens")
                    let again = try await ServerTool.run(["restore", "--from", scratch + "/whole", "--data-dir", dataDirectory])
                    #expect(again.status == 0, "\(step): \(again.stderr)")
                    #expect(try FileManager.default.contentsOfDirectory(atPath: dataDirectory).allSatisfy { !$0.hasPrefix(".restore-") }, "\(step)")
                }
            }
            let after = try await ServerTool.run(["backup", "--to", scratch + "/cut", "--data-dir", dataDirectory])
            #expect(after.status == 0, "\(after.stderr)")
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
        #expect(neither.stderr.contains("give one of --from PATH, --prepare, --announce or --discard-kept"))
    }
}
