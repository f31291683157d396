import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
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
        (0..<keysPerRound).map { index in
            let key = "round\(round).key\(index)"
            let text = index % 10 == 0 ? String(repeating: "\(round % 10)", count: 30_000) : "value \(round).\(index)"
            return (key, .string(text))
        }
    }

    /// When kills land: the ceiling of the random delay adapts, so that most kills hit a running
    /// process whatever this machine's speed.
    struct KillTiming: CustomStringConvertible {
        var ceiling = 300.0
        var early = 0, midway = 0, late = 0

        mutating func delay() -> Duration { .milliseconds(Int.random(in: 0...Int(ceiling))) }

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

        /// Kills `process` after a random delay; whether it was still running then (if not, it
        /// must have succeeded, and the next delay is shorter).
        mutating func kill(_ process: ChildProcess, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Bool {
            try await Task.sleep(for: delay())
            process.signal(SIGKILL)
            let exit = await process.waitForExit()
            guard exit.bySignal else {
                #expect(exit.status == 0, "\(process.stderr)", sourceLocation: sourceLocation)
                tooLate()
                return false
            }
            return true
        }
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

            for round in 0..<Self.kills {
                for (key, value) in Self.roundValues(round) {
                    written[key] = try writeEntry(defaults, key, value)
                }
                let headBefore = try await client.snapshot(after: nil, limit: 1).headRev
                guard try await timing.kill(try device.start("push")) else { continue }
                if try await client.snapshot(after: nil, limit: 1).headRev == headBefore {
                    timing.tooEarly()
                } else {
                    timing.midway += 1
                }
            }
            #expect(timing.midway >= 1, "no kill landed in the middle of a push: \(timing.description)")

            let sync = try await device.sync("sync")
            #expect(sync.status == 0, "sync after the kills: \(sync.stderr)")
            let state = try defaults.syncState()
            #expect(try defaults.pendingCount() == 0 && state.inFlight == nil)

            // Every change applied exactly once: one revision each, 1…n, with the device's stamps.
            let feed = try await server.changes(device.suite)
            #expect(feed.lastRev == UInt64(written.count), "the head counts each change once (\(timing.description))")
            #expect(feed.entries.count == written.count)
            #expect(feed.entries.compactMap(\.rev) == Array(1...UInt64(written.count)))
            let onServer = Dictionary(feed.entries.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
            #expect(differences(onServer, written).isEmpty)
            // No op was sent again under a new batch id (it would have been superseded by itself).
            let metrics = try await server.metricsText()
            #expect(Metrics.value(metrics, "groupdefaults_push_ops_total", labels: ["status": "superseded"]) == 0)
        }
    }

    @Test(
        "SIGKILL of `groupdefaults-sync pull` mid-way, 20 times, then a pull: the device holds exactly the server's entries, each applied once, nothing pending, nothing pushed back"
    )
    func killDuringPull() async throws {
        // Each round's changes take two pages of the feed (1,000 entries a page), so that a kill
        // between the two leaves the first applied with its cursor and the second to come.
        let keysPerRound = 1_900
        try await SyncServer.with(.lmdb, ["--max-keys-per-suite", "100000", "--max-bytes-per-suite", String(256 << 20)]) { server in
            let suite = "group.kill.pull"
            let writer = try Device(suite, server: server)
            defer { writer.remove() }
            let device = ToolDevice(suite)
            defer { device.remove() }
            try await device.configure(server)
            let defaults = try device.open()
            // Joined first (a join reads the whole snapshot, then applies it at once).
            try writer.set("sound", .string("ring.caf"))
            try await writer.engine.push()
            #expect(try await device.sync("pull").status == 0)
            var timing = KillTiming()

            for round in 0..<Self.kills {
                for index in 0..<keysPerRound {
                    let text = index % 50 == 0 ? String(repeating: "\(round % 10)", count: 20_000) : "value \(round).\(index)"
                    try writer.set("round\(round).key\(index)", .string(text))
                }
                #expect(try await writer.engine.push().pendingCount == 0)
                let head = try await server.client(suite).snapshot(after: nil, limit: 1).headRev
                let before = try defaults.syncState().cursor
                guard try await timing.kill(try device.start("pull")) else { continue }
                let cursor = try defaults.syncState().cursor
                if cursor == before {
                    timing.tooEarly()
                } else if cursor == head {
                    timing.tooLate()
                } else {
                    timing.midway += 1
                }
            }
            #expect(timing.midway >= 1, "no kill landed in the middle of a pull: \(timing.description)")

            let pull = try await device.sync("pull")
            #expect(pull.status == 0, "pull after the kills: \(pull.stderr) (\(timing.description))")
            let onServer = try await server.snapshot(suite)
            #expect(onServer.entries.count == 1 + Self.kills * keysPerRound)
            let local = try defaults.syncState()
            #expect(local.cursor == onServer.head)
            #expect(try defaults.pendingCount() == 0, "pulled entries are never pending")
            #expect(differences(try storedEntries(defaults), onServer.entries).isEmpty)

            // Each entry applied once: no key twice in the device's change log (its latest 9,000
            // changes: the log retains 10,000), and every change there a remote one.
            let last = try defaults.info().lastSequence
            let feed = try defaults.changeFeed(since: last - 9_000)
            var applied: [String: Int] = [:]
            while let change = try feed.nextAvailable() {
                #expect(change.isRemote && change.kind == .set, "\(change)")
                applied[change.key, default: 0] += 1
            }
            #expect(applied.values.reduce(0, +) == 9_000)
            #expect(applied.values.allSatisfy { $0 == 1 }, "applied more than once: \(applied.filter { $0.value > 1 }.keys.sorted().prefix(10))")

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
            try await withRunningPair(server, "group.server.restart", logLevel: "error") { phone, tablet, phoneRun, tabletRun in
                let phoneDefaults = try phone.open()
                let tabletDefaults = try tablet.open()

                phoneDefaults.set("ring.caf", forKey: "sound")
                #expect(await eventually { tabletDefaults.string(forKey: "sound") == "ring.caf" })

                try await server.killAndRestart {
                    // Written while the server is down: pushed once it is back.
                    phoneDefaults.set("bell.aiff", forKey: "sound")
                }
                #expect(
                    await eventually(within: .seconds(30)) { tabletDefaults.string(forKey: "sound") == "bell.aiff" },
                    "a change made while the server was down"
                )
                phoneDefaults.set(0.5, forKey: "volume")
                #expect(
                    await eventually(within: .seconds(30)) { tabletDefaults.double(forKey: "volume") == 0.5 },
                    "a change made after the restart"
                )
                tabletDefaults.set("dark", forKey: "theme")
                #expect(
                    await eventually(within: .seconds(30)) { phoneDefaults.string(forKey: "theme") == "dark" },
                    "and the other way"
                )
                #expect(phoneRun.isRunning && tabletRun.isRunning)
            }
        }
    }
}
