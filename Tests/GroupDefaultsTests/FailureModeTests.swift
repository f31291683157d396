import Foundation
import Glibc
import Logging
import ServerLaunching
import Synchronization
import TestSupport
import Testing

@testable import GroupDefaults
@testable import GroupDefaultsLMDB

/// The failure modes a review found, each made to happen for real: a full file system, a failing
/// flush, conflicting settings, `fork()`, PID namespaces, watcher and reader slots running out,
/// maps of different sizes in different processes, inotify failing, tombstones.
@Suite("Failure modes", .timeLimit(.minutes(3)))
struct FailureModeTests {
    // MARK: A full disk

    @Test(
        "a process filling a 3 MiB tmpfs stops with diskFull, not SIGBUS; the suite then opens, verifies, reads every key written, and removes keys though the disk has no room to double the map"
    )
    func fullDisk() async throws {
        try await withTemporaryDirectory { dir in
            try await withTmpfs(at: dir.appendingPathComponent("disk"), size: "3m") { disk in
                // 20,000 commits of ~100 bytes need more than 3 MiB.
                let fill = try await HelperProcess.run("fill", directory: disk, suite: "full", ["k", "20000", "100"])
                try #require(fill.reason == .exit, "the writer died of signal \(fill.status) (SIGBUS is \(SIGBUS)): \(fill.stderr)")
                #expect(fill.status == 4, "the writer should stop with a store error: \(fill.stdout) \(fill.stderr)")
                let lines = fill.stdout.split(separator: "\n").map(String.init)
                #expect(lines.last == "error diskFull", "\(fill.stdout) \(fill.stderr)")
                let written = try #require(lines.first.flatMap { Int($0.dropFirst("written ".count)) })
                #expect(written > 1000 && written < 20_000)

                let defaults = try SharedDefaults(suiteName: "full", directory: disk)
                let report = try defaults.verify()
                #expect(report.isHealthy, "\(report)")
                #expect(report.checkedKeys == written)
                let wrong = (0..<written).filter { defaults.string(forKey: "k-\($0)") != filler("k-\($0)", size: 100) }
                #expect(wrong.isEmpty, "keys reported written but not readable: \(wrong.prefix(10))")

                // The map is full and the disk has no room to double it: removals must still go through.
                for i in 0..<200 {
                    try await defaults.write { try $0.removeValue(forKey: "k-\(i)") }
                }
                #expect(try await defaults.read { try $0.keys.count } == written - 200)
                #expect(defaults.string(forKey: "k-0") == nil)
                #expect(defaults.string(forKey: "k-200") == filler("k-200", size: 100))
                #expect(try defaults.verify().isHealthy)
                // A write that adds data still meets the full disk, and changes nothing.
                let error = #expect(throws: SharedDefaultsError.self) {
                    try defaults.write { tx in
                        for i in 0..<20_000 { try tx.set(.string(filler("more-\(i)", size: 100)), forKey: "more-\(i)") }
                    }
                }
                #expect(error?.code == .diskFull)
                #expect(try await defaults.read { try $0.keys.count } == written - 200)
            }
        }
    }

    @Test(
        "creating a suite on a full tmpfs fails with diskFull, and so does every retry (which finds the files the first attempt left), never SIGBUS"
    )
    func newSuiteOnFullDisk() async throws {
        try await withTemporaryDirectory { dir in
            try await withTmpfs(at: dir.appendingPathComponent("disk"), size: "1m") { disk in
                try fillUp(disk)
                for attempt in 1...3 {
                    let open = try await HelperProcess.run("open", directory: disk, suite: "new")
                    #expect(open.reason == .exit, "attempt \(attempt): the process died of signal \(open.status): \(open.stderr)")
                    #expect(open.status == 4 && open.stdout == "error diskFull", "attempt \(attempt): \(open.stdout) \(open.stderr)")
                }
                // With room again, the same files make a working suite.
                try FileManager.default.removeItem(at: disk.appendingPathComponent("filler"))
                var small = SharedDefaults.Configuration()
                small.initialMapSize = 64 << 10
                let defaults = try SharedDefaults(suiteName: "new", directory: disk, configuration: small)
                try await defaults.write { try $0.set(.string("ring.caf"), forKey: "sound") }
                #expect(try await HelperProcess.run("get", directory: disk, suite: "new", ["sound"]).stdout == "ring.caf")
            }
        }
    }

    // MARK: Flushes

    @Test(
        "with fsyncEveryCommit, a flush failing after the commit does not fail the write: other processes read it, a watcher in another process is woken, and lastError and onError say it was committed; a failing synchronize() returns false"
    )
    func flushFailureAfterCommit() async throws {
        try await withTemporaryDirectory { dir in
            let errors = ErrorLog()
            var configuration = SharedDefaults.Configuration()
            configuration.durability = .fsyncEveryCommit
            configuration.onError = errors.handler
            let disk = FailingDisk()
            configuration.diskFlush = disk
            let defaults = try SharedDefaults(suiteName: "flush", directory: dir, configuration: configuration)
            let environment = defaults.store.environment
            let watcher = try HelperProcess("watch", directory: dir, suite: "flush")
            defer { watcher.stop() }
            try #require(await watcher.waitForLine("ready"))

            // The throwing API.
            disk.failNext.store(EIO, ordering: .relaxed)
            let flushes = environment.flushCount.load(ordering: .relaxed)
            try await defaults.write { try $0.set(.string("ring.caf"), forKey: "sound") }
            #expect(environment.flushCount.load(ordering: .relaxed) == flushes + 1, "the flush was not even tried")
            #expect(disk.failNext.load(ordering: .relaxed) == 0)
            let first = try #require(defaults.lastError, "the failed flush was not reported")
            #expect(first.code == .storageFailure)
            #expect(first.reason.contains("committed"), "\(first.reason)")
            #expect(errors.all.count == 1)
            #expect(try await HelperProcess.run("get", directory: dir, suite: "flush", ["sound"]).stdout == "ring.caf")
            #expect(await watcher.waitForLine("change sound ring.caf", timeout: 10))

            // The UserDefaults-style setter.
            disk.failNext.store(EIO, ordering: .relaxed)
            defaults.set("bell.aiff", forKey: "sound")
            #expect(errors.all.count == 2)
            #expect(errors.all.last?.code == .storageFailure && errors.all.last?.reason.contains("committed") == true)
            #expect(defaults.string(forKey: "sound") == "bell.aiff")
            #expect(try await HelperProcess.run("get", directory: dir, suite: "flush", ["sound"]).stdout == "bell.aiff")
            #expect(await watcher.waitForLine("change sound bell.aiff", timeout: 10))

            // A flush that works reports nothing.
            defaults.set("chime.caf", forKey: "sound")
            #expect(errors.all.count == 2)

            // synchronize() says false, and why.
            disk.failNext.store(EIO, ordering: .relaxed)
            #expect(!defaults.synchronize())
            #expect(errors.all.count == 3 && errors.all.last?.code == .storageFailure)
            #expect(defaults.synchronize())
        }
    }

    @Test("each commit of a fsyncEveryCommit handle flushes once, commits of a processCrashSafe handle on the same suite never, synchronize() once")
    func flushesPerHandle() throws {
        try withTemporaryDirectory { dir in
            var syncing = SharedDefaults.Configuration()
            syncing.durability = .fsyncEveryCommit
            let durable = try SharedDefaults(suiteName: "flushes", directory: dir, configuration: syncing)
            let plain = try SharedDefaults(suiteName: "flushes", directory: dir)
            #expect(durable.store === plain.store, "one environment per file per process")
            let environment = durable.store.environment
            var expected = environment.flushCount.load(ordering: .relaxed)

            for i in 0..<5 {
                durable.set(i, forKey: "durable")
                expected += 1
                #expect(environment.flushCount.load(ordering: .relaxed) == expected, "commit \(i) of the fsync handle")
                plain.set(i, forKey: "plain")
                #expect(environment.flushCount.load(ordering: .relaxed) == expected, "commit \(i) of the crash-safe handle")
            }
            try durable.write { tx in
                try tx.set(.integer(1), forKey: "x")
                try tx.set(.integer(2), forKey: "y")
            }
            expected += 1
            #expect(environment.flushCount.load(ordering: .relaxed) == expected, "one flush per commit, not per key")
            try durable.update("n") { _ in .integer(1) }
            expected += 1
            #expect(environment.flushCount.load(ordering: .relaxed) == expected)
            #expect(throws: Abort.self) {
                try durable.write { tx in
                    try tx.set(.integer(3), forKey: "z")
                    throw Abort()
                }
            }
            #expect(environment.flushCount.load(ordering: .relaxed) == expected, "an aborted write flushes nothing")
            try plain.write { try $0.set(.integer(4), forKey: "w") }
            #expect(environment.flushCount.load(ordering: .relaxed) == expected)

            #expect(plain.synchronize())
            expected += 1
            #expect(environment.flushCount.load(ordering: .relaxed) == expected)
            #expect(durable.synchronize())
            expected += 1
            #expect(environment.flushCount.load(ordering: .relaxed) == expected)
            #expect(durable.lastError == nil && plain.lastError == nil)
        }
    }

    // MARK: Per-file settings

    /// The settings that hold for a file in a whole process (`Configuration.fileSettings`).
    enum FileSetting: String, CaseIterable, Sendable {
        case maximumValueSize, logRetention, changeDetection, maximumMapSize, initialMapSize, maximumReaders, fileSharing

        func apply(to configuration: inout SharedDefaults.Configuration) {
            switch self {
            case .maximumValueSize: configuration.maximumValueSize = 1000
            case .logRetention: configuration.logRetention = 50
            case .changeDetection: configuration.changeDetection = .polling(interval: .milliseconds(5))
            case .maximumMapSize: configuration.maximumMapSize = 64 << 20
            case .initialMapSize: configuration.initialMapSize = 2 << 20
            case .maximumReaders: configuration.maximumReaders = 100
            case .fileSharing: configuration.fileSharing = .group
            }
        }
    }

    @Test(
        "a second handle in one process with a different per-file setting fails with conflictingConfiguration naming it; the same settings with another durability, logger and onError work; once the first handles are gone the new setting is taken",
        arguments: FileSetting.allCases
    )
    func conflictingFileSettings(_ setting: FileSetting) throws {
        try withTemporaryDirectory { dir in
            var first: SharedDefaults? = try SharedDefaults(suiteName: "settings", directory: dir)
            var different = SharedDefaults.Configuration()
            setting.apply(to: &different)
            do {
                _ = try SharedDefaults(suiteName: "settings", directory: dir, configuration: different)
                Issue.record("a second handle with a different \(setting) was accepted")
            } catch let error as SharedDefaultsError {
                #expect(error.code == .conflictingConfiguration)
                #expect(error.reason.contains(setting.rawValue), "\(error.reason)")
            }

            var perHandle = SharedDefaults.Configuration()
            perHandle.durability = .fsyncEveryCommit
            perHandle.onError = { _ in }
            perHandle.logger = Logger(label: "second handle")
            var second: SharedDefaults? = try SharedDefaults(suiteName: "settings", directory: dir, configuration: perHandle)
            second?.set("from the second handle", forKey: "k")
            #expect(first?.string(forKey: "k") == "from the second handle")

            first = nil
            #expect(throws: SharedDefaultsError.self, "one handle with the old settings is still open") {
                _ = try SharedDefaults(suiteName: "settings", directory: dir, configuration: different)
            }
            second = nil
            let reopened = try SharedDefaults(suiteName: "settings", directory: dir, configuration: different)
            #expect(reopened.store.configuration.fileSettings.map(\.value) == different.fileSettings.map(\.value))
            #expect(reopened.string(forKey: "k") == "from the second handle")
        }
    }

    @Test("a maximumValueSize taken after the first handles are gone is enforced")
    func newFileSettingIsEnforced() throws {
        try withTemporaryDirectory { dir in
            var first: SharedDefaults? = try SharedDefaults(suiteName: "limit", directory: dir)
            first?.set(String(repeating: "x", count: 2000), forKey: "big")
            #expect(first?.lastError == nil)
            first = nil
            var small = SharedDefaults.Configuration()
            small.maximumValueSize = 1000
            let reopened = try SharedDefaults(suiteName: "limit", directory: dir, configuration: small)
            let error = #expect(throws: SharedDefaultsError.self) {
                try reopened.write { try $0.set(.string(String(repeating: "y", count: 2000)), forKey: "big") }
            }
            #expect(error?.code == .valueTooLarge)
        }
    }

    // MARK: fork()

    @Test("after fork() the child's inherited handle refuses with usedAfterFork, a handle it opens anew writes, and the parent goes on")
    func forkedChild() async throws {
        try await withTemporaryDirectory { dir in
            let result = try await HelperProcess.run("fork", directory: dir, suite: "forked")
            #expect(result.reason == .exit && result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout == "child exit 0\nparent ok", "\(result.stderr)")
            let defaults = try SharedDefaults(suiteName: "forked", directory: dir)
            #expect(defaults.string(forKey: "child") == "written by the child")
            #expect(defaults.string(forKey: "parent-after-fork") == "after")
            #expect(defaults.object(forKey: "inherited") == nil && defaults.object(forKey: "inherited-set") == nil)
        }
    }

    // MARK: Watcher slots

    @Test(
        "a watcher in another PID namespace, whose pid means nothing here, keeps its slot when another process registers and leaves, and is still woken at once"
    )
    func watcherSlotSurvivesPIDNamespaces() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "ns", directory: dir)
            let sidecar = dir.appendingPathComponent("ns.lmdb-notify")
            // A real PID namespace where this machine allows one (root, util-linux's unshare).
            let namespaced = await run("unshare", ["--pid", "--fork", "--mount-proc", "true"]).status == 0
            let first = try HelperProcess(
                "watch",
                directory: dir,
                suite: "ns",
                launcher: namespaced ? [try executable("unshare"), "--pid", "--fork", "--mount-proc"] : []
            )
            defer { first.stop() }
            try #require(await first.waitForLine("ready"))

            let taken = try takenSlots(sidecar)
            try #require(taken.count == 1)
            let slot = taken[0].slot
            if namespaced {
                #expect(taken[0].pid == 1, "in its own PID namespace the watcher is process 1")
            }
            // Make its pid one that no process here has (beyond pid_max), as a namespaced watcher's may be.
            let nowhere: UInt32 = 0x7FFF_FFF0
            #expect(kill(pid_t(bitPattern: nowhere), 0) == -1 && errno == ESRCH)
            try writeWord(nowhere, at: Sidecar.slotsOffset + slot * 8, of: sidecar)

            let second = try HelperProcess("watch", directory: dir, suite: "ns")
            try #require(await second.waitForLine("ready"))
            let watchers = defaults.store.sidecar.watcherProcesses
            #expect(watchers.count == 2, "\(watchers)")
            #expect(watchers.contains(pid_t(bitPattern: nowhere)), "the first watcher's slot was taken over")
            #expect(watchers.contains(second.process.processIdentifier))
            #expect(try takenSlots(sidecar).first { $0.pid == UInt32(second.process.processIdentifier) }?.slot != slot)

            let set = try await HelperProcess.run("set", directory: dir, suite: "ns", ["sound", "ring.caf"])
            #expect(set.status == 0, "\(set.stderr)")
            #expect(await first.waitForLine("change sound ring.caf", timeout: 10))
            #expect(await second.waitForLine("change sound ring.caf", timeout: 10))

            // The second leaves, giving its slot back; the first must still be signalled.
            #expect(await second.finish().stdout.hasSuffix("stopped"))
            #expect(defaults.store.sidecar.watcherProcesses == [pid_t(bitPattern: nowhere)])
            let again = try await HelperProcess.run("set", directory: dir, suite: "ns", ["sound", "bell.aiff"])
            #expect(again.status == 0, "\(again.stderr)")
            #expect(await first.waitForLine("change sound bell.aiff", timeout: 10), "the first watcher was not woken")
        }
    }

    @Test("with every sidecar slot held, registering fails and an observer still receives another process's change (it polls)")
    func sidecarSlotsRunOut() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "slots", directory: dir)
            let path = dir.appendingPathComponent("slots.lmdb-notify").path
            var held: [(sidecar: Sidecar, slot: Int)] = []
            defer {
                for (sidecar, slot) in held {
                    sidecar.unregister(slot)
                    sidecar.close()
                }
            }
            // Each instance is an open file description of its own, so each takes another slot.
            while held.count <= Sidecar.slotCount {
                let sidecar = try Sidecar(path: path, mode: 0o600)
                guard let slot = sidecar.register() else {
                    sidecar.close()
                    break
                }
                held.append((sidecar, slot))
            }
            #expect(held.count == Sidecar.slotCount)
            #expect(Set(held.map(\.slot)).count == Sidecar.slotCount)
            #expect(defaults.store.sidecar.register() == nil)

            let watching = try defaults.changeFeed()  // the hub starts now, without a slot
            #expect(defaults.store.sidecar.watcherProcesses.count == Sidecar.slotCount)
            var changes = defaults.changes(forKeys: ["sound"]).makeAsyncIterator()
            let writer = try await HelperProcess.run("set", directory: dir, suite: "slots", ["sound", "ring.caf"])
            #expect(writer.status == 0, "\(writer.stderr)")
            let change = await changes.next()
            #expect(change?.key == "sound" && change?.value == .string("ring.caf"))
            _ = watching
        }
    }

    // MARK: Reader slots

    @Test("with every reader slot held by threads in read transactions, another thread's read fails with tooManyReaders; once they end, reads work")
    func readerSlotsRunOut() throws {
        try withTemporaryDirectory { dir in
            var configuration = SharedDefaults.Configuration()
            configuration.maximumReaders = 2
            let defaults = try SharedDefaults(suiteName: "readers", directory: dir, configuration: configuration)
            defaults.set("ring.caf", forKey: "sound")
            let slots = try defaults.info().maximumReaders
            #expect(slots == 2)

            let release = DispatchSemaphore(value: 0)
            var holders = 0
            var refusal: (any Error)?
            while holders <= slots {
                switch readOnNewThread(defaults, holdingUntil: release) {
                case .success: holders += 1
                case .failure(let error): refusal = error
                }
                if refusal != nil { break }
            }
            // This thread read the suite when it opened it, and LMDB keeps a reader slot bound to
            // the thread that used it until the thread ends: one holder takes the other slot.
            #expect(holders == slots - 1, "\(holders) of \(slots)")
            #expect((refusal as? SharedDefaultsError)?.code == .tooManyReaders, "\(String(describing: refusal))")
            if case .failure(let error) = readOnNewThread(defaults, holdingUntil: nil) {
                #expect((error as? SharedDefaultsError)?.code == .tooManyReaders)
            } else {
                Issue.record("a read succeeded with every reader slot held")
            }

            for _ in 0..<holders { release.signal() }
            // A thread's slot is freed when the thread ends, a moment after its read.
            var read: Result<String?, any Error> = .success(nil)
            let deadline = Date(timeIntervalSinceNow: 30)
            repeat {
                read = readOnNewThread(defaults, holdingUntil: nil)
            } while (try? read.get()) == nil && Date() < deadline
            #expect(try read.get() == "ring.caf")
        }
    }

    // MARK: Map sizes across processes

    @Test("two processes starting with a 64 KiB map write and read at once while each grows the map past the other's mapping, losing nothing")
    func mapGrowsAcrossProcesses() async throws {
        try await withTemporaryDirectory { dir in
            let options = ["--initial-map-size", "65536", "--wait-for-go"]
            let a = try HelperProcess("churn", directory: dir, suite: "grow", ["a", "300", "8000", "b"] + options)
            let b = try HelperProcess("churn", directory: dir, suite: "grow", ["b", "300", "8000", "a"] + options)
            a.go()
            b.go()
            for (name, helper) in [("a", a), ("b", b)] {
                let result = await helper.finish()
                #expect(result.reason == .exit && result.status == 0, "\(name): \(result.stderr)")
                #expect(result.stdout.hasPrefix("ok "), "\(name): \(result.stdout)")
            }
            var configuration = SharedDefaults.Configuration()
            configuration.initialMapSize = 64 << 10
            let defaults = try SharedDefaults(suiteName: "grow", directory: dir, configuration: configuration)
            #expect(try await defaults.read { try $0.keys.count } == 600)
            for prefix in ["a", "b"] {
                let wrong = (0..<300).filter { defaults.string(forKey: "\(prefix)-\($0)") != filler("\(prefix)-\($0)", size: 8000) }
                #expect(wrong.isEmpty, "\(prefix): \(wrong.prefix(10))")
            }
            // 64 KiB, 1 MiB + 64 KiB, then doubling: at least three growths.
            #expect(try defaults.info().mapSize >= 4 << 20)
            #expect(try defaults.verify().isHealthy)
        }
    }

    @Test("a process whose 8 MiB maximum is reached (storeFull) reads what a process with a larger maximum then writes beyond it")
    func differentMapLimits() async throws {
        try await withTemporaryDirectory { dir in
            let small = try HelperProcess(
                "fill",
                directory: dir,
                suite: "limits",
                ["a", "1000", "65536", "--maximum-map-size", "\(8 << 20)", "--hold", "--check", "a,b"]
            )
            let writtenLine = try #require(await small.waitForLine { $0.hasPrefix("written ") })
            let written = try #require(Int(writtenLine.dropFirst("written ".count)))
            #expect(written > 10 && written < 128, "\(written) values of 64 KiB in 8 MiB")
            #expect(await small.waitForLine("failed storeFull"))
            #expect(await small.waitForLine("holding"))

            let large = try await HelperProcess.run(
                "fill",
                directory: dir,
                suite: "limits",
                ["b", "200", "65536", "--maximum-map-size", "\(64 << 20)"]
            )
            #expect(large.status == 0 && large.stdout == "written 200", "\(large.stdout) \(large.stderr)")

            small.go()  // it reads every key, its map now smaller than the file
            let result = await small.finish()
            #expect(result.reason == .exit && result.status == 0, "\(result.stderr)")
            #expect(result.stdout == "read \(written + 200)", "\(result.stdout)")

            var configuration = SharedDefaults.Configuration()
            configuration.maximumMapSize = 8 << 20
            let defaults = try SharedDefaults(suiteName: "limits", directory: dir, configuration: configuration)
            #expect(try defaults.info().mapSize > 8 << 20)
            #expect(defaults.string(forKey: "b-199") == filler("b-199", size: 65536))
        }
    }

    // MARK: inotify failing

    @Test(
        "an observer process in which inotify fails (no inotify instances in its user namespace) falls back to polling and receives another process's change"
    )
    func inotifyFailsAndPollingTakesOver() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "noinotify", directory: dir)
            // A user namespace of its own, whose inotify instance limit is 0: inotify_init1 fails with
            // EMFILE in it, and only in it (the limit is per user namespace).
            let script = "echo 0 > /proc/sys/user/max_inotify_instances && exec \"$0\" \"$@\""
            let probe = await run("unshare", ["--user", "--map-root-user", "/bin/sh", "-c", script, "/bin/true"])
            try #require(probe.status == 0, "cannot make inotify fail in a user namespace here: \(probe.output)")
            let watcher = try HelperProcess(
                "watch",
                directory: dir,
                suite: "noinotify",
                ["--expect-no-inotify"],
                launcher: [try executable("unshare"), "--user", "--map-root-user", "/bin/sh", "-c", script]
            )
            defer { watcher.stop() }
            let failure = await watcher.waitForLine { $0.hasPrefix("inotify") }
            try #require(failure == "inotify fails: errno \(EMFILE)", "\(String(describing: failure))")
            try #require(await watcher.waitForLine("ready"))
            #expect(
                !defaults.store.sidecar.watcherProcesses.contains(watcher.process.processIdentifier),
                "a watcher without inotify gives its slot back"
            )

            let writer = try await HelperProcess.run("set", directory: dir, suite: "noinotify", ["sound", "ring.caf"])
            #expect(writer.status == 0, "\(writer.stderr)")
            #expect(await watcher.waitForLine("change sound ring.caf", timeout: 10))
        }
    }

    // MARK: Tombstones

    @Test("a set after a removal replaces the tombstone, in one process, in one transaction and across processes")
    func setReplacesTombstone() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "tomb", directory: dir)
            func tombstone(_ key: String) throws -> Bool {
                try defaults.store.read { txn in try withKeyBytes(key) { try txn.get(.tombstones, $0) != nil } }
            }

            defaults.set("ring.caf", forKey: "sound")
            #expect(try !tombstone("sound"))
            defaults.removeObject(forKey: "sound")
            #expect(try tombstone("sound") && defaults.object(forKey: "sound") == nil)
            defaults.set("bell.aiff", forKey: "sound")
            #expect(try !tombstone("sound"))
            #expect(defaults.string(forKey: "sound") == "bell.aiff")

            try await defaults.write { tx in
                try tx.set(.integer(1), forKey: "badge")
                try tx.removeValue(forKey: "badge")
                try tx.set(.integer(2), forKey: "badge")
            }
            #expect(try !tombstone("badge") && defaults.integer(forKey: "badge") == 2)
            try await defaults.write { try $0.removeAll() }
            #expect(try tombstone("badge") && tombstone("sound"))
            defaults.set(3, forKey: "badge")
            #expect(try !tombstone("badge") && tombstone("sound"))

            // Across processes: removed here, set there; removed there, set here.
            defaults.removeObject(forKey: "badge")
            #expect(try tombstone("badge"))
            #expect(try await HelperProcess.run("set", directory: dir, suite: "tomb", ["badge", "four"]).status == 0)
            #expect(try !tombstone("badge") && defaults.string(forKey: "badge") == "four")
            #expect(try await HelperProcess.run("remove", directory: dir, suite: "tomb", ["badge"]).status == 0)
            #expect(try tombstone("badge") && defaults.object(forKey: "badge") == nil)
            defaults.set("five", forKey: "badge")
            #expect(try !tombstone("badge"))
            #expect(try await HelperProcess.run("get", directory: dir, suite: "tomb", ["badge"]).stdout == "five")
        }
    }

    // MARK: Structure check

    @Test("the structure check understands LMDB 0.9's data version 1 and no other")
    func structureCheckVersions() {
        #expect(StructureCheck.understands(fileVersion: 1))
        #expect(!StructureCheck.understands(fileVersion: 2))
        #expect(!StructureCheck.understands(fileVersion: 0))
    }
}

