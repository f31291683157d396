import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// Sync never loses a write: what is written after `configure` competes by last writer wins, also
/// at a device's first sync; a local value that another device's newer write replaces before it
/// reached the server is kept (`conflicts`) and can be brought back (`restore`). Driven through the
/// real tools, as a user would.
@Suite("Conflicts and the joining rule", .timeLimit(.minutes(3)))
struct ConflictTests {
    @Test(
        "two devices configured, then edited offline: the newest write wins everywhere, deletions included, whatever syncs first",
        arguments: StorageBackend.allCases
    )
    func newestWriteWinsAfterConfigure(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.t"
            try await withToolPair(suite) { phone, tablet in
                // Both used the suite before sync: `init` and `gone` (to be deleted) on each.
                for device in [phone, tablet] {
                    for (key, value) in [("init", "x"), ("gone", "old"), ("kept", "old")] {
                        try await expectSuccess(device.defaultsTool(["write", suite, key, value]))
                    }
                }
                try await phone.configure(server)
                try await tablet.configure(server)
                // Offline, in this real-time order: the phone first, the tablet later.
                try await expectSuccess(phone.defaultsTool(["write", suite, "k0", "from-phone-first"]))
                try await expectSuccess(phone.defaultsTool(["write", suite, "kept", "from-phone-first"]))
                try await expectSuccess(phone.defaultsTool(["delete", suite, "gone"]))
                try await expectSuccess(tablet.defaultsTool(["write", suite, "k0", "from-tablet-later"]))
                try await expectSuccess(tablet.defaultsTool(["write", suite, "gone", "from-tablet-later"]))
                try await expectSuccess(tablet.defaultsTool(["delete", suite, "kept"]))

                try await expectSuccess(phone.sync("sync"))
                try await expectSuccess(tablet.sync("sync"))
                try await expectSuccess(phone.sync("sync"))

                for (name, device) in [("phone", phone), ("tablet", tablet)] {
                    let defaults = try device.open()
                    #expect(defaults.string(forKey: "k0") == "from-tablet-later", "\(name)")
                    #expect(defaults.string(forKey: "gone") == "from-tablet-later", "\(name): a later write beats an earlier delete")
                    #expect(defaults.object(forKey: "kept") == nil, "\(name): a later delete beats an earlier write")
                    #expect(defaults.string(forKey: "init") == "x", "\(name)")
                }
                let onServer = try await server.snapshot(suite).entries
                #expect(onServer["k0"]?.value == .string("from-tablet-later"))
                #expect(onServer["gone"]?.value == .string("from-tablet-later"))
                #expect(onServer["kept"] == nil)
            }
        }
    }

    @Test(
        "a pending value replaced by a newer one is listed by `conflicts` with its stamp, `restore` brings it back everywhere; so for a deletion",
        arguments: StorageBackend.allCases
    )
    func conflictsAndRestore(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.conflicts"
            try await withToolPair(suite) { phone, tablet in
                try await phone.configure(server)
                try await tablet.configure(server)
                let phoneDefaults = try phone.open()
                let tabletDefaults = try tablet.open()
                phoneDefaults.set("chime.caf", forKey: "volume-to-delete")
                try await expectSuccess(phone.sync("sync"))
                try await expectSuccess(tablet.sync("sync"))

                // The phone changes two keys offline; the tablet changes them later and syncs first.
                let lost = try #require(try writeEntry(phoneDefaults, "sound", .string("ring.caf")))
                let lostDeletion = try #require(try writeEntry(phoneDefaults, "volume-to-delete", nil))
                waitUntilClockPasses(lostDeletion.hlc)
                let winner = try #require(try writeEntry(tabletDefaults, "sound", .string("bell.caf")))
                try writeEntry(tabletDefaults, "volume-to-delete", .string("kept.caf"))
                try await expectSuccess(tablet.sync("sync"))
                let feed = try phoneDefaults.changeFeed(forKeys: ["sound"], since: phoneDefaults.lastSequence)

                let synced = try await phone.sync("sync")
                #expect(synced.status == 0, "\(synced.stderr)")
                #expect(
                    synced.stdout.contains(
                        "2 local values replaced by newer ones from device \(tabletDefaults.origin); see `groupdefaults-sync conflicts --directory \(phone.directory.path) \(suite)`"
                    ),
                    "\(synced.stdout)"
                )
                #expect(phoneDefaults.string(forKey: "sound") == "bell.caf")
                let change = try #require(try feed.next(timeout: .seconds(5)))
                #expect(change.isRemote && change.isConflict && change.origin == tabletDefaults.origin, "\(change)")
                // `groupdefaults watch` says so too.
                var environment = ProcessInfo.processInfo.environment
                environment["GROUPDEFAULTS_DIR"] = phone.directory.path
                let watch = try RunningProcess(
                    ToolDevice.defaultsExecutable,
                    ["watch", suite, "sound", "--since", String(change.sequence - 1)],
                    environment: environment
                )
                defer { watch.stop() }
                let line = await watch.firstLine(timeout: .seconds(30)) { $0.contains(" set sound ") }
                #expect(
                    line?.hasSuffix("(remote, from device \(tabletDefaults.origin); it replaced a local value kept in the conflict journal)") == true,
                    "\(line ?? "no line")"
                )
                #expect(await watch.end(with: SIGTERM)?.status == 0)

                // Listed, newest first, with the replaced write's stamp and its winner's.
                let listed = try await phone.sync("conflicts", ["--json"])
                #expect(listed.status == 0, "\(listed.stderr)")
                let entries = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
                try #require(entries.count == 2, "\(listed.stdout)")
                let sound = try #require(entries.first { $0["key"] as? String == "sound" })
                #expect((sound["value"] as? [String: Any])?["string"] as? String == "ring.caf")
                #expect(sound["hlc"] as? String == String(lost.hlc.rawValue) && sound["origin"] as? String == String(lost.origin))
                #expect(sound["replaced_by_hlc"] as? String == String(winner.hlc.rawValue))
                #expect(sound["replaced_by_origin"] as? String == String(winner.origin))
                #expect((sound["at"] as? String)?.hasSuffix("Z") == true && sound["id"] is Int)
                let deletion = try #require(entries.first { $0["key"] as? String == "volume-to-delete" })
                #expect(deletion["deleted"] as? Bool == true && deletion["value"] == nil)
                #expect(deletion["hlc"] as? String == String(lostDeletion.hlc.rawValue))
                #expect((entries[0]["id"] as? Int ?? 0) > (entries[1]["id"] as? Int ?? 0), "newest first")
                let text = try await phone.sync("conflicts")
                #expect(text.stdout.contains("sound = {\"string\":\"ring.caf\"}") && text.stdout.contains("(deleted)"), "\(text.stdout)")

                // Bad input changes nothing.
                for arguments in [["never-written"], ["sound", "--conflict", "999"], ["sound", "--conflict", String(deletion["id"] as? Int ?? 0)]] {
                    let refused = try await phone.sync("restore", arguments)
                    #expect(refused.status == 1 && refused.stderr.split(separator: "\n").count == 1, "\(arguments): \(refused)")
                }
                #expect(phoneDefaults.string(forKey: "sound") == "bell.caf")

                // Restored: a new local write, newest, so it wins on the other device too.
                try await expectSuccess(phone.sync("restore", ["sound"]))
                try await expectSuccess(phone.sync("restore", ["volume-to-delete", "--conflict", String(deletion["id"] as? Int ?? 0)]))
                #expect(phoneDefaults.string(forKey: "sound") == "ring.caf" && phoneDefaults.object(forKey: "volume-to-delete") == nil)
                try await expectSuccess(phone.sync("sync"))
                try await expectSuccess(tablet.sync("sync"))
                #expect(tabletDefaults.string(forKey: "sound") == "ring.caf")
                #expect(tabletDefaults.object(forKey: "volume-to-delete") == nil)
                #expect(try tabletDefaults.conflicts().isEmpty, "the tablet's values were synced, not pending: nothing of its own was lost")
            }
        }
    }

    @Test("local-only keys never reach the server, pulled values for them are not applied (counted), local writes are still observed")
    func localOnlyKeys() async throws {
        try await SyncServer.with { server in
            let suite = "group.local.only"
            try await withToolPair(suite) { phone, tablet in
                let refused = try await phone.sync(
                    "configure",
                    [
                        "--server", server.url.absoluteString, "--token-file",
                        try phone.tokenFile(server.token), "--exclude", "bad\u{7}",
                    ]
                )
                #expect(refused.status != 0 && refused.stderr.contains("control character"), "\(refused)")
                try await expectSuccess(
                    phone.sync(
                        "configure",
                        [
                            "--server", server.url.absoluteString, "--token-file",
                            try phone.tokenFile(server.token), "--exclude", "draft.*", "--exclude", "window",
                        ]
                    )
                )
                try await tablet.configure(server)
                let phoneDefaults = try phone.open()
                let tabletDefaults = try tablet.open()
                let feed = try phoneDefaults.changeFeed(forKeys: ["draft.message"], since: phoneDefaults.lastSequence)
                phoneDefaults.set("half a thought", forKey: "draft.message")
                phoneDefaults.set(1200, forKey: "window")
                phoneDefaults.set("ring.caf", forKey: "sound")
                #expect(try feed.next(timeout: .seconds(5))?.value == .string("half a thought"), "local writes are observed as ever")
                #expect(try phoneDefaults.pendingCount() == 1, "only `sound` is pending")
                try await expectSuccess(phone.sync("sync"))
                #expect(Set(try await server.snapshot(suite).entries.keys) == ["sound"], "nothing local-only on the server")

                tabletDefaults.set("from the tablet", forKey: "draft.message")
                try await expectSuccess(tablet.sync("sync"))
                let pulled = try await phone.sync("sync")
                #expect(pulled.stdout.contains("ignored 1 (local-only)"), "\(pulled.stdout)")
                #expect(phoneDefaults.string(forKey: "draft.message") == "half a thought")
                let status = try await phone.sync("status", ["--json"])
                let json = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
                #expect(json["local_only_keys"] as? [String] == ["draft.*", "window"] && json["ignored"] as? Int == 1, "\(status.stdout)")
                #expect(json["device_id"] as? String == String(phoneDefaults.origin))
                let info = try await phone.defaultsTool(["info", suite])
                #expect(info.stdout.contains("sync local-only keys: draft.* window"), "\(info.stdout)")

                // No longer local-only: `window` is pushed at the next sync.
                try await expectSuccess(
                    phone.sync(
                        "configure",
                        [
                            "--server", server.url.absoluteString, "--token-file",
                            try phone.tokenFile(server.token), "--exclude", "draft.*",
                        ]
                    )
                )
                try await expectSuccess(phone.sync("sync"))
                #expect(Set(try await server.snapshot(suite).entries.keys) == ["sound", "window", "draft.message"])
                #expect(try await server.snapshot(suite).entries["draft.message"]?.value == .string("from the tablet"))
            }
        }
    }
}

