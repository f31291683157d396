import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// `groupdefaults-sync run` on two devices (real processes): writes by any process reach the other
/// device, an idle pair sends nothing, a revoked token pauses sync until a new one is configured.
@Suite("Continuous sync", .timeLimit(.minutes(2)))
struct RunTests {
    @Test("writes by the `groupdefaults` tool (another process) while `run` runs reach the other device")
    func writesByAnotherProcess() async throws {
        try await SyncServer.with { server in
            try await withRunningPair(server, "group.other.process") { phone, tablet, _, _ in
                let tabletDefaults = try tablet.open()
                let written = try await phone.defaultsTool(["write", phone.suite, "sound", "bell.aiff"])
                #expect(written.status == 0, "\(written.stderr)")
                #expect(await eventually { tabletDefaults.string(forKey: "sound") == "bell.aiff" })

                let typed = try await phone.defaultsTool(["write", phone.suite, "volume", "-float", "0.8"])
                #expect(typed.status == 0, "\(typed.stderr)")
                #expect(await eventually { tabletDefaults.double(forKey: "volume") == 0.8 })

                let deleted = try await phone.defaultsTool(["delete", phone.suite, "sound"])
                #expect(deleted.status == 0, "\(deleted.stderr)")
                #expect(await eventually { tabletDefaults.value(forKey: "sound") == nil })

                // And from the tablet's side, with --directory instead of the environment.
                let back = try await BuiltExecutable.run(
                    ToolDevice.defaultsExecutable,
                    ["write", "--directory", tablet.directory.path, tablet.suite, "theme", "dark"]
                )
                #expect(back.status == 0, "\(back.stderr)")
                let phoneDefaults = try phone.open()
                #expect(await eventually { phoneDefaults.string(forKey: "theme") == "dark" })
            }
        }
    }

