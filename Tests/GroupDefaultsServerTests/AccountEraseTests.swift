import Foundation
import Glibc
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

/// `groupdefaults-server accounts delete` on the embedded store erases the account's bytes from the
/// store's file (`LMDBErase`): at once when nothing else has the store open, else when the store is
/// next opened alone; never losing or changing anything of the other accounts. Real processes, and
/// a raw scan of every file of the data directory.
@Suite("Erasing a deleted account from the embedded store's file", .timeLimit(.minutes(1)))
struct AccountEraseTests {
    /// A data directory with alice (her suite, key and value carry AAAMARK) and bob (BBBMARK), each
    /// with a token and a pushed entry, written through a server that is stopped again.
    private func withTwoAccounts(
        _ body: (_ directory: String, _ alice: String, _ bob: String, _ incarnation: String) async throws -> Void
    )
        async throws
    {
        let directory = ServerTool.temporaryDirectory("gds-erase")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let alice = try await ServerTool.createToken(directory, ["--device", "phone-AAAMARK"])
        let bobMade = try await ServerTool.run(["token", "create", "--data-dir", directory, "--account", "bob"])
        let bob = bobMade.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let server = try await ServerProcess(dataDirectory: directory)
        try await push(server.port, alice, suite: "group.AAAMARK", [API.set("k-AAAMARK", "v-AAAMARK"), API.delete("gone-AAAMARK")])
        try await push(server.port, bob, suite: "group.BBBMARK", [API.set("k-BBBMARK", "v-BBBMARK")])
        let incarnation = try #require(try await Self.incarnation(server))
        await server.stop()
        try await body(directory, alice, bob, incarnation)
    }