// MARK: Support

/// What `fill` and `churn` (the helper) store under `key`: the key, a colon, and padding to `size` bytes.
private func filler(_ key: String, size: Int) -> String {
    key + ":" + String(repeating: "x", count: max(0, size - key.utf8.count - 1))
}

/// The path of `name` in the usual system directories.
private func executable(_ name: String) throws -> String {
    let path = ["/usr/bin/", "/bin/", "/usr/sbin/", "/sbin/"].map { $0 + name }.first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    return try #require(path, "\(name) is not installed")
}

/// Runs a system program to completion; status -1 if it cannot be found or started. `output` is
/// its stdout, then its stderr.
private func run(_ name: String, _ arguments: [String]) async -> (status: Int32, output: String) {
    guard let path = try? executable(name) else { return (-1, "\(name) is not installed") }
    do {
        let result = try await runProcess(URL(fileURLWithPath: path), arguments)
        return (result.status, result.stdout + result.stderr)
    } catch {
        return (-1, "\(error)")
    }
}

/// Mounts a tmpfs of `size` at `mountPoint` for `body`, and unmounts it afterwards. Fails the test,
/// saying so, where mounting is not permitted.
private func withTmpfs(at mountPoint: URL, size: String, _ body: (URL) async throws -> Void) async throws {
    try FileManager.default.createDirectory(at: mountPoint, withIntermediateDirectories: true)
    let mount = await run("mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", mountPoint.path])
    try #require(
        mount.status == 0,
        "mounting a tmpfs is not permitted here (this test needs root, or CAP_SYS_ADMIN, to fill a small file system): \(mount.output)"
    )
    do {
        try await body(mountPoint)
    } catch {
        _ = await run("umount", ["-l", mountPoint.path])
        throw error
    }
    _ = await run("umount", ["-l", mountPoint.path])
}

