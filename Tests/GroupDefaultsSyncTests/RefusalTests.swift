import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// One bad value or clock never stops a device or a suite: what cannot be pushed or applied is
/// refused on its own, kept in the conflict journal with why, reported, and everything else goes on.
@Suite("Refuse one thing, never everything", .timeLimit(.minutes(3)))
struct RefusalTests {
    /// A value nested `depth` arrays deep around an integer.
    static func nested(_ depth: Int) -> PropertyListValue {
        var value = PropertyListValue.integer(1)
        for _ in 0..<depth { value = .array([value]) }
        return value
    }

    @Test(
        "a change this device cannot send is set aside, journaled once and reported; the changes before and after it are pushed",
        arguments: StorageBackend.allCases
    )
    func unsendableChange(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.refusals"
            let a = try Device(suite, server: server)
            let b = try Device(suite, server: server)
            defer {
                a.remove()
                b.remove()
            }
            try a.set("z_ok", .integer(1))
            // Typed JSON carries years 0 to 9999; the store takes any date.
            try a.set("far", .date(Date(timeIntervalSince1970: 1e12)))
            // Nested deeper than the limit, as an older version could store it (`set` refuses it now).
            let hlc = HLC(milliseconds: HLC.wallClockMilliseconds(), counter: 0)
            try a.defaults.applyRemote([SyncEntry(key: "deep", value: Self.nested(150), hlc: hlc, origin: 77)], cursor: nil)
            try a.defaults.markPending(["deep"])
            try a.set("b_later", .string("after"))

            let report = try await a.engine.syncOnce()
            #expect(report.rejected.compactMap(\.key) == ["deep", "far"])
            #expect(report.rejected.first?.code == .valueTooDeep)
            #expect(Set(try await server.snapshot(suite).entries.keys) == ["z_ok", "b_later"])
            #expect(SyncHealth.stored(in: a.defaults)?.summary.hasPrefix("not pushed: 2 local changes set aside") == true)

            // Another sync reports them again but journals nothing twice.
            let again = try await a.engine.syncOnce()
            #expect(again.rejected.compactMap(\.key) == ["deep", "far"])
            let refusals = try a.defaults.conflicts().filter(\.isRefused)
            #expect(refusals.map(\.key).sorted() == ["deep", "far"], "\(refusals)")
            #expect(refusals.allSatisfy { $0.refusal?.hasPrefix("not pushed: ") == true })

            // Written again with a value that can travel, it goes.
            try a.set("far", .date(Date(timeIntervalSince1970: 1_800_000_000)))
            let fixed = try await a.engine.syncOnce()
            #expect(fixed.rejected.compactMap(\.key) == ["deep"])
            try await b.engine.syncOnce()
            #expect(try b.defaults.syncEntry(forKey: "far")?.value == .date(Date(timeIntervalSince1970: 1_800_000_000)))
            #expect(try b.defaults.syncEntry(forKey: "b_later")?.value == .string("after"))
        }
    }

    @Test("a value at the nesting limit travels from one device to another; the store refuses one deeper")
    func nestingLimitRoundTrip() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.nesting"
            let a = try Device(suite, server: server)
            let b = try Device(suite, server: server)
            defer {
                a.remove()
                b.remove()
            }
            let deepest = Self.nested(PropertyListValue.maximumNestingDepth)
            try a.set("deep", deepest)
            #expect(throws: SharedDefaultsError.self) { try a.set("deeper", Self.nested(PropertyListValue.maximumNestingDepth + 1)) }
            let pushed = try await a.engine.syncOnce()
            #expect(pushed.isInAgreement)
            try await b.engine.syncOnce()
            #expect(try b.defaults.syncEntry(forKey: "deep")?.value == deepest)
        }
    }

    @Test("a device whose clock is behind applies nothing rather than refuse honest changes as ones from the future")
    func deviceClockBehind() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.clock.behind"
            var options = Device.quickOptions
            options.oneShotAttempts = 1
            let honest = try Device(suite, server: server)
            let slow = try Device(suite, server: server, clockOffset: .seconds(-3600), options: options)
            defer {
                honest.remove()
                slow.remove()
            }
            try honest.set("volume", .integer(7))
            try await honest.engine.syncOnce()
            do throws(SyncError) {
                try await slow.engine.syncOnce()
                Issue.record("a device an hour behind took or refused entries from an honest one")
            } catch {
                #expect(error.code == .clockSkew, "\(error)")
                #expect(error.detail.contains("behind the server's"), "\(error.detail)")
            }
            #expect(slow.defaults.object(forKey: "volume") == nil)
            #expect(try slow.defaults.conflicts().isEmpty, "nothing was refused for good")
            #expect(try slow.defaults.syncState().cursor == nil, "it joins again once its clock is right")
        }
    }

    @Test("a device whose clock went back an hour after it synced settles nothing the server beat until its clock is right, then converges")
    func deviceClockWentBack() async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.clock.back"
            try await withToolPair(suite) { phone, tablet in
                try await phone.configure(server)
                try await tablet.configure(server)
                #expect(try await phone.defaultsTool(["write", suite, "sound", "chime.caf"]).status == 0)
                #expect(try await phone.sync("sync").status == 0)

                // An hour behind: the write is stamped from that clock (docs/guide/failures.md), so
                // the server's older value beats it, and this device cannot take the winner yet.
                let hourBehind = ["/usr/bin/faketime", "-f", "-3600s"]
                #expect(try await phone.defaultsTool(["write", suite, "sound", "bell.caf"], launcher: hourBehind).status == 0)
                #expect(try await phone.defaultsTool(["write", suite, "volume", "-int", "3"], launcher: hourBehind).status == 0)
                let behind = try await phone.sync("sync", launcher: hourBehind)
                #expect(behind.status == 1)
                #expect(behind.stderr.contains("behind the server's"), "\(behind.stderr)")
                let status = try await phone.sync("status")
                #expect(status.stdout.contains("pending: 1 (sound"), "the beaten write stays pending, the other was settled: \(status.stdout)")
                #expect(!status.stdout.contains("in flight:"), "\(status.stdout)")
                #expect(try await server.snapshot(suite).entries["volume"]?.value == .integer(3), "the write no other beat was taken")

                // The clock is right again: the write meets its winner again, which is taken, and
                // the replaced value is kept in the conflict journal.
                let synced = try await phone.sync("sync")
                #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
                #expect(try await tablet.sync("sync").status == 0)
                let held = try phone.open().string(forKey: "sound")
                #expect(held == "chime.caf")
                #expect(try tablet.open().string(forKey: "sound") == held)
                #expect(try await server.snapshot(suite).entries["sound"]?.value == .string("chime.caf"))
                #expect(try await phone.sync("conflicts").stdout.contains("bell.caf"))
            }
        }
    }

    @Test(
        "a device whose clock ran 100 years ahead recovers when it is right again: what it wrote meanwhile is pushed, later writes win",
        arguments: StorageBackend.allCases
    )
    func deviceClockAhead(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.clock.device"
            try await withToolPair(suite) { phone, tablet in
                try await phone.configure(server)
                try await tablet.configure(server)
                #expect(try await phone.defaultsTool(["write", suite, "badge", "-int", "1"]).status == 0)
                #expect(try await phone.defaultsTool(["write", suite, "volume", "-int", "7"], launcher: ToolDevice.clockAhead).status == 0)

                // Under the wrong clock: the server refuses that change alone; the honest one goes.
                let refused = try await phone.sync("sync", launcher: ToolDevice.clockAhead)
                #expect(refused.status == 1)
                #expect(refused.stderr.contains("volume") && refused.stderr.contains("ahead of the server's clock"), "\(refused.stderr)")
                let status = try await phone.sync("status")
                #expect(status.stdout.contains("state: not pushed: 1 local change set aside"), "\(status.stdout)")
                #expect(try await server.snapshot(suite).entries.keys.sorted() == ["badge"])

                // The clock is right again: the change made meanwhile is stamped again and pushed.
                let synced = try await phone.sync("sync")
                #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
                #expect(try await tablet.sync("sync").status == 0)
                #expect(try tablet.open().integer(forKey: "volume") == 7)
                #expect(try await phone.sync("status").stdout.contains("state: ok"))

                // Its stamp is honest now: a later write elsewhere wins over it.
                #expect(try await tablet.defaultsTool(["write", suite, "volume", "-int", "9"]).status == 0)
                #expect(try await tablet.sync("sync").status == 0)
                #expect(try await phone.sync("sync").status == 0)
                #expect(try phone.open().integer(forKey: "volume") == 9)
                let stamp = try #require(try phone.open().syncEntry(forKey: "volume"))
                #expect(stamp.hlc.milliseconds < HLC.wallClockMilliseconds() + HLC.maximumDrift)
            }
        }
    }

    @Test(
        "a server that stored entries from a wrong clock: a new device joins past them, the operator repairs them, honest writes win",
        arguments: StorageBackend.allCases
    )
    func serverClockAhead(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.clock.server"
            try await withToolPair(suite) { phone, tablet in
                try await phone.configure(server)
                #expect(try await phone.defaultsTool(["write", suite, "volume", "-int", "7"]).status == 0)
                #expect(try await phone.defaultsTool(["write", suite, "sound", "chime.caf"]).status == 0)
                #expect(try await phone.sync("sync").status == 0)
                // As a server whose clock ran 100 years ahead would have stored them (or a backup of one).
                let future = HLC(milliseconds: HLC.wallClockMilliseconds() + 100 * 365 * 86_400_000, counter: 0)
                try await server.killAndRestart {
                    try await ServerStore.restamp(server, suite: suite, keys: ["volume", "sound"], hlc: future)
                }

                // A tablet with an honest clock joins: the far-future entries are refused one by one,
                // journaled and reported; the rest goes on.
                try await tablet.configure(server)
                #expect(try await tablet.defaultsTool(["write", suite, "theme", "dark"]).status == 0)
                let joined = try await tablet.sync("sync")
                #expect(joined.status == 1)
                #expect(joined.stderr.contains("ahead of this machine's clock"), "\(joined.stderr)")
                let refusals = try tablet.open().conflicts().filter(\.isRefused)
                #expect(Set(refusals.map(\.key)) == ["volume", "sound"])
                #expect(try await server.snapshot(suite).entries["theme"] != nil)
                #expect(try await tablet.sync("status").stdout.contains("refused: 2 kept in the conflict journal"))

                // The operator lists them and stamps them again with the server's clock: the tablet
                // then takes them, values unchanged.
                let listed = try await ServerTool.run(["suites", "repair-clock", "--account", "alice", "--suite", suite] + server.storage)
                #expect(listed.status == 0, "\(listed.stderr)")
                #expect(listed.stdout.contains("2 entries stamped in the future"), "\(listed.stdout)")
                let repaired = try await ServerTool.run(
                    ["suites", "repair-clock", "--account", "alice", "--suite", suite, "--restamp"] + server.storage
                )
                #expect(repaired.stdout.contains("2 entries stamped again"), "\(repaired.stdout) \(repaired.stderr)")
                #expect(try await tablet.sync("sync").status == 0)
                #expect(try tablet.open().string(forKey: "sound") == "chime.caf")
                let again = try await ServerTool.run(["suites", "repair-clock", "--account", "alice", "--suite", suite] + server.storage)
                #expect(again.stdout.contains("no entry is stamped in the future"), "\(again.stdout)")
                // A restamp with nothing to repair is no act: the audit log holds the one that was.
                let idle = try await ServerTool.run(["suites", "repair-clock", "--account", "alice", "--suite", suite, "--restamp"] + server.storage)
                #expect(idle.status == 0 && idle.stdout.contains("no entry is stamped in the future"), "\(idle.stdout)")
                let audit = try await ServerTool.run(["audit", "--account", "alice"] + server.storage)
                #expect(audit.stdout.components(separatedBy: "clock-repair").count == 2, "\(audit.stdout)")

                // An honest write of the key wins, and reaches the phone.
                #expect(try await tablet.defaultsTool(["write", suite, "volume", "-int", "3"]).status == 0)
                #expect(try await tablet.sync("sync").status == 0)
                #expect(try await server.snapshot(suite).entries["volume"]?.value == .integer(3))
                #expect(try await phone.sync("sync").status == 0)
                #expect(try phone.open().integer(forKey: "volume") == 3)
                #expect(try phone.open().string(forKey: "theme") == "dark")
            }
        }
    }

    /// Seeds of the poisoned-batches property (`GROUPDEFAULTS_POISON_SEEDS`, 4 by default).
    static let poisonSeeds = ProcessInfo.processInfo.environment["GROUPDEFAULTS_POISON_SEEDS"].flatMap(Int.init) ?? 4

    @Test(
        "random writes with unsendable ones interleaved: every key never poisoned converges to last writer wins on both devices and the server, and each poisoned write is journaled where it was made"
    )
    func poisonedBatches() async throws {
        try await SyncServer.with(.lmdb) { server in
            for seed in 1...UInt64(Self.poisonSeeds) {
                var random = SeededGenerator(seed: seed)
                let suite = "group.poison.\(seed)"
                let devices = [try Device(suite, server: server), try Device(suite, server: server)]
                defer { for device in devices { device.remove() } }
                let keys = (0..<6).map { "k\($0)" }
                var model = LastWriterWinsModel()
                var poisoned: [Int: Set<String>] = [:]
                // Per device, the keys whose latest local write is a poisoned one, and those such
                // writes a sync has tried to push.
                var current: [Int: Set<String>] = [:]
                var attempted: [Int: Set<String>] = [:]
                for step in 0..<40 {
                    let index = Int.random(in: 0..<2, using: &random)
                    let device = devices[index]
                    let key = keys.randomElement(using: &random)!
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0:
                        // Typed JSON cannot carry it: this device must set it aside.
                        try device.set(key, .date(Date(timeIntervalSince1970: 1e12 + Double(step))))
                        poisoned[index, default: []].insert(key)
                        current[index, default: []].insert(key)
                    case 1:
                        // Nested deeper than the limit, as an older version could have stored it.
                        let hlc = try device.defaults.clockReading().advanced(toWallClock: HLC.wallClockMilliseconds())
                        try device.defaults.applyRemote([SyncEntry(key: key, value: Self.nested(120), hlc: hlc, origin: 5)], cursor: nil)
                        try device.defaults.markPending([key])
                        poisoned[index, default: []].insert(key)
                        current[index, default: []].insert(key)
                    case 2, 3:
                        model.record(try device.write(key, nil))
                        current[index]?.remove(key)
                    case 4, 5, 6:
                        attempted[index, default: []].formUnion(current[index] ?? [])
                        try await device.engine.syncOnce()
                    default:
                        model.record(try device.set(key, .string("\(step) on \(index)")))
                        current[index]?.remove(key)
                    }
                }
                for _ in 0..<2 {
                    for (index, device) in devices.enumerated() {
                        attempted[index, default: []].formUnion(current[index] ?? [])
                        try await device.engine.syncOnce()
                    }
                }

                let tainted = poisoned.values.reduce(into: Set<String>()) { $0.formUnion($1) }
                let expected = model.live.filter { !tainted.contains($0.key) }
                func clean(_ entries: [String: SyncEntry]) -> [String: SyncEntry] { entries.filter { !tainted.contains($0.key) } }
                let onServer = try await server.snapshot(suite).entries
                #expect(differences(clean(onServer), expected).isEmpty, "seed \(seed), server: \(differences(clean(onServer), expected))")
                for (index, device) in devices.enumerated() {
                    let held = clean(try device.entries())
                    #expect(differences(held, expected).isEmpty, "seed \(seed), device \(index): \(differences(held, expected))")
                    let journaled = Set(try device.defaults.conflicts().filter { $0.refusal?.hasPrefix("not pushed") == true }.map(\.key))
                    // One a sync tried to push is set aside and journaled, unless a newer write from
                    // the other device replaced it first (then journaled as replaced): never silently gone.
                    let replaced = Set(try device.defaults.conflicts().filter { !$0.isRefused }.map(\.key))
                    let missing = (attempted[index] ?? []).subtracting(journaled).subtracting(replaced)
                    #expect(missing.isEmpty, "seed \(seed), device \(index): poisoned writes neither journaled nor replaced: \(missing)")
                }
            }
        }
    }
}