    private func push(_ port: Int, _ token: String, suite: String, _ ops: [PushOp]) async throws {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            let response = try await client.post("/v1/suites/\(suite)/push", headers: API.auth(token), body: API.push(ops))
            #expect(response.status == .ok)
        }
    }

    /// The `Server-Incarnation` header of the server's `/v1/health`.
    static func incarnation(_ server: ServerProcess) async throws -> String? {
        let answer = try await Curl.run(["--head", server.url.appendingPathComponent("v1/health").absoluteString])
        return answer.stdout.split(separator: "\r\n").first { $0.lowercased().hasPrefix("server-incarnation:") }
            .map { String($0.dropFirst("server-incarnation:".count)).trimmingCharacters(in: .whitespaces) }
    }

    /// How often `marker` occurs in the bytes of every file under `directory`.
    static func occurrences(of marker: String, under directory: String) throws -> Int {
        var count = 0
        let files = FileManager.default.enumerator(atPath: directory)
        while let name = files?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let path = directory + "/" + name
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            count += StorageConformanceTests.AccountStoreConformance.occurrences(
                of: marker,
                in: Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            )
        }
        return count
    }

    /// Bob, through a server started on `directory`: his token works, his entry is there, and the
    /// storage's incarnation is `incarnation` (devices upload nothing); alice's token is unknown.
    private func expectBobWhole(_ directory: String, alice: String, bob: String, incarnation: String) async throws {
        let server = try await ServerProcess(dataDirectory: directory)
        #expect(try await Self.incarnation(server) == incarnation, "an erase is not a restore")
        try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            let snapshot = try await client.get("/v1/suites/group.BBBMARK/snapshot", headers: API.auth(bob))
            #expect(snapshot.status == .ok)
            #expect(String(buffer: snapshot.body ?? ByteBuffer()).contains("v-BBBMARK"))
            let gone = try await client.get("/v1/suites", headers: API.auth(alice))
            #expect(gone.status == .unauthorized)
        }
        await server.stop()
    }

    @Test("deleted while no server runs: its bytes are gone from every file at once; bob is whole, his token works, the incarnation stays")
    func eraseAtOnce() async throws {
        try await withTwoAccounts { directory, alice, bob, incarnation in
            #expect(try Self.occurrences(of: "AAAMARK", under: directory) > 0)
            let deleted = try await ServerTool.run(["accounts", "delete", "alice", "--yes", "--data-dir", directory])
            #expect(deleted.status == 0 && deleted.stdout == "deleted account alice; its bytes are erased from the store\n", "\(deleted)")
            #expect(try Self.occurrences(of: "AAAMARK", under: directory) == 0)
            #expect(try Self.occurrences(of: "BBBMARK", under: directory) > 0)
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == [
                    "server.lock", "sync.lmdb", "sync.lmdb-in-use", "sync.lmdb-lock", "sync.lmdb-open",
                ]
            )
            #expect((try FileManager.default.attributesOfItem(atPath: directory + "/sync.lmdb")[.posixPermissions] as? Int ?? 0) & 0o777 == 0o600)
            try await expectBobWhole(directory, alice: alice, bob: bob, incarnation: incarnation)
            let audit = try await ServerTool.run(["audit", "--data-dir", directory])
            #expect(audit.stdout.contains("account-delete\taccount alice"), "the audit log survives the rebuild: \(audit)")
        }
    }

    @Test("deleted while a server runs: gone from reads at once, from the file when the server starts again alone")
    func erasePendingUntilAlone() async throws {
        try await withTwoAccounts { directory, alice, bob, incarnation in
            let server = try await ServerProcess(dataDirectory: directory)
            let deleted = try await ServerTool.run(["accounts", "delete", "alice", "--yes", "--data-dir", directory])
            #expect(deleted.status == 0, "\(deleted)")
            #expect(deleted.stdout.hasPrefix("deleted account alice; a server or another command has the store open: "), "\(deleted)")
            try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
                let gone = try await client.get("/v1/suites", headers: API.auth(alice))
                #expect(gone.status == .unauthorized)
            }
            #expect(try Self.occurrences(of: "AAAMARK", under: directory) > 0, "the server has the store open: the bytes wait")
            await server.stop()
            try await expectBobWhole(directory, alice: alice, bob: bob, incarnation: incarnation)
            #expect(try Self.occurrences(of: "AAAMARK", under: directory) == 0)
            #expect(!FileManager.default.fileExists(atPath: directory + "/sync.lmdb-erase-pending"))
        }
    }

    @Test(
        "a rebuild that cannot be made (no folder can be made in the data directory) is one line and exit 1; the store is whole and the erase stays pending"
    )
    func failedRebuildChangesNothing() async throws {
        try await withTwoAccounts { directory, alice, bob, incarnation in
            // Carol is deleted while an erase is pending (alice's, made beside a server) and the
            // data directory takes no new entry: the rebuild's folder cannot be made.
            let server = try await ServerProcess(dataDirectory: directory)
            let carolMade = try await ServerTool.run(["token", "create", "--data-dir", directory, "--account", "carol"])
            let carol = carolMade.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            try await push(server.port, carol, suite: "group.CCCMARK", [API.set("k-CCCMARK", "v-CCCMARK")])
            #expect(try await ServerTool.run(["accounts", "delete", "alice", "--yes", "--data-dir", directory]).status == 0)
            await server.stop()
            let before = try Data(contentsOf: URL(fileURLWithPath: directory + "/sync.lmdb"))
            let failed = try await Self.runWithoutWriteAccess(to: directory, ["accounts", "delete", "carol", "--yes", "--data-dir", directory])
            #expect(failed.status == 1, "\(failed)")
            #expect(
                failed.stderr.hasPrefix(
                    "groupdefaults-server: deleted account carol, but its bytes are still in the store's file: "
                        + "cannot make a folder in \(directory) to rebuild the store in: "
                ),
                "\(failed)"
            )
            #expect(failed.stderr.split(separator: "\n").count == 1 && failed.stdout.isEmpty, "\(failed)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: directory + "/sync.lmdb")) != before, "carol's delete itself committed")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).allSatisfy { !$0.hasPrefix(".erase-") })
            #expect(LMDBErase.isPending(in: directory))
            // Later writes may reuse some freed pages, never all of them: bytes are left.
            #expect(try Self.occurrences(of: "AAAMARK", under: directory) + Self.occurrences(of: "CCCMARK", under: directory) > 0)
            // Any command run alone then erases, before it does its own work.
            let list = try await ServerTool.run(["accounts", "list", "--data-dir", directory])
            #expect(list.status == 0 && list.stdout.hasPrefix("bob\t") && list.stdout.split(separator: "\n").count == 1, "\(list)")
            #expect(try Self.occurrences(of: "AAAMARK", under: directory) == 0)
            #expect(try Self.occurrences(of: "CCCMARK", under: directory) == 0)
            #expect(!LMDBErase.isPending(in: directory))
            try await expectBobWhole(directory, alice: alice, bob: bob, incarnation: incarnation)
        }
    }

    /// Runs `groupdefaults-server ARGUMENTS…` while `directory` takes no new entry: as root, as
    /// `nobody` (given the store's files) with the directory 0500; otherwise with it 0500. The
    /// directory is 0700 (and root's, as root) again afterwards.
    ///
    /// `nobody` runs a copy of the executable in a folder of its own that anyone may enter: the
    /// build's own folder may sit in a clone that only its owner can enter (a `mktemp -d` folder,
    /// a home directory of mode 0700), where `runuser` failed with "Permission denied".
    static func runWithoutWriteAccess(to directory: String, _ arguments: [String]) async throws -> ProcessResult {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).map { directory + "/" + $0 } + [directory]
        defer {
            chmod(directory, 0o700)
            if geteuid() == 0 { for file in files { chown(file, 0, 0) } }
        }
        guard geteuid() == 0 else {
            chmod(directory, 0o500)
            return try await runProcess(ServerTool.executable, arguments)
        }
        for file in files { chown(file, 65534, 65534) }
        chmod(directory, 0o500)
        let runuser = ["/usr/sbin/runuser", "/sbin/runuser"].first { FileManager.default.fileExists(atPath: $0) } ?? "/usr/sbin/runuser"
        let reachable = try Self.reachableCopyOfTheServer()
        defer { try? FileManager.default.removeItem(at: reachable.deletingLastPathComponent()) }
        return try await runProcess(URL(fileURLWithPath: runuser), ["-u", "nobody", "--", reachable.path] + arguments)
    }

    /// A copy of the server's executable in a new folder under the system's temporary folder, both
    /// readable and executable by every user.
    static func reachableCopyOfTheServer() throws -> URL {
        var template = Array("/tmp/groupdefaults-server-copy.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        let folder = String(cString: made)
        chmod(folder, 0o755)
        let copy = URL(fileURLWithPath: folder + "/groupdefaults-server")
        try FileManager.default.copyItem(at: ServerTool.executable, to: copy)
        chmod(copy.path, 0o755)
        return copy
    }
}
