import Foundation
import GroupDefaults
import TestSupport
import Testing

/// Claims about several processes, checked with several real processes.
@Suite("Several processes", .timeLimit(.minutes(2)))
struct MultiProcessTests {
    @Test("a write by one process is read at once by another, and by an open handle, without restarting")
    func writeIsVisibleToOtherProcesses() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "group.chat", directory: dir)
            defaults.set("default.caf", forKey: "sound")

            let set = try await HelperProcess.run("set", directory: dir, suite: "group.chat", ["sound", "ring.caf"])
            #expect(set.status == 0, "\(set.stderr)")
            // This process's handle, opened before the other process wrote, sees the new value.
            #expect(defaults.string(forKey: "sound") == "ring.caf")

            defaults.set("bell.aiff", forKey: "sound")
            let get = try await HelperProcess.run("get", directory: dir, suite: "group.chat", ["sound"])
            #expect(get.status == 0, "\(get.stderr)")
            #expect(get.stdout == "bell.aiff")
        }
    }

    @Test("4 processes × 2,000 atomic increments end at exactly 8,000")
    func concurrentIncrementsLoseNothing() async throws {
        try await withTemporaryDirectory { dir in
            let workers = try (0..<4).map { _ in
                try HelperProcess("increment", directory: dir, suite: "counter", ["n", "2000", "--wait-for-go"])
            }
            for worker in workers { worker.go() }
            for worker in workers {
                let result = await worker.finish()
                #expect(result.status == 0, "\(result.stderr)")
            }
            let defaults = try SharedDefaults(suiteName: "counter", directory: dir)
            #expect(defaults.integer(forKey: "n") == 8000)
        }
    }

    @Test("processes creating the same new suite at the same moment lose nothing")
    func concurrentCreationLosesNothing() async throws {
        for round in 0..<5 {
            try await withTemporaryDirectory { root in
                // The suite's directory does not exist yet either: every process creates it.
                let dir = root.appendingPathComponent("nested/suites")
                let workers = try (0..<6).map { i in
                    try HelperProcess("write-keys", directory: dir, suite: "fresh", ["p\(i)", "200", "--wait-for-go"])
                }
                for worker in workers { worker.go() }
                for worker in workers {
                    let result = await worker.finish()
                    #expect(result.status == 0, "round \(round): \(result.stderr)")
                }
                let defaults = try SharedDefaults(suiteName: "fresh", directory: dir)
                let keys = try await defaults.read { try $0.keys }
                #expect(keys.count == 6 * 200, "round \(round)")
                for i in 0..<6 {
                    #expect(defaults.integer(forKey: "p\(i)-199") == 199, "round \(round), writer \(i)")
                }
            }
        }
    }

    @Test("a writer killed with SIGKILL mid-stream leaves a store that opens, reads consistently and accepts writes")
    func killedWriterLeavesConsistentStore() async throws {
        try await withTemporaryDirectory { dir in
            var lastSeen = 0
            for round in 0..<5 {
                let writer = try HelperProcess("stream", directory: dir, suite: "crash")
                #expect(await writer.waitForLine("streaming"), "round \(round): the writer never got going")
                writer.send(SIGKILL)
                let killed = await writer.finish()
                #expect(killed.reason == .uncaughtSignal && killed.status == SIGKILL)

                let check = try await HelperProcess.run("check-consistent", directory: dir, suite: "crash")
                #expect(check.status == 0, "round \(round): \(check.stderr)")
                let seen = Int(check.stdout) ?? -1
                #expect(seen >= lastSeen + 100, "round \(round): commits before the kill were lost")
                lastSeen = seen
            }
            // And this process, which never crashed, reads the same consistent state.
            let defaults = try SharedDefaults(suiteName: "crash", directory: dir)
            #expect(defaults.integer(forKey: "a") == defaults.integer(forKey: "c"))
            #expect(defaults.integer(forKey: "after-crash") == lastSeen + 1)
        }
    }
}