/// Writes a file into `directory` until its file system has no byte left.
private func fillUp(_ directory: URL) throws {
    let fd = open(directory.appendingPathComponent("filler").path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    try #require(fd >= 0)
    defer { close(fd) }
    for chunk in [1 << 16, 1 << 12, 1] {
        let bytes = [UInt8](repeating: 0xAB, count: chunk)
        while write(fd, bytes, chunk) == chunk {}
    }
    var fs = statvfs()
    try #require(fstatvfs(fd, &fs) == 0)
    #expect(fs.f_bavail == 0, "the file system still has room")
}

/// The sidecar's taken slots (pid word non-zero), read from the file (layout: see `Sidecar`).
private func takenSlots(_ sidecar: URL) throws -> [(slot: Int, pid: UInt32)] {
    let bytes = try Data(contentsOf: sidecar)
    return (0..<Sidecar.slotCount).compactMap { slot in
        let offset = Sidecar.slotsOffset + slot * 8
        let pid = bytes[offset..<offset + 4].withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
        return pid == 0 ? nil : (slot, pid)
    }
}

/// Overwrites the 32-bit little-endian word at `offset` of `file`, as another process would.
private func writeWord(_ value: UInt32, at offset: Int, of file: URL) throws {
    let fd = open(file.path, O_WRONLY)
    try #require(fd >= 0)
    defer { close(fd) }
    var word = value.littleEndian
    #expect(pwrite(fd, &word, 4, off_t(offset)) == 4)
}

/// Reads `sound` in a read transaction on a new thread; with `release`, stays inside the transaction
/// until it is signalled. Returns once the read has begun (or failed).
private func readOnNewThread(_ defaults: SharedDefaults, holdingUntil release: DispatchSemaphore?) -> Result<String?, any Error> {
    final class Outcome: Sendable {
        let value = Mutex<Result<String?, any Error>?>(nil)
    }
    let outcome = Outcome()
    let started = DispatchSemaphore(value: 0)
    let thread = Thread {
        do {
            try defaults.read { tx in
                outcome.value.withLock { $0 = .success(try? tx.value(forKey: "sound")?.stringValue) }
                started.signal()
                release?.wait()
            }
        } catch {
            outcome.value.withLock { $0 = .failure(error) }
            started.signal()
        }
    }
    thread.start()
    started.wait()
    return outcome.value.withLock { $0! }
}

/// A disk whose next flush fails with `failNext` (an `errno` value; 0: none), then works again:
/// EIO cannot be caused on purpose.
private final class FailingDisk: DiskFlush {
    let failNext = Atomic<Int32>(0)

    func flush(_ flushEnvironment: () throws(LMDBError) -> Void) throws(LMDBError) {
        let injected = failNext.exchange(0, ordering: .relaxed)
        if injected != 0 { throw LMDBError(injected) }
        try flushEnvironment()
    }
}