extension ConflictTests {
    @Test("the conflict journal keeps its bound: the newest entries, newest first")
    func journalBound() async throws {
        try await SyncServer.with { server in
            let suite = "group.journal.bound"
            let a = try Device(suite, server: server)
            let b = try Device(suite, server: server)
            defer {
                a.remove()
                b.remove()
            }
            try a.defaults.setConflictJournalBounds(.init(maximumCount: 5, maximumAge: .seconds(3600)))
            try await a.engine.syncOnce()
            try await b.engine.syncOnce()
            let keys = (0..<8).map { "k\($0)" }
            var lost: [String: SyncEntry] = [:]
            for (index, key) in keys.enumerated() { lost[key] = try a.set(key, .integer(index)) }
            waitUntilClockPasses(lost["k7"]!.hlc)
            for (index, key) in keys.enumerated() { try b.set(key, .integer(100 + index)) }
            try await b.engine.syncOnce()
            let report = try await a.engine.syncOnce()
            #expect(report.replaced == 8 && report.replacedBy == [b.defaults.origin])
            let kept = try a.defaults.conflicts()
            #expect(kept.map(\.key) == ["k7", "k6", "k5", "k4", "k3"])
            for conflict in kept {
                #expect(conflict.value == lost[conflict.key]?.value && conflict.stamp == lost[conflict.key]?.stamp)
            }
            try a.defaults.setConflictJournalBounds(.init(maximumCount: 2, maximumAge: .seconds(3600)))
            #expect(try a.defaults.conflicts().map(\.key) == ["k7", "k6"], "a lower bound applies at once")
            // A journal that keeps nothing would lose the next replaced value without a trace.
            for bounds in [
                SharedDefaults.ConflictJournalBounds(maximumCount: 0, maximumAge: .seconds(3600)), .init(maximumCount: 5, maximumAge: .zero),
            ] {
                #expect(throws: SharedDefaultsError.self) { try a.defaults.setConflictJournalBounds(bounds) }
            }
            #expect(try a.defaults.conflictJournalBounds().maximumCount == 2)
        }
    }
}

/// Returns once this machine's clock is past `hlc`'s millisecond, so that a write another store
/// makes next is later in real time, as a person's next action on another device is (two stores
/// writing within the same millisecond are ordered by their origin ids instead).
func waitUntilClockPasses(_ hlc: HLC) {
    while HLC.wallClockMilliseconds() <= hlc.milliseconds { usleep(100) }
}

/// Expects a tool run to succeed, showing its stderr otherwise.
func expectSuccess(_ result: (status: Int32, stdout: String, stderr: String), sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
}
