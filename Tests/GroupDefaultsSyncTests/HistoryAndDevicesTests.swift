import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// The server's key history and its record of devices, through the real tools and server, as a
/// user would: `groupdefaults-sync history` and `restore --rev`, `groupdefaults-server devices
/// list|revoke`, `groupdefaults-sync status`.
@Suite("Key history and devices", .timeLimit(.minutes(3)))
struct HistoryAndDevicesTests {
    @Test(
        "history: N+5 writes keep the last N, newest first; restore --rev reaches the other device; bad input changes nothing",
        arguments: StorageBackend.allCases
    )
    func historyAndRestore(backend: StorageBackend) async throws {
        let depth = 3
        try await SyncServer.with(backend, ["--history", String(depth)]) { server in
            let suite = "group.history"
            try await withToolPair(suite) { phone, tablet in
                try await phone.configure(server)
                try await tablet.configure(server)
                let phoneDefaults = try phone.open()
                let tabletDefaults = try tablet.open()
                for n in 1...(depth + 5) {
                    phoneDefaults.set("sound-\(n).caf", forKey: "sound")
                    try await expectSuccess(phone.sync("sync"))
                }
                try await expectSuccess(tablet.sync("sync"))

                let listed = try await tablet.sync("history", ["sound", "--json"])
                expectSuccess(listed)
                let history = try JSONDecoder().decode(KeyHistory.self, from: Data(listed.stdout.utf8))
                #expect(history.key == "sound")
                #expect(history.versions.map(\.entry.value) == (6...8).reversed().map { .string("sound-\($0).caf") })
                let revisions = history.versions.compactMap(\.entry.rev)
                #expect(revisions == revisions.sorted(by: >) && revisions.count == depth)
                #expect(history.versions.allSatisfy { $0.entry.origin == phoneDefaults.origin })
                let text = try await tablet.sync("history", ["sound"])
                expectSuccess(text)
                #expect(text.stdout.split(separator: "\n").count == depth)
                #expect(text.stdout.contains("sound = {\"string\":\"sound-8.caf\"}"), "\(text.stdout)")

                // Bad input: one line, exit 1, nothing changes.
                for arguments in [
                    ["history", "never-written"], ["restore", "sound", "--rev", "999999"], ["restore", "never-written", "--rev", "1"],
                ] {
                    let refused = try await tablet.sync(arguments[0], Array(arguments.dropFirst()))
                    #expect(refused.status == 1, "\(arguments): \(refused)")
                    #expect(refused.stderr.split(separator: "\n").count == 1, "\(arguments): \(refused.stderr)")
                    #expect(refused.stdout.isEmpty)
                }
                #expect(tabletDefaults.string(forKey: "sound") == "sound-8.caf")
                #expect(try tabletDefaults.pendingCount() == 0)

                // The oldest kept version comes back on the tablet as a new write, and reaches the phone.
                let oldest = try #require(history.versions.last?.entry.rev)
                let restored = try await tablet.sync("restore", ["sound", "--rev", String(oldest)])
                expectSuccess(restored)
                #expect(restored.stdout.contains("restored from server revision \(oldest)"), "\(restored.stdout)")
                #expect(tabletDefaults.string(forKey: "sound") == "sound-6.caf")
                try await expectSuccess(tablet.sync("sync"))
                try await expectSuccess(phone.sync("sync"))
                #expect(phoneDefaults.string(forKey: "sound") == "sound-6.caf")
                let after = try await tablet.engine(server).history.versions(of: "sound")
                #expect(after.versions.first?.entry.origin == tabletDefaults.origin)
                #expect(after.versions.first?.entry.value == .string("sound-6.caf"))
                #expect(after.versions.count == depth)

                // Keys that are awkward in a URL path reach the right history.
                let awkward = ["a/b", ".", "..", "50%", "über uns?#", "%2F"]
                for key in awkward { phoneDefaults.set("v-\(key)", forKey: key) }
                try await expectSuccess(phone.sync("sync"))
                for key in awkward {
                    let history = try await tablet.engine(server).history.versions(of: key)
                    #expect(history.key == key && history.versions.map(\.entry.value) == [.string("v-\(key)")], "\(key)")
                }
            }
        }
    }

