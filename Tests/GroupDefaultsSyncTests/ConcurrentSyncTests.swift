import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// Two syncs of one suite on one device at once (two `sync`s, or a `sync` beside a `run`): each
/// local change is pushed once, by one of them, and what they report is what the server applied.
@Suite("Syncs of one suite at once", .timeLimit(.minutes(2)))
struct ConcurrentSyncTests {
    /// The ops the server applied, and those it found superseded (a change it held already: pushed twice).
    static func pushOps(_ server: SyncServer) async throws -> (applied: Int, superseded: Int) {
        let text = try await server.metricsText()
        return (
            Int(Metrics.value(text, "groupdefaults_push_ops_total", labels: ["status": "applied"])),
            Int(Metrics.value(text, "groupdefaults_push_ops_total", labels: ["status": "superseded"]))
        )
    }

    /// The `N` of `pushed N` in a `sync` report.
    static func pushed(_ stdout: String) -> Int? {
        guard let range = stdout.range(of: "pushed ") else { return nil }
        return Int(stdout[range.upperBound...].prefix { $0.isNumber })
    }

    @Test("two syncs of 8,000 changes started together: their reports add up to 8,000, and the server applied each change once")
    func twoSyncs() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.twice")
            defer { device.remove() }
            try await device.configure(server)
            #expect(try await device.sync("sync").status == 0)
            let defaults = try device.open()
            try await defaults.write { tx in
                for n in 0..<8000 { try tx.set(.integer(n), forKey: "key\(n)") }
            }

            async let first = device.sync("sync")
            async let second = device.sync("sync")
            let results = try await [first, second]
            for result in results { #expect(result.status == 0, "\(result.stderr)") }
            let reported = results.compactMap { Self.pushed($0.stdout) }
            #expect(reported.count == 2 && reported.reduce(0, +) == 8000, "\(results.map(\.stdout))")
            let ops = try await Self.pushOps(server)
            #expect(ops.applied == 8000 && ops.superseded == 0, "each change pushed once: \(ops)")
            #expect(try await server.snapshot("group.twice").head == 8000)
            #expect(try defaults.pendingCount() == 0)
        }
    }

    @Test("a sync beside a run of the same suite: every change pushed once, by one of them")
    func syncBesideRun() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.twice")
            defer { device.remove() }
            try await device.configure(server)
            let run = try device.start("run", ["--log-level", "warning"])
            defer { run.signal(SIGKILL) }
            #expect(try await eventually { Metrics.value(try await server.metricsText(), "groupdefaults_event_streams_open") == 1 })
            let defaults = try device.open()
            try await defaults.write { tx in
                for n in 0..<4000 { try tx.set(.integer(n), forKey: "key\(n)") }
            }
            let sync = try await device.sync("sync")
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(await eventually { (try? defaults.pendingCount()) == 0 })
            let ops = try await Self.pushOps(server)
            #expect(ops.applied == 4000 && ops.superseded == 0, "each change pushed once: \(ops), sync: \(sync.stdout)")
            #expect(try await server.snapshot("group.twice").head == 4000)
            #expect(await run.terminate().status == 0, "\(run.stderr)")
        }
    }
}
