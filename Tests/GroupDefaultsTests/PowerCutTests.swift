import Foundation
import Glibc
import GroupDefaults
import TestSupport
import Testing

/// Durability points with real processes and a reboot as a process sees one (a new boot id: see
/// `Reboot`): what a power cut or an operating-system crash leaves of a suite. The power cut itself,
/// a file system that drops what was not flushed, is `Tools/powercut-sim` (which `Tools/test` runs).
@Suite("Power cuts", .timeLimit(.minutes(2)))
struct PowerCutTests {
    static let suite = "group.powercut"

    /// Starts a helper that writes `prefix.1`, `prefix.2`… forever, waits until it acknowledged
    /// `count` writes, and kills it (`kill -9`: no exit, no close).
    static func writeAndKill(_ directory: URL, prefix: String, count: Int, _ options: [String]) async throws {
        let writer = try HelperProcess("write-loop", directory: directory, suite: suite, [prefix] + options)
        #expect(await writer.waitForLine(timeout: 30) { $0.hasPrefix("\(prefix).\(count) ") } != nil)
        writer.send(SIGKILL)
        _ = await writer.finish()
    }

    /// Runs the helper's `read-all` after `reboot`: what it printed, stdout and stderr together.
    static func openAfter(_ reboot: Reboot, _ directory: URL) async throws -> String {
        let result = try await HelperProcess("read-all", directory: directory, suite: suite, launcher: reboot.launcher).finish()
        #expect(result.status == 0, "\(result.stderr)")
        return result.stdout + result.stderr
    }

    @Test("after a reboot a suite opens at its last durability point and says so once; kill -9 puts nothing back")
    func reboot() async throws {
        try await withTemporaryDirectory { dir in
            // A write whose process ended: at a durability point. Then writes of a process killed
            // before its next point (an interval of an hour).
            #expect(try await HelperProcess.run("set", directory: dir, suite: Self.suite, ["sound", "chime"]).status == 0)
            try await Self.writeAndKill(dir, prefix: "late", count: 3, ["--durability-interval-ms", "3600000"])

            // `kill -9` is not a power cut: the page cache holds every write, and nothing is put back.
            try {
                let defaults = try SharedDefaults(suiteName: Self.suite, directory: dir)
                #expect(defaults.integer(forKey: "late.3") == 3)
                #expect(try defaults.info().lastRestore == nil)
            }()

            // The power went: after the reboot the suite is as it was at its last point, and says so.
            let first = try await Self.openAfter(Reboot(in: dir), dir)
            #expect(first.contains("put back to its last durability point"), "\(first)")
            try {
                let defaults = try SharedDefaults(suiteName: Self.suite, directory: dir)
                #expect(defaults.string(forKey: "sound") == "chime")
                #expect(defaults.object(forKey: "late.1") == nil)
                let restore = try #require(try defaults.info().lastRestore)
                #expect(restore.pointTime <= restore.restoredAt)
                let feed = try defaults.changeFeed(since: 0)
                var kinds: [SharedDefaults.Change.Kind] = []
                while let change = try feed.nextAvailable() { kinds.append(change.kind) }
                #expect(kinds.filter { $0 == .restored }.count == 1, "\(kinds)")
                #expect(kinds.last == .restored)
                defaults.set("bell", forKey: "sound")  // the suite goes on
            }()

            // Once: the next boot finds the suite at its point (the write above made one at close).
            let second = try await Self.openAfter(Reboot(in: dir), dir)
            #expect(!second.contains("put back"), "\(second)")
            let defaults = try SharedDefaults(suiteName: Self.suite, directory: dir)
            #expect(defaults.string(forKey: "sound") == "bell")
        }
    }

    @Test("a commit of a .fsyncEveryCommit handle is a durability point before it returns")
    func fsyncEveryCommitIsAPoint() async throws {
        try await withTemporaryDirectory { dir in
            try await Self.writeAndKill(dir, prefix: "synced", count: 3, ["--fsync", "--durability-interval-ms", "3600000"])
            // (A write the kill interrupted, after its commit and before its point, may be put back.)
            _ = try await Self.openAfter(Reboot(in: dir), dir)
            let defaults = try SharedDefaults(suiteName: Self.suite, directory: dir)
            for i in 1...3 { #expect(defaults.integer(forKey: "synced.\(i)") == i) }
        }
    }

    @Test("a durable copy left by a removed suite is never put back over a new suite of that name")
    func staleCopy() async throws {
        try await withTemporaryDirectory { dir in
            #expect(try await HelperProcess.run("set", directory: dir, suite: Self.suite, ["sound", "chime"]).status == 0)
            for suffix in [".lmdb", ".lmdb-lock", ".lmdb-notify"] {  // removed by hand, its copy left behind
                try FileManager.default.removeItem(at: dir.appendingPathComponent(Self.suite + suffix))
            }
            #expect(try await HelperProcess.run("set", directory: dir, suite: Self.suite, ["volume", "7"]).status == 0)
            let opened = try await Self.openAfter(Reboot(in: dir), dir)
            #expect(!opened.contains("put back"), "\(opened)")
            let defaults = try SharedDefaults(suiteName: Self.suite, directory: dir)
            #expect(defaults.string(forKey: "volume") == "7")
            #expect(defaults.object(forKey: "sound") == nil)
        }
    }

    @Test("synchronize() makes a durability point: a copy with the suite's mode, no temporary file left")
    func copyFiles() throws {
        try withTemporaryDirectory { dir in
            var configuration = SharedDefaults.Configuration()
            configuration.fileSharing = .group
            try {
                let defaults = try SharedDefaults(suiteName: Self.suite, directory: dir, configuration: configuration)
                defaults.set(1, forKey: "k")
                #expect(defaults.synchronize())
            }()
            var st = stat()
            #expect(stat(dir.appendingPathComponent(Self.suite + ".lmdb-safe").path, &st) == 0)
            #expect(st.st_mode & 0o777 == 0o660)
            #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent(Self.suite + ".lmdb-safe~").path))
        }
    }
}