    @Test("idle for 10 seconds after convergence: no push, changes or snapshot request, no new stream (counted at the server)")
    func idleSendsNothing() async throws {
        try await SyncServer.with { server in
            try await withRunningPair(server, "group.idle") { phone, tablet, _, _ in
                let phoneDefaults = try phone.open()
                let tabletDefaults = try tablet.open()
                phoneDefaults.set("ring.caf", forKey: "sound")
                tabletDefaults.set(0.5, forKey: "volume")
                #expect(await eventually { tabletDefaults.string(forKey: "sound") == "ring.caf" && phoneDefaults.double(forKey: "volume") == 0.5 })
                #expect(
                    await eventually {
                        (try? phoneDefaults.pendingCount()) == 0 && (try? tabletDefaults.pendingCount()) == 0
                    }
                )
                // Both event streams open.
                #expect(try await eventually { Metrics.value(try await server.metricsText(), "groupdefaults_event_streams_open") == 2 })
                // Each on a connection of its own, which the server holds with no task.
                #expect(try await eventually { Metrics.value(try await server.metricsText(), "groupdefaults_event_streams_held") == 2 })

                let before = try await server.requestCounts()
                try await Task.sleep(for: .seconds(10))  // the quiet period is what is measured
                let after = try await server.requestCounts()
                for route in [Metrics.pushRoute, Metrics.changesRoute, Metrics.snapshotRoute, Metrics.eventsRoute] {
                    #expect(
                        after[route, default: 0] == before[route, default: 0],
                        "\(route): \(before[route, default: 0]) → \(after[route, default: 0])"
                    )
                }
                #expect(before[Metrics.pushRoute, default: 0] >= 2, "the counts are read from the right routes: \(before)")
                #expect(Metrics.value(try await server.metricsText(), "groupdefaults_event_streams_open") == 2)
            }
        }
    }

    @Test("the server killed and started again while run runs: run says it failed, then that it reached the server again; a change crosses")
    func reconnectsAfterOutage() async throws {
        try await SyncServer.with { server in
            try await withRunningPair(server, "group.outage", logLevel: "info") { phone, tablet, phoneRun, _ in
                let phoneDefaults = try phone.open()
                let tabletDefaults = try tablet.open()
                #expect(try await eventually { Metrics.value(try await server.metricsText(), "groupdefaults_event_streams_open") == 2 })
                try await server.killAndRestart {
                    #expect(await eventually { phoneRun.stderr.contains("listening failed, will retry") }, "\(phoneRun.stderr)")
                }
                #expect(
                    await eventually(within: .seconds(30)) { phoneRun.stderr.contains("reached the server again: sync goes on") },
                    "\(phoneRun.stderr)"
                )
                phoneDefaults.set("chime.caf", forKey: "sound")
                #expect(await eventually { tabletDefaults.string(forKey: "sound") == "chime.caf" })
            }
        }
    }

    /// Configures `device` with a token made for it alone, and returns that token's id (to revoke it).
    static func configureWithTokenOfItsOwn(_ device: ToolDevice, _ server: SyncServer) async throws -> String {
        let othersTokens = try await ServerTool.tokenIDs(storage: server.storage)
        let token = try await ServerTool.createToken(storage: server.storage)
        let id = try #require(Set(try await ServerTool.tokenIDs(storage: server.storage)).subtracting(othersTokens).first)
        try await device.configure(server, token: token)
        return id
    }

    @Test("a revoked token: one-shot commands exit 3 with one line and keep what is pending; run pauses; configure with a new token resumes it")
    func revokedToken() async throws {
        try await SyncServer.with { server in
            let suite = "group.revoked"
            let phone = ToolDevice(suite)
            defer { phone.remove() }
            let phoneTokenID = try await Self.configureWithTokenOfItsOwn(phone, server)
            let tablet = try Device(suite, server: server)
            defer { tablet.remove() }
            let phoneDefaults = try phone.open()
            phoneDefaults.set("ring.caf", forKey: "sound")
            #expect(try await phone.sync("sync").status == 0)

            // Revoked by another process while nothing runs.
            let revoke = try await server.tokenCommand(["revoke", phoneTokenID])
            #expect(revoke.status == 0, "\(revoke.stderr)")

            phoneDefaults.set("bell.aiff", forKey: "sound")
            phoneDefaults.set(0.25, forKey: "volume")
            for verb in ["sync", "push", "pull"] {
                let result = try await phone.sync(verb)
                #expect(result.status == 3, "\(verb): \(result)")
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.count == 1 && lines[0].contains("authentication needed") && lines[0].contains("configure"), "\(verb): \(result.stderr)")
            }
            #expect(try phoneDefaults.pendingCount() == 2, "pending changes are kept")
            #expect(phoneDefaults.string(forKey: "sound") == "bell.aiff")

            // `run` pauses: it says so once and stops sending.
            let run = try phone.start("run", ["--log-level", "info"])
            defer { run.signal(SIGKILL) }
            #expect(await eventually { run.stderr.contains("authentication needed") }, "\(run.stderr)")
            let refusedBefore = Metrics.requestCounts(try await server.metricsText(), status: "401")
            try await Task.sleep(for: .seconds(2))  // measuring that nothing is retried meanwhile
            let refusedAfter = Metrics.requestCounts(try await server.metricsText(), status: "401")
            #expect(refusedAfter == refusedBefore, "no retry loop: \(refusedBefore) → \(refusedAfter)")
            #expect(run.isRunning)
            let status = try await phone.sync("status", ["--json"])
            let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
            #expect(json?["pending"] as? Int == 2)
            #expect((json?["note"] as? String)?.hasPrefix("paused: authentication needed") == true, "\(status.stdout)")

            // A new token in a new file: configure, and the paused run resumes by itself.
            let fresh = try await ServerTool.createToken(storage: server.storage)
            try await phone.configure(server, token: fresh, tokenName: "new-token")
            #expect(await eventually { (try? phoneDefaults.pendingCount()) == 0 }, "run resumed: \(run.stderr)")
            #expect(await eventually { SyncHealth.stored(in: phoneDefaults)?.condition == .ok }, "the pause is no longer shown")
            try await tablet.engine.syncOnce()
            #expect(tablet.defaults.string(forKey: "sound") == "bell.aiff" && tablet.defaults.double(forKey: "volume") == 0.25)

            // And the other way: the running engine pulls again too.
            let themed = try tablet.set("theme", .string("dark"))
            try await tablet.engine.syncOnce()
            #expect(await eventually { sameEntry(try? phoneDefaults.syncEntry(forKey: "theme"), themed) }, "\(run.stderr)")
            #expect(await run.terminate().status == 0)
        }
    }

    @Test(
        "a token revoked while run runs: run stays up, paused; status says so and exits 3; a new token in the same file resumes it, and status is ok again"
    )
    func revokedWhileRunning() async throws {
        try await SyncServer.with { server in
            let suite = "group.revoked.running"
            let phone = ToolDevice(suite)
            defer { phone.remove() }
            let phoneTokenID = try await Self.configureWithTokenOfItsOwn(phone, server)
            let phoneDefaults = try phone.open()
            phoneDefaults.set("ring.caf", forKey: "sound")
            let run = try phone.start("run", ["--log-level", "info"])
            defer { run.signal(SIGKILL) }
            #expect(await eventually { (try? phoneDefaults.pendingCount()) == 0 }, "\(run.stderr)")
            let healthy = try await phone.sync("status")
            #expect(healthy.status == 0 && healthy.stdout.hasSuffix("state: ok\n"), "\(healthy)")

            let revoke = try await server.tokenCommand(["revoke", phoneTokenID])
            #expect(revoke.status == 0, "\(revoke.stderr)")
            // The event stream ends with `unauthorized` at its next turn: no local change needed.
            #expect(await eventually(within: .seconds(40)) { SyncHealth.stored(in: phoneDefaults)?.condition == .paused }, "\(run.stderr)")
            #expect(run.isRunning, "a paused suite keeps run alive, waiting for a new token")
            let paused = try await phone.sync("status")
            #expect(paused.status == 3, "\(paused)")
            #expect(paused.stdout.contains("state: paused: authentication needed"), "\(paused.stdout)")
            #expect(paused.stdout.contains("when: since "), "\(paused.stdout)")
            #expect(paused.stderr.split(separator: "\n").count == 1 && paused.stderr.contains("token"), "\(paused.stderr)")
            let json = try #require(
                try JSONSerialization.jsonObject(with: Data(try await phone.sync("status", ["--json"]).stdout.utf8)) as? [String: Any]
            )
            #expect(json["state"] as? String == "paused")
            #expect(json["state_since"] is String && json["last_success"] is String, "\(json)")

            phoneDefaults.set("bell.aiff", forKey: "sound")  // kept while paused
            let fresh = try await ServerTool.createToken(storage: server.storage)
            let tokenFile = phone.directory.appendingPathComponent("token").path
            try Data((fresh + "\n").utf8).write(to: URL(fileURLWithPath: tokenFile + ".new"))
            #expect(chmod(tokenFile + ".new", 0o600) == 0 && rename(tokenFile + ".new", tokenFile) == 0)
            #expect(await eventually(within: .seconds(20)) { (try? phoneDefaults.pendingCount()) == 0 }, "run resumed: \(run.stderr)")
            #expect(await eventually { SyncHealth.stored(in: phoneDefaults)?.condition == .ok })
            let resumed = try await phone.sync("status", ["--json"])
            #expect(resumed.status == 0, "\(resumed)")
            #expect((try JSONSerialization.jsonObject(with: Data(resumed.stdout.utf8)) as? [String: Any])?["state"] as? String == "ok")
            #expect(try await server.snapshot(suite).entries["sound"]?.value == .string("bell.aiff"))
            #expect(await run.terminate().status == 0)
        }
    }

    @Test(
        "a token replaced in its file before run sees it refused: the paused run tries the file's token and resumes by itself; unconfigured while paused, it says so once"
    )
    func tokenReplacedBeforeRefusal() async throws {
        try await SyncServer.with { server in
            let suite = "group.replaced.early"
            let phone = ToolDevice(suite)
            defer { phone.remove() }
            let phoneTokenID = try await Self.configureWithTokenOfItsOwn(phone, server)
            let phoneDefaults = try phone.open()
            phoneDefaults.set("ring.caf", forKey: "sound")
            let run = try phone.start("run", ["--log-level", "info"])
            defer { run.signal(SIGKILL) }
            #expect(await eventually { (try? phoneDefaults.pendingCount()) == 0 }, "\(run.stderr)")
            #expect(await eventually { (try? await server.metricsText())?.contains("groupdefaults_event_streams_open 1") == true })

            // The new token is in the file, then the old one is revoked; a push by another device
            // wakes the stream, opened with the old one, which ends `unauthorized`.
            let before = Set(try await ServerTool.tokenIDs(storage: server.storage))
            let fresh = try await ServerTool.createToken(storage: server.storage)
            let freshID = try #require(Set(try await ServerTool.tokenIDs(storage: server.storage)).subtracting(before).first)
            _ = try phone.tokenFile(fresh)
            #expect(try await server.tokenCommand(["revoke", phoneTokenID]).status == 0)
            let tablet = try Device(suite, server: server)
            defer { tablet.remove() }
            let themed = try tablet.set("theme", .string("dark"))
            try await tablet.engine.syncOnce()
            #expect(await eventually { run.stderr.contains("authentication needed") }, "\(run.stderr)")
            #expect(
                await eventually(within: .seconds(20)) { sameEntry(try? phoneDefaults.syncEntry(forKey: "theme"), themed) },
                "resumed without a local write or a one-shot sync: \(run.stderr)"
            )
            #expect(run.stderr.contains("the token file's token works: sync resumes"), "\(run.stderr)")
            #expect(await eventually { SyncHealth.stored(in: phoneDefaults)?.condition == .ok })

            // Paused again (the new token revoked), then unconfigured: one line, and no false one.
            #expect(try await server.tokenCommand(["revoke", freshID]).status == 0)
            _ = try tablet.set("theme", .string("light"))
            try await tablet.engine.syncOnce()
            #expect(await eventually { SyncHealth.stored(in: phoneDefaults)?.condition == .paused }, "\(run.stderr)")
            #expect(try await phone.sync("unconfigure").status == 0)
            #expect(await eventually { run.stderr.contains("the suite no longer syncs (unconfigured)") }, "\(run.stderr)")
            #expect(run.stderr.components(separatedBy: "no longer syncs").count == 2, "\(run.stderr)")
            #expect(!run.stderr.contains("configured again") && !run.stderr.contains("sync starts over"), "\(run.stderr)")
            #expect(await run.terminate().status == 0)
        }
    }

    @Test("run of a suite that is not configured, or does not exist, exits at once with one line and a status the user unit does not restart")
    func notConfigured() async throws {
        let device = ToolDevice("group.run.unconfigured")
        defer { device.remove() }
        let missing = try await device.sync("run")
        #expect(missing.status == 1 && missing.stderr == "groupdefaults-sync: the suite group.run.unconfigured does not exist\n", "\(missing)")
        try device.open().set("ring.caf", forKey: "sound")
        let unconfigured = try await device.sync("run")
        #expect(unconfigured.status == 1, "\(unconfigured)")
        #expect(
            unconfigured.stderr.split(separator: "\n").count == 1 && unconfigured.stderr.contains("is not configured for sync"),
            "\(unconfigured.stderr)"
        )
        // Nor does `unconfigure` claim to have stopped a sync that never was.
        let notSynced = try await device.sync("unconfigure")
        #expect(
            notSynced.status == 1
                && notSynced.stderr == "groupdefaults-sync: group.run.unconfigured does not sync: there is nothing to unconfigure\n",
            "\(notSynced)"
        )

        // The user unit (Tools/package-files) does not restart that status, and restarts crashes.
        let unit = try String(
            contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("Tools/package-files/groupdefaults-sync@.service"),
            encoding: .utf8
        )
        let prevented =
            unit.split(separator: "\n").first { $0.hasPrefix("RestartPreventExitStatus=") }
            .map { $0.dropFirst("RestartPreventExitStatus=".count).split(separator: " ").compactMap { Int32($0) } } ?? []
        #expect(prevented.contains(unconfigured.status), "\(prevented)")
        #expect(unit.contains("Restart=on-failure"))
    }
}