    @Test(
        "history after the purge: a purged deletion takes its key's history; a live key keeps only what is newer than the horizon, and its current version",
        arguments: StorageBackend.allCases
    )
    func historyAfterPurge(backend: StorageBackend) async throws {
        // Deletions kept 30 s (time for the writes and the first look, also while every other test
        // runs on two cores: 5 s and then 15 s were once too little), purged every second.
        try await SyncServer.with(backend, tombstonesKept: .seconds(30), purgedEvery: .seconds(1)) { server in
            let suite = "group.history.purge"
            try await withToolPair(suite) { phone, _ in
                try await phone.configure(server)
                let defaults = try phone.open()
                for value in ["a", "b"] {
                    defaults.set(value, forKey: "gone")
                    try await expectSuccess(phone.sync("sync"))
                    defaults.set(value, forKey: "kept")
                    try await expectSuccess(phone.sync("sync"))
                }
                defaults.removeObject(forKey: "gone")
                try await expectSuccess(phone.sync("sync"))
                let engine = try phone.engine(server)
                #expect(try await engine.history.versions(of: "gone").versions.count == 3)
                #expect(try await engine.history.versions(of: "kept").versions.count == 2)

                // The purge runs by itself: wait until it has passed these writes.
                #expect(
                    await eventually(within: .seconds(60)) {
                        let gone = try? await phone.sync("history", ["gone"])
                        return gone?.status == 1
                    },
                    "the deleted key's history is purged with its tombstone"
                )
                let refused = try await phone.sync("history", ["gone"])
                #expect(refused.stderr.contains("never written, or purged"), "\(refused.stderr)")
                #expect(
                    await eventually(within: .seconds(60)) {
                        (try? await engine.history.versions(of: "kept").versions.count) == 1
                    }
                )
                let kept = try await engine.history.versions(of: "kept")
                #expect(kept.versions.map(\.entry.value) == [.string("b")], "the current version stays, however old")
            }
        }
    }

    @Test(
        "devices: bound tokens are listed by name with their device id, suites and times; revoking one ends its stream and its next sync exits 3; the other goes on",
        arguments: StorageBackend.allCases
    )
    func devicesListAndRevoke(backend: StorageBackend) async throws {
        // A heartbeat of 1 s: an event stream re-checks its token at least that often.
        try await SyncServer.with(backend, ["--heartbeat", "1"]) { server in
            let suite = "group.devices"
            try await withToolPair(suite) { phone, tablet in
                let phoneToken = try await ServerTool.createToken(storage: server.storage, ["--device", "phone"])
                let tabletToken = try await ServerTool.createToken(storage: server.storage, ["--device", "tablet"])
                try await phone.configure(server, token: phoneToken)
                try await tablet.configure(server, token: tabletToken)
                let phoneDefaults = try phone.open()
                let tabletDefaults = try tablet.open()
                let start = HLC.wallClockMilliseconds()
                phoneDefaults.set("ring.caf", forKey: "sound")
                try await expectSuccess(phone.sync("sync"))
                let tabletSyncStart = HLC.wallClockMilliseconds()
                try await expectSuccess(tablet.sync("sync"))
                #expect(tabletDefaults.string(forKey: "sound") == "ring.caf")

                // Listed beside the running servers, by another process; last seen and last push catch up within a second.
                var devices: [DeviceInfo] = []
                #expect(
                    await eventually {
                        devices = (try? await Self.listDevices(server)) ?? []
                        return devices.count == 2 && devices.first { $0.name == "phone" }?.lastPush != nil
                            && (devices.first { $0.name == "tablet" }.map { Self.milliseconds($0.lastSeen) >= tabletSyncStart } ?? false)
                    },
                    "\(devices)"
                )
                let end = HLC.wallClockMilliseconds()
                let listedPhone = try #require(devices.first { $0.name == "phone" })
                let listedTablet = try #require(devices.first { $0.name == "tablet" })
                #expect(devices.map(\.name) == ["tablet", "phone"], "most recently seen first")
                #expect(listedPhone.deviceID == phoneDefaults.origin && listedTablet.deviceID == tabletDefaults.origin)
                #expect(listedPhone.suites == [suite] && listedTablet.suites == [suite])
                #expect(listedPhone.lastPush != nil, "the phone pushed")
                #expect(listedTablet.lastPush == nil, "the tablet only pulled")
                for device in devices {
                    let first = Self.milliseconds(device.firstSeen)
                    let last = Self.milliseconds(device.lastSeen)
                    #expect(start <= first && first <= last && last <= end, "\(device)")
                }
                #expect(Self.milliseconds(listedTablet.firstSeen) >= tabletSyncStart)

                // status names the device.
                let status = try await tablet.sync("status")
                #expect(status.stdout.contains("device: tablet (id \(tabletDefaults.origin))"), "\(status.stdout)")
                let json = try JSONSerialization.jsonObject(with: Data(try await phone.sync("status", ["--json"]).stdout.utf8)) as? [String: Any]
                #expect(json?["device_name"] as? String == "phone")

                // Revoke the tablet while its `run` holds an event stream open.
                let run = try tablet.start("run", ["--log-level", "info"])
                defer { run.signal(SIGKILL) }
                #expect(
                    await eventually { Metrics.value((try? await server.metricsText()) ?? "", "groupdefaults_event_streams_open") == 1 },
                    "\(run.stderr)"
                )
                let revoke = try await ServerTool.run(["devices", "revoke", listedTablet.id] + server.storage)
                expectSuccess(revoke)
                #expect(revoke.stdout.contains("revoked \(listedTablet.id) (tablet)"), "\(revoke.stdout)")
                #expect(
                    await eventually { Metrics.value((try? await server.metricsText()) ?? "", "groupdefaults_event_streams_open") == 0 },
                    "the revoked device's stream ended"
                )
                #expect(await eventually { run.stderr.contains("authentication needed") }, "\(run.stderr)")
                let refused = try await tablet.sync("sync")
                #expect(refused.status == 3, "\(refused)")

                // The phone goes on.
                phoneDefaults.set("bell.aiff", forKey: "sound")
                try await expectSuccess(phone.sync("sync"))
                #expect(try await server.snapshot(suite).entries["sound"]?.value == .string("bell.aiff"))
                let unknown = try await ServerTool.run(["devices", "revoke", "dev_000000000000"] + server.storage)
                #expect(unknown.status == 1 && unknown.stderr.split(separator: "\n").count == 1, "\(unknown)")
                #expect(await run.terminate().status == 0)
            }
        }
    }

    @Test(
        "a token swap (configure with a new token of the same device name, then the old one revoked) marks no record unverified; another device's live token claiming the id is marked",
        arguments: StorageBackend.allCases
    )
    func tokenSwapStaysVerified(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let phone = ToolDevice("group.swap")
            defer { phone.remove() }
            let (first, firstID) = try await Self.namedToken(server, device: "phone")
            try await phone.configure(server, token: first, tokenName: "first.token")
            try phone.open().set("ring.caf", forKey: "sound")
            try await expectSuccess(phone.sync("sync"))
            let (second, secondID) = try await Self.namedToken(server, device: "phone")
            try await phone.configure(server, token: second, tokenName: "second.token")
            try phone.open().set("bell.aiff", forKey: "sound")
            try await expectSuccess(phone.sync("sync"))
            let origin = try phone.open().origin

            // Both tokens live: the same device, by its name; the first token's record was first.
            try await Self.expectUnverified(server, [], of: [firstID, secondID], deviceID: origin)
            // The old token revoked: its record, which was first, is not marked either.
            #expect(try await server.tokenCommand(["revoke", firstID]).status == 0)
            try await Self.expectUnverified(server, [], of: [firstID, secondID], deviceID: origin)
            let status = try await phone.sync("status")
            #expect(status.status == 0 && status.stdout.contains("device: phone (id \(origin))"), "\(status)")

            // The laptop's token naming the phone's id: marked, against the phone's live token.
            let (laptop, laptopID) = try await Self.namedToken(server, device: "laptop")
            var impostor = server.client("group.swap", token: laptop)
            impostor.deviceID = origin
            _ = try await impostor.changes(since: 0)
            let text = try await Self.expectUnverified(server, [laptopID], of: [firstID, secondID, laptopID], deviceID: origin)
            #expect(
                text.contains("\t\(laptopID)\t")
                    && text.contains("unverified: token \(secondID) (phone) used device \(origin) first and still works"),
                "\(text)"
            )
            // The API says the same to the phone's token.
            let listed = try await server.client("group.swap", token: second).devices().devices.filter { $0.deviceID == origin }
            #expect(Set(listed.filter(\.unverified).map(\.tokenID)) == [laptopID], "\(listed)")
        }
    }

    /// `token create --account alice --device NAME`: the token and its id.
    static func namedToken(_ server: SyncServer, device: String) async throws -> (token: String, id: String) {
        let made = try await ServerTool.run(["token", "create"] + server.storage + ["--account", "alice", "--device", device])
        #expect(made.status == 0, "\(made.stderr)")
        let id = try #require(made.stderr.split(separator: " ").dropFirst().first.map(String.init), "\(made.stderr)")
        return (made.stdout.trimmingCharacters(in: .whitespacesAndNewlines), id)
    }

    /// `devices list` (JSON and text): of the records of `deviceID` by the tokens `tokens`, exactly
    /// those of `unverified` are marked. Returns the text list.
    @discardableResult
    static func expectUnverified(
        _ server: SyncServer,
        _ unverified: Set<String>,
        of tokens: Set<String>,
        deviceID: UInt64,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> String {
        let records = try await listDevices(server).filter { $0.deviceID == deviceID }
        #expect(Set(records.map(\.tokenID)) == tokens, "\(records)", sourceLocation: sourceLocation)
        #expect(Set(records.filter(\.unverified).map(\.tokenID)) == unverified, "\(records)", sourceLocation: sourceLocation)
        let text = try await ServerTool.run(["devices", "list", "--account", "alice"] + server.storage)
        #expect(text.status == 0, "\(text.stderr)", sourceLocation: sourceLocation)
        let marked = text.stdout.split(separator: "\n").filter { $0.contains("unverified") }
        #expect(marked.count == unverified.count, "\(text.stdout)", sourceLocation: sourceLocation)
        return text.stdout
    }

    static func listDevices(_ server: SyncServer) async throws -> [DeviceInfo] {
        let listed = try await ServerTool.run(["devices", "list", "--account", "alice", "--json"] + server.storage)
        guard listed.status == 0 else { throw FixtureError("devices list: \(listed.stderr)") }
        return try JSONDecoder().decode([DeviceInfo].self, from: Data(listed.stdout.utf8))
    }

    static func milliseconds(_ text: String) -> UInt64 {
        TypedJSONDate.parse(text).map { UInt64(($0.timeIntervalSince1970 * 1000).rounded()) } ?? 0
    }
}

extension ToolDevice {
    /// An engine for the device's configured suite, in this process (for what the tools print as text).
    func engine(_ server: SyncServer) throws -> SyncEngine {
        try SyncEngine(configured: try open(), http: server.http)
    }
}
