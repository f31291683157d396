import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import ServerTestSupport
import Testing

/// `kill -9` of the real `groupdefaults-sync` in the middle of a push or a pull, and of the server
/// while `run` is running: after a restart everything converges, nothing is lost and nothing is
/// applied twice.
@Suite("Crashes", .timeLimit(.minutes(3)))
struct CrashTests {
    static let kills = 20
    static let keysPerRound = 150

    /// Server options that make a push many batches (so that a kill lands between two of them) and
    /// leave room for the test's megabytes.
    static let serverArguments = ["--max-ops-per-batch", "40", "--max-bytes-per-suite", String(256 << 20)]

    /// Round `round`'s keys: fresh ones, every tenth value 30 KB, so that pushes and pulls take a while.
    static func roundValues(_ round: Int) -> [(key: String, value: PropertyListValue)] {
        (0 ..< keysPerRound).map { index in
            let key = "round\(round).key\(index)"
            let text = index % 10 == 0 ? String(repeating: "\(round % 10)", count: 30_000) : "value \(round).\(index)"
            return (key, .string(text))
        }
    }

    /// When kills land: the ceiling of the random delay adapts, so that most kills hit a running
    /// process whatever this machine's speed.
    struct KillTiming {
        var ceiling = 300.0
        var early = 0, midway = 0, late = 0

        mutating func delay() -> Duration { .milliseconds(Int.random(in: 0 ... Int(ceiling))) }

        /// The process exited by itself before the kill: kill sooner.
        mutating func tooLate() {
            late += 1
            ceiling = max(30, ceiling * 0.7)
        }

        /// The process was killed before it did anything visible: kill later.
        mutating func tooEarly() {
            early += 1
            ceiling = min(5_000, ceiling * 1.3)
        }

        var description: String { "\(early) before any effect, \(midway) mid-way, \(late) after the end" }
    }

