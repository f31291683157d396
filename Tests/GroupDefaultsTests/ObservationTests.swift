import Foundation
import ServerLaunching
import TestSupport
import Testing

@testable import GroupDefaults
@testable import GroupDefaultsLMDB

/// Change notifications: the log, the feeds, and real processes writing and watching.
@Suite("Change notifications", .timeLimit(.minutes(2)))
struct ObservationTests {
    /// The inotify descriptors of this process that watch `file` (other tests run in parallel, so
    /// only those that can be told apart by the inode they watch are counted).
    private func inotifyWatches(of file: URL) throws -> Int {
        let inode = try #require(try FileManager.default.attributesOfItem(atPath: file.path)[.systemFileNumber] as? Int)
        let hexInode = String(inode, radix: 16)
        var count = 0
        for fd in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            guard let info = try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8) else { continue }
            for line in info.split(separator: "\n") where line.hasPrefix("inotify ") && line.contains(" ino:\(hexInode) ") {
                count += 1
            }
        }
        return count
    }

    @Test("an observer in the same process sees its own writes, in order, with the values stored")
    func inProcessWrites() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "own", directory: dir)
            defaults.set("old", forKey: "before")  // before the observation: not delivered
            var iterator = defaults.changes().makeAsyncIterator()
            defaults.set("ring.caf", forKey: "sound")
            defaults.set(3, forKey: "badge")
            defaults.removeObject(forKey: "sound")
            try await defaults.write { try $0.removeAll() }  // the async overload, off the cooperative pool

            let changes = [await iterator.next(), await iterator.next(), await iterator.next(), await iterator.next()]
            #expect(changes.map { $0?.kind } == [.set, .set, .removed, .cleared])
            #expect(changes.map { $0?.key } == ["sound", "badge", "sound", ""])
            // Each change with the value it wrote, though the suite is empty by now.
            #expect(changes.map { $0?.value } == [.string("ring.caf"), .integer(3), nil, nil])
            let sequences = changes.compactMap { $0?.sequence }
            #expect(sequences == sequences.sorted() && Set(sequences).count == 4)
        }
    }

    @Test("a change's value is the one stored, and keys filter the feed")
    func valuesAndKeyFilter() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "filter", directory: dir)
            let feed = try defaults.changeFeed(forKeys: ["sound"])
            defaults.set(1, forKey: "badge")
            defaults.set("bell.aiff", forKey: "sound")
            defaults.set(2, forKey: "badge")
            let change = try #require(try feed.next(timeout: .seconds(10)))
            #expect(change.kind == .set && change.key == "sound" && change.value == .string("bell.aiff"))
            #expect(change.origin == defaults.store.origin)
            #expect(try feed.nextAvailable() == nil)
        }
    }

    @Test("keys with dots, spaces, slashes, emoji and 500 bytes are observed like any other")
    func unusualKeys() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "keys", directory: dir)
            let keys = ["com.example.sound", "with space", "a/b/c", "🔔 sound", String(repeating: "k", count: 500)]
            let feed = try defaults.changeFeed(forKeys: Set(keys))
            for (index, key) in keys.enumerated() { defaults.set(index, forKey: key) }
            var seen: [String] = []
            while seen.count < keys.count, let change = try feed.next(timeout: .seconds(10)) {
                seen.append(change.key)
                #expect(change.value == .integer(keys.firstIndex(of: change.key) ?? -1))
            }
            #expect(seen == keys)
        }
    }

    @Test("since: replays the retained backlog, then continues live, with no gap and no duplicate at the seam")
    func sinceReplaysThenContinues() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "since", directory: dir)
            for i in 0..<100 { defaults.set(i, forKey: "k\(i)") }
            let middle = try defaults.lastSequence - 50
            let feed = try defaults.changeFeed(since: middle)
            // Live writes from another process, after the feed exists.
            let writer = try await HelperProcess.run("write-keys", directory: dir, suite: "since", ["live", "50"])
            #expect(writer.status == 0, "\(writer.stderr)")
            var sequences: [UInt64] = []
            var keys: [String] = []
            while sequences.count < 100, let change = try feed.next(timeout: .seconds(10)) {
                sequences.append(change.sequence)
                keys.append(change.key)
            }
            #expect(sequences == Array(middle + 1...middle + 100))
            #expect(Array(keys.prefix(50)) == (50..<100).map { "k\($0)" })
            #expect(Array(keys.suffix(50)) == (0..<50).map { "live-\($0)" })
        }
    }

    @Test("each change carries the value it wrote, as long as the log retains it")
    func changesCarryTheirOwnValues() throws {
        try withTemporaryDirectory { dir in
            var configuration = SharedDefaults.Configuration()
            configuration.logRetention = 100
            let defaults = try SharedDefaults(suiteName: "own-values", directory: dir, configuration: configuration)
            let start = try defaults.lastSequence
            for i in 0..<300 { defaults.set(i, forKey: "k") }
            defaults.removeObject(forKey: "k")
            let end = try defaults.lastSequence
            // A feed replaying the last 50: each set with its own value, though the key is removed now.
            let feed = try defaults.changeFeed(forKeys: ["k"], since: end - 50)
            var changes: [SharedDefaults.Change] = []
            while let change = try feed.nextAvailable() { changes.append(change) }
            #expect(changes.count == 50 && changes.last?.kind == .removed)
            for change in changes.dropLast() {
                #expect(change.kind == .set && !change.isValueNotKept)
                #expect(change.value == .integer(Int(change.sequence - start - 1)), "\(change)")
            }
            // The values go with their records: retention bounds both.
            let records = try defaults.store.readLog { txn in try txn.count(.log) }
            #expect(records <= 100 + Int(ChangeLog.trimBatch), "\(records) records")
            #expect(try defaults.changeFeed(since: 1).nextAvailable()?.kind == .reset)
        }
    }

    @Test("a value over keptValueLimit is not kept with its change: the change says so and gives the key's value when read")
    func largeValuesAreNotKept() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "large-values", directory: dir)
            let start = try defaults.lastSequence
            let limit = SharedDefaults.Change.keptValueLimit
            // Encoded, a string takes its UTF-8 bytes and a few more for its tag and length.
            defaults.set(String(repeating: "a", count: limit - 8), forKey: "k")
            defaults.set(String(repeating: "b", count: limit + 1), forKey: "k")
            defaults.set(Data(count: limit * 2), forKey: "d")
            let feed = try defaults.changeFeed(since: start)
            let kept = try #require(try feed.nextAvailable())
            let large = try #require(try feed.nextAvailable())
            let data = try #require(try feed.nextAvailable())
            #expect(!kept.isValueNotKept && kept.value == .string(String(repeating: "a", count: limit - 8)))
            #expect(large.isValueNotKept && large.value == .string(String(repeating: "b", count: limit + 1)))
            #expect(data.isValueNotKept && data.value == .data(Data(count: limit * 2)))
            defaults.set("small", forKey: "k")
            let again = try defaults.changeFeed(since: start)
            _ = try again.nextAvailable()
            let replaced = try #require(try again.nextAvailable())
            #expect(replaced.isValueNotKept && replaced.value == .string("small"), "the key's value when read")
        }
    }

    @Test("an observer that falls behind the retained log gets one reset, then continues from the end")
    func fallingBehindYieldsReset() throws {
        try withTemporaryDirectory { dir in
            var configuration = SharedDefaults.Configuration()
            configuration.logRetention = 100
            let defaults = try SharedDefaults(suiteName: "retention", directory: dir, configuration: configuration)
            let feed = try defaults.changeFeed()  // never reads while 1,000 changes are made
            for i in 0..<1000 { defaults.set(i, forKey: "k\(i % 10)") }
            let end = try defaults.lastSequence
            let reset = try #require(try feed.nextAvailable())
            #expect(reset.kind == .reset && reset.sequence == end)
            #expect(try feed.nextAvailable() == nil)
            defaults.set("after", forKey: "later")
            let next = try #require(try feed.next(timeout: .seconds(10)))
            #expect(next.kind == .set && next.key == "later" && next.sequence == end + 1)

            // A backlog older than what is retained is a reset too.
            let late = try defaults.changeFeed(since: 1)
            #expect(try late.nextAvailable()?.kind == .reset)
        }
    }

    @Test("2 writer processes × 5,000 writes: an observer in a third process receives all 10,000, once each, in each writer's order")
    func twoWritersOneObserver() async throws {
        try await withTemporaryDirectory { dir in
            _ = try SharedDefaults(suiteName: "busy", directory: dir)
            let observer = try HelperProcess("observe", directory: dir, suite: "busy", ["10000"])
            #expect(await observer.waitForLine("ready"))
            let writers = try ["a", "b"].map {
                try HelperProcess("write-keys", directory: dir, suite: "busy", [$0, "5000", "--wait-for-go"])
            }
            for writer in writers { writer.go() }
            for writer in writers {
                let result = await writer.finish()
                #expect(result.status == 0, "\(result.stderr)")
            }
            let result = await observer.finish()
            #expect(result.status == 0, "\(result.stderr)")
            let lines = result.stdout.split(separator: "\n").filter { $0 != "ready" }
            #expect(lines.count == 10_000)
            var lastSequence: UInt64 = 0
            var nextValue = ["a": 0, "b": 0]
            for line in lines {
                let fields = line.split(separator: " ")
                guard fields.count == 4, let sequence = UInt64(fields[0]) else {
                    Issue.record("unexpected line \(line)")
                    continue
                }
                #expect(sequence > lastSequence, "sequence numbers must increase")
                lastSequence = sequence
                #expect(fields[1] == "set")
                let keyParts = fields[2].split(separator: "-")
                let writer = String(keyParts[0])
                let index = Int(keyParts[1]) ?? -1
                #expect(index == nextValue[writer], "writer \(writer): expected change \(nextValue[writer] ?? -1), got \(index)")
                nextValue[writer] = index + 1
            }
            #expect(nextValue == ["a": 5000, "b": 5000])
        }
    }

    @Test("a writer killed mid-transaction produces no change for the aborted transaction")
    func killedWriterLeavesNoPartialChange() async throws {
        try await withTemporaryDirectory { dir in
            // The log keeps every change however long the kill takes to arrive (a busy machine lets
            // the writer commit thousands of transactions first): the feed never falls behind.
            var configuration = SharedDefaults.Configuration()
            configuration.logRetention = 50_000_000
            let defaults = try SharedDefaults(suiteName: "crash", directory: dir, configuration: configuration)
            let feed = try defaults.changeFeed()
            let writer = try HelperProcess("stream", directory: dir, suite: "crash", ["--log-retention", "50000000"])
            #expect(await writer.waitForLine("streaming"))
            writer.send(SIGKILL)
            _ = await writer.finish()
            let end = try defaults.lastSequence
            var changes: [SharedDefaults.Change] = []
            while changes.last?.sequence != end, let change = try feed.next(timeout: .seconds(10)) {
                changes.append(change)
            }
            // Each of the writer's transactions sets a, padding, b and c: only whole ones are logged.
            #expect(changes.count % 4 == 0 && changes.count >= 400)
            #expect(changes.map(\.key).suffix(4) == ["a", "padding", "b", "c"])
            #expect(changes.map(\.sequence) == Array(changes[0].sequence...end))
        }
    }

    @Test("didChangeNotification is posted for another process's change while the suite is observed")
    func notificationCenterCompatibility() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "notify", directory: dir)
            let received = AsyncStream<String>.makeStream()
            let observer = NotificationCenter.default.addObserver(
                forName: SharedDefaults.didChangeNotification,
                object: nil,
                queue: nil
            ) { notification in
                guard notification.userInfo?[SharedDefaults.ChangeNotificationKey.suiteName] as? String == "notify" else { return }
                received.continuation.yield(notification.userInfo?[SharedDefaults.ChangeNotificationKey.key] as? String ?? "?")
            }
            defer { NotificationCenter.default.removeObserver(observer) }
            let token = defaults.postChangeNotifications()
            let writer = try await HelperProcess.run("set", directory: dir, suite: "notify", ["sound", "ring.caf"])
            #expect(writer.status == 0, "\(writer.stderr)")
            var iterator = received.stream.makeAsyncIterator()
            #expect(await iterator.next() == "sound")
            await token.stop()
        }
    }

    @Test("observe calls its handler for another process's changes until the token is stopped")
    func callbackForm() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "callback", directory: dir)
            let (stream, continuation) = AsyncStream<SharedDefaults.Change>.makeStream()
            let token = defaults.observe(keys: ["sound"]) { continuation.yield($0) }
            let writer = try await HelperProcess.run("set", directory: dir, suite: "callback", ["sound", "ring.caf"])
            #expect(writer.status == 0)
            var iterator = stream.makeAsyncIterator()
            let change = await iterator.next()
            #expect(change?.key == "sound" && change?.value == .string("ring.caf"))
            await token.stop()
        }
    }

    @Test("updates yields a typed key's value, first the current one, then each change")
    func typedUpdates() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "typed", directory: dir)
            let key = SharedDefaults.Key<String>("sound", default: "default")
            var iterator = defaults.updates(for: key).makeAsyncIterator()
            #expect(await iterator.next() == "default")
            defaults[key] = "bell.aiff"
            #expect(await iterator.next() == "bell.aiff")
            defaults.reset(key)
            #expect(await iterator.next() == "default")
        }
    }

    @Test("polling instead of inotify delivers changes from another process")
    func pollingFallback() async throws {
        try await withTemporaryDirectory { dir in
            var configuration = SharedDefaults.Configuration()
            configuration.changeDetection = .polling(interval: .milliseconds(5))
            let defaults = try SharedDefaults(suiteName: "polled", directory: dir, configuration: configuration)
            let feed = try defaults.changeFeed()
            let writer = try await HelperProcess.run("set", directory: dir, suite: "polled", ["sound", "ring.caf"])
            #expect(writer.status == 0)
            let change = try feed.next(timeout: .seconds(10))
            #expect(change?.key == "sound")
        }
    }

    @Test("one inotify watch per suite per process, closed when the last observer ends")
    func lastObserverReleasesResources() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "fds", directory: dir)
            let sidecar = dir.appendingPathComponent("fds.lmdb-notify")
            #expect(try inotifyWatches(of: sidecar) == 0)
            var feeds: [SharedDefaults.ChangeFeed] = [try defaults.changeFeed(), try defaults.changeFeed()]
            #expect(try inotifyWatches(of: sidecar) == 1, "one watch serves every observer of the process")
            feeds.removeFirst()
            #expect(try inotifyWatches(of: sidecar) == 1, "one observer is left")
            feeds.removeAll()
            #expect(try inotifyWatches(of: sidecar) == 0)

            let token = defaults.observe { _ in }
            #expect(try inotifyWatches(of: sidecar) == 1)
            defaults.set(1, forKey: "x")
            await token.stop()
            #expect(try inotifyWatches(of: sidecar) == 0)
        }
    }

    @Test("an observer process that dies blocks no writer")
    func deadObserverIsHarmless() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "dead", directory: dir)
            let observer = try HelperProcess("observe", directory: dir, suite: "dead", ["1000000"])
            #expect(await observer.waitForLine("ready"))
            let pid = observer.process.processIdentifier
            #expect(defaults.store.sidecar.watcherProcesses.contains(pid))
            observer.send(SIGKILL)
            _ = await observer.finish()
            for i in 0..<1000 { defaults.set(i, forKey: "k") }
            #expect(defaults.lastError == nil)
            #expect(defaults.integer(forKey: "k") == 999)
            // The dead watcher's slot is taken over once the free ones run out.
            #expect(defaults.store.sidecar.watcherProcesses.contains(pid))
            let feed = try defaults.changeFeed()
            #expect(defaults.store.sidecar.watcherProcesses.contains(getpid()))
            _ = feed
        }
    }
}
