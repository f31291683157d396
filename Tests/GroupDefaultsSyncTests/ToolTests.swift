import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// The `groupdefaults-sync` tool's own promises: a private token file, `status --json`, the sync
/// state in `groupdefaults info`, and a value over the server's limit reported, kept, and not
/// holding back the other keys.
@Suite("groupdefaults-sync", .timeLimit(.minutes(2)))
struct ToolTests {
    @Test("configure refuses a token file that its group or others can read, and says why")
    func tokenFileMustBePrivate() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.private.token")
            defer { device.remove() }
            for mode: mode_t in [0o644, 0o640, 0o604] {
                let file = try device.tokenFile(server.token, name: "token-\(String(mode, radix: 8))", mode: mode)
                let result = try await device.sync("configure", ["--server", server.url.absoluteString, "--token-file", file])
                #expect(result.status == 1, "mode \(String(mode, radix: 8)): \(result)")
                #expect(result.stderr.contains("can be read by its group or others") && result.stderr.contains("chmod 600"), "\(result.stderr)")
                #expect(result.stderr.split(separator: "\n").count == 1)
            }
            let status = try await device.sync("status")
            #expect(
                status.status == 1 && status.stderr.contains("does not exist"),
                "a refused configure writes nothing, not even the suite: \(status)"
            )

            let file = try device.tokenFile(server.token, name: "token", mode: 0o600)
            let configured = try await device.sync("configure", ["--server", server.url.absoluteString, "--token-file", file])
            #expect(configured.status == 0, "\(configured.stderr)")
            let contents = try Data(contentsOf: device.directory.appendingPathComponent("\(device.suite).lmdb"))
            #expect(contents.range(of: Data(server.token.utf8)) == nil, "the token is never copied into the suite")
        }
    }

    @Test("a token file a power cut left full of zero bytes is named as damaged, not as a server out of reach")
    func damagedTokenFile() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.damaged.token")
            defer { device.remove() }
            let file = try device.tokenFile(server.token, name: "token", mode: 0o600)
            let configured = try await device.sync("configure", ["--server", server.url.absoluteString, "--token-file", file])
            #expect(configured.status == 0, "\(configured.stderr)")
            // What the power-cut simulator left of a token file written without a flush.
            try Data(repeating: 0, count: server.token.utf8.count + 1).write(to: URL(fileURLWithPath: file))
            let damaged = try await device.sync("sync")
            #expect(damaged.status != 0)
            #expect(damaged.stderr.contains("is damaged") && damaged.stderr.contains("put the token in it again"), "\(damaged.stderr)")
            #expect(!damaged.stderr.contains("cannot reach"), "\(damaged.stderr)")
            try Data((server.token + "\n").utf8).write(to: URL(fileURLWithPath: file))
            let again = try await device.sync("sync")
            #expect(again.status == 0, "the token put back is used at once: \(again.stderr)")
        }
    }

    @Test("status --json and `groupdefaults info` show the sync state: server, token file, cursor, pending")
    func statusAndInfo() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.status")
            defer { device.remove() }
            try await device.configure(server)
            let defaults = try device.open()
            defaults.set("ring.caf", forKey: "sound")
            defaults.set(3, forKey: "badge")

            let before = try await device.sync("status", ["--json"])
            #expect(before.status == 0, "\(before.stderr)")
            let json = try #require(try JSONSerialization.jsonObject(with: Data(before.stdout.utf8)) as? [String: Any])
            #expect(json["suite"] as? String == device.suite)
            #expect(json["synced"] as? Bool == true)
            #expect(json["server"] as? String == server.url.absoluteString)
            #expect((json["token_file"] as? String)?.hasSuffix("/token") == true)
            #expect(json["pending"] as? Int == 2)
            #expect(Set(json["pending_keys"] as? [String] ?? []) == ["sound", "badge"])
            #expect(json["cursor"] == nil || json["cursor"] is NSNull, "no cursor before the first sync")

            let info = try await device.defaultsTool(["info", device.suite])
            #expect(info.status == 0, "\(info.stderr)")
            #expect(info.stdout.contains("sync server: \(server.url.absoluteString)"))
            #expect(info.stdout.contains("sync pending: 2 changes"))
            #expect(info.stdout.contains("sync cursor: none"))

            let sync = try await device.sync("sync")
            #expect(sync.status == 0, "\(sync.stderr)")
            let after = try #require(
                try JSONSerialization.jsonObject(with: Data(try await device.sync("status", ["--json"]).stdout.utf8)) as? [String: Any]
            )
            #expect(after["pending"] as? Int == 0)
            #expect(after["cursor"] as? Int == 2)
            let infoAfter = try await device.defaultsTool(["info", device.suite])
            #expect(infoAfter.stdout.contains("sync cursor: 2") && infoAfter.stdout.contains("sync pending: 0 changes"), "\(infoAfter.stdout)")

            #expect(try await device.sync("unconfigure").status == 0)
            #expect(try await device.defaultsTool(["info", device.suite]).stdout.contains("sync: off"))
        }
    }

    @Test("a value over the server's --max-value-bytes is reported with its key and the limit, kept locally, and the other keys still sync (exit 1)")
    func valueTooLarge() async throws {
        try await SyncServer.with(.lmdb, ["--max-value-bytes", "1000"]) { server in
            let device = ToolDevice("group.too.large")
            defer { device.remove() }
            try await device.configure(server)
            let defaults = try device.open()
            let large = String(repeating: "x", count: 2000)
            defaults.set(large, forKey: "wallpaper")
            defaults.set("ring.caf", forKey: "sound")
            defaults.set(0.5, forKey: "volume")

            let sync = try await device.sync("sync")
            #expect(sync.status == 1, "\(sync)")
            #expect(sync.stderr.contains("'wallpaper'") && sync.stderr.contains("1000"), "the key and the limit: \(sync.stderr)")
            #expect(defaults.string(forKey: "wallpaper") == large, "kept locally")
            let onServer = try await server.snapshot(device.suite).entries
            #expect(Set(onServer.keys) == ["sound", "volume"])
            #expect(try defaults.pendingChanges().map(\.key) == ["wallpaper"], "still pending, to go once it fits")

            // Made smaller, it goes.
            defaults.set("small", forKey: "wallpaper")
            let again = try await device.sync("sync")
            #expect(again.status == 0, "\(again)")
            #expect(try await server.snapshot(device.suite).entries["wallpaper"]?.value == .string("small"))
        }
    }

    @Test("export: what the server holds of a suite (entries, deletions, history) as one document, to stdout or a new 0600 file, never over one")
    func export() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.export")
            defer { device.remove() }
            try await device.configure(server)
            let defaults = try device.open()
            defaults.set("ring.caf", forKey: "sound")
            defaults.set("draft", forKey: "note")
            #expect(try await device.sync("sync").status == 0)
            defaults.set("bell.aiff", forKey: "sound")
            defaults.removeObject(forKey: "note")
            #expect(try await device.sync("sync").status == 0)

            let printed = try await device.sync("export")
            #expect(printed.status == 0, "\(printed.stderr)")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(printed.stdout.utf8)) as? [String: Any])
            #expect(document["format"] as? String == "groupdefaults-account-export" && document["version"] as? Int == 2)
            let suite = try #require((document["suites"] as? [[String: Any]])?.first)
            #expect(suite["name"] as? String == "group.export")
            let entries = suite["entries"] as? [[String: Any]] ?? []
            #expect(entries.map { $0["key"] as? String } == ["note", "sound"])
            #expect(entries.first?["deleted"] as? Bool == true)
            let history = suite["history"] as? [[String: Any]] ?? []
            #expect(history.map { $0["key"] as? String } == ["note", "sound"], "in the order of the entries")
            #expect((history.last?["versions"] as? [[String: Any]])?.count == 2, "both versions of sound")
            #expect(!printed.stdout.contains(server.token))

            let file = device.directory.appendingPathComponent("export.json").path
            #expect(try await device.sync("export", ["--to", file]).status == 0)
            var info = stat()
            #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
            let again = try await device.sync("export", ["--to", file])
            #expect(again.status == 1 && again.stderr == "groupdefaults-sync: cannot create \(file): it exists (give a new path)\n", "\(again)")
        }
    }

    @Test("export of two suites whose names are equal Swift strings (KELVIN SIGN, decomposed é) from one folder: both, each with its own entries")
    func exportKeepsLookAlikeSuitesApart() async throws {
        try await SyncServer.with { server in
            for (suite, lookAlike) in [("Kfam", "\u{212A}fam"), ("caf\u{E9}", "cafe\u{301}")] {
                let device = ToolDevice(suite)
                defer { device.remove() }
                try await device.configure(server)
                let token = device.directory.appendingPathComponent("token").path
                let configured = try await device.syncTool(["configure", lookAlike, "--server", server.url.absoluteString, "--token-file", token])
                #expect(configured.status == 0, "\(configured)")
                #expect(try await device.defaultsTool(["write", suite, "sound", "mine.caf"]).status == 0)
                #expect(try await device.defaultsTool(["write", lookAlike, "sound", "other.caf"]).status == 0)
                #expect(try await device.sync("sync").status == 0)
                #expect(try await device.syncTool(["sync", lookAlike]).status == 0)
                let printed = try await device.sync("export", [lookAlike])
                #expect(printed.status == 0, "\(printed.stderr)")
                let document = try #require(try JSONSerialization.jsonObject(with: Data(printed.stdout.utf8)) as? [String: Any])
                let suites = document["suites"] as? [[String: Any]] ?? []
                #expect(suites.compactMap { ($0["name"] as? String)?.exact } == [suite.exact, lookAlike.exact], "\(suites)")
                let values = suites.map { (($0["entries"] as? [[String: Any]])?.first?["value"] as? [String: Any])?["string"] as? String }
                #expect(values == ["mine.caf", "other.caf"], "\(suites)")
            }
        }
    }

    @Test("export of an end-to-end encrypted suite: entries sealed as stored (no key, no value in clear), with the suite's key bags")
    func exportSealed() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.export.sealed")
            defer { device.remove() }
            let token = try device.tokenFile(server.token)
            let configured = try await device.sync("configure", ["--server", server.url.absoluteString, "--token-file", token, "--encrypt"])
            #expect(configured.status == 0, "\(configured.stderr)")
            #expect(try await device.defaultsTool(["write", device.suite, "secret-sound", "secret-ring.caf"]).status == 0)
            #expect(try await device.sync("sync").status == 0)

            let printed = try await device.sync("export")
            #expect(printed.status == 0, "\(printed.stderr)")
            #expect(!printed.stdout.contains("secret-sound") && !printed.stdout.contains("secret-ring"), "sealed: \(printed.stdout)")
            let document = try #require(try JSONSerialization.jsonObject(with: Data(printed.stdout.utf8)) as? [String: Any])
            let suite = try #require((document["suites"] as? [[String: Any]])?.first)
            let entries = suite["entries"] as? [[String: Any]] ?? []
            let snapshot = try await server.snapshot(device.suite).entries
            #expect(!entries.isEmpty && entries.allSatisfy { $0["sealed"] != nil && $0["value"] == nil }, "\(entries)")
            #expect(Set(entries.compactMap { $0["key"] as? String }) == Set(snapshot.keys), "the key ids, as stored")
            #expect(suite["key_bags"] is [String: Any], "the key bags, sealed")
        }
    }

    @Test("every verb's help shows an example of it; those that talk to the server state their timeouts")
    func helpExamples() async throws {
        let talking: Set<String> = ["configure", "pair", "rotate-key", "sync", "push", "pull", "run", "status", "restore", "history", "export"]
        for verb in [
            "configure", "pair", "rotate-key", "sync", "push", "pull", "run", "status", "conflicts", "restore", "history", "reset", "unconfigure",
            "export",
        ] {
            let help = try await BuiltExecutable.run(ToolDevice.syncExecutable, ["help", verb])
            #expect(help.status == 0, "\(verb): \(help.stderr)")
            #expect(help.stdout.contains("Example: groupdefaults-sync \(verb) group.com.example.chat"), "\(verb): \(help.stdout)")
            #expect(help.stdout.contains("--connect-timeout") == talking.contains(verb), "\(verb): \(help.stdout)")
        }
    }
}