    @Test("SIGKILL of `groupdefaults-sync push` mid-way, 20 times, then a sync: every change on the server once, with its own stamp")
    func killDuringPush() async throws {
        try await SyncServer.with(.lmdb, Self.serverArguments) { server in
            let device = ToolDevice("group.kill.push")
            defer { device.remove() }
            try await device.configure(server)
            let defaults = try device.open()
            let client = server.client(device.suite)
            var written: [String: SyncEntry] = [:]
            var timing = KillTiming()

            for round in 0 ..< Self.kills {
                for (key, value) in Self.roundValues(round) {
                    written[key] = try writeEntry(defaults, key, value)
                }
                let headBefore = try await client.snapshot(after: nil, limit: 1).headRev
                let push = try device.start("push")
                try await Task.sleep(for: timing.delay())
                push.signal(SIGKILL)
                let exit = await push.waitForExit()
                let head = try await client.snapshot(after: nil, limit: 1).headRev
                if !exit.bySignal {
                    #expect(exit.status == 0, "push: \(push.stderr)")
                    timing.tooLate()
                } else if head == headBefore {
                    timing.tooEarly()
                } else {
                    timing.midway += 1
                }
            }
            #expect(timing.midway >= 1, "no kill landed in the middle of a push: \(timing.description)")

            let sync = try await device.sync("sync")
            #expect(sync.status == 0, "sync after the kills: \(sync.stderr)")
            let state = try defaults.syncState()
            #expect(state.pendingCount == 0 && state.inFlight == nil)

            // Every change applied exactly once: one revision each, 1…n, with the device's stamps.
            let feed = try await server.changes(device.suite)
            #expect(feed.lastRev == UInt64(written.count), "the head counts each change once (\(timing.description))")
            #expect(feed.entries.count == written.count)
            #expect(feed.entries.compactMap(\.rev) == Array(1 ... UInt64(written.count)))
            let onServer = Dictionary(feed.entries.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
            #expect(differences(onServer, written).isEmpty)
            // No op was sent again under a new batch id (it would have been superseded by itself).
            let metrics = try await server.metricsText()
            #expect(Metrics.value(metrics, "groupdefaults_push_ops_total", labels: ["status": "superseded"]) == 0)
        }
    }

    @Test("SIGKILL of `groupdefaults-sync pull` mid-way, 20 times, then a pull: the device holds exactly the server's entries, nothing pending, nothing pushed back")
    func killDuringPull() async throws {
        try await SyncServer.with(.lmdb, Self.serverArguments) { server in
            let suite = "group.kill.pull"
            let writer = try Device(suite, server: server)
            defer { writer.remove() }
            let device = ToolDevice(suite)
            defer { device.remove() }
            try await device.configure(server)
            let defaults = try device.open()
            var timing = KillTiming()

            for round in 0 ..< Self.kills {
                for (key, value) in Self.roundValues(round) { try writer.write(key, value) }
                #expect(try await writer.engine.push().pendingCount == 0)
                let before = try defaults.syncState().cursor
                let pull = try device.start("pull")
                try await Task.sleep(for: timing.delay())
                pull.signal(SIGKILL)
                let exit = await pull.waitForExit()
                if !exit.bySignal {
                    #expect(exit.status == 0, "pull: \(pull.stderr)")
                    timing.tooLate()
                } else if try defaults.syncState().cursor == before {
                    timing.tooEarly()
                } else {
                    timing.midway += 1
                }
            }

            let pull = try await device.sync("pull")
            #expect(pull.status == 0, "pull after the kills: \(pull.stderr) (\(timing.description))")
            let onServer = try await server.snapshot(suite)
            #expect(onServer.entries.count == Self.kills * Self.keysPerRound)
            let local = try defaults.syncState()
            #expect(local.cursor == onServer.head)
            #expect(local.pendingCount == 0, "pulled entries are never pending")
            #expect(differences(try storedEntries(defaults), onServer.entries).isEmpty)

            // Nothing goes back: a sync pushes nothing and the server's head stays.
            let sync = try await device.sync("sync")
            #expect(sync.status == 0 && sync.stdout.contains("pushed 0"), "\(sync)")
            #expect(try await server.snapshot(suite).head == onServer.head)
            let metrics = try await server.metricsText()
            #expect(Metrics.value(metrics, "groupdefaults_push_ops_total", labels: ["status": "superseded"]) == 0)
        }
    }

    @Test("SIGKILL and restart of the server during `run`: both devices resume by themselves")
    func serverRestartDuringRun() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.server.restart"
            let phone = ToolDevice(suite), tablet = ToolDevice(suite)
            defer {
                phone.remove()
                tablet.remove()
            }
            try await phone.configure(server)
            try await tablet.configure(server)
            let phoneRun = try phone.start("run", ["--log-level", "error"])
            let tabletRun = try tablet.start("run", ["--log-level", "error"])
            defer {
                phoneRun.signal(SIGKILL)
                tabletRun.signal(SIGKILL)
            }
            let phoneDefaults = try phone.open(), tabletDefaults = try tablet.open()

            phoneDefaults.set("ring.caf", forKey: "sound")
            #expect(await eventually { tabletDefaults.string(forKey: "sound") == "ring.caf" })

            try await server.killAndRestart {
                // Written while the server is down: pushed once it is back.
                phoneDefaults.set("bell.aiff", forKey: "sound")
            }
            #expect(await eventually(within: .seconds(30)) { tabletDefaults.string(forKey: "sound") == "bell.aiff" },
                    "a change made while the server was down")
            phoneDefaults.set(0.5, forKey: "volume")
            #expect(await eventually(within: .seconds(30)) { tabletDefaults.double(forKey: "volume") == 0.5 },
                    "a change made after the restart")
            tabletDefaults.set("dark", forKey: "theme")
            #expect(await eventually(within: .seconds(30)) { phoneDefaults.string(forKey: "theme") == "dark" },
                    "and the other way")
            #expect(phoneRun.isRunning && tabletRun.isRunning)
            #expect(await phoneRun.terminate().status == 0, "run stops cleanly on SIGTERM: \(phoneRun.stderr)")
            #expect(await tabletRun.terminate().status == 0, "\(tabletRun.stderr)")
        }
    }
}
