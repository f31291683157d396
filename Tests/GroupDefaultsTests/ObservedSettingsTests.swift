import Dispatch
import Foundation
import GroupDefaults
import Observation
import Synchronization
import TestSupport
import Testing

extension SharedDefaults.Keys {
    // Declared as the DocC articles declare keys (the short name `Key` inside the extension).
    fileprivate static let tone = Key<String>("sound", default: "default")
    fileprivate static let level = Key<Int>("volume", default: 5)
    fileprivate static let windowFrame = Key<[Double]>("windowFrame", default: [0, 0, 800, 600], sync: .local)
}

/// What the README and the DocC articles promise an app that observes its settings: typed change
/// streams that say where each change came from, `ObservedDefaults` announcing each change once on
/// the actor chosen, `.local` keys, and migrations that run once however many processes start.
@Suite("Observed settings")
struct ObservedSettingsTests {
    @Test("changes(for:) yields the current value, then each change with its source: this process or another")
    func typedChangesWithSources() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "app", directory: dir)
            defaults[.tone] = "ring.caf"
            var updates = defaults.changes(for: .tone).makeAsyncIterator()
            let first = try #require(await updates.next())
            #expect(first.value == "ring.caf" && first.change == nil && first.source == nil)

            defaults[.tone] = "bell.aiff"
            let own = try #require(await updates.next())
            #expect(own.value == "bell.aiff" && own.source == .thisProcess && !own.isConflict)

            // Another handle in this process is still this process.
            let other = try SharedDefaults(suiteName: "app", directory: dir)
            other[.tone] = "chime.wav"
            #expect(try #require(await updates.next()).source == .thisProcess)

            let helper = try await HelperProcess.run("set", directory: dir, suite: "app", ["sound", "horn.mp3"])
            #expect(helper.status == 0, "\(helper.stderr)")
            let foreign = try #require(await updates.next())
            #expect(foreign.value == "horn.mp3" && foreign.source == .anotherProcess)
            #expect(foreign.change?.kind == .set && foreign.change?.key == "sound")
        }
    }

    @Test("a process knows its own changes after thousands of commits (its memory of them wraps around)")
    func sourcesAfterManyCommits() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "app", directory: dir)
            for index in 0..<4_200 { defaults.set(index, forKey: "n") }
            var updates = defaults.changes(forKeys: ["n", "sound"]).makeAsyncIterator()
            defaults.set(-1, forKey: "n")
            #expect(await updates.next()?.source == .thisProcess)
            #expect(try await HelperProcess.run("set", directory: dir, suite: "app", ["sound", "horn.mp3"]).status == 0)
            #expect(await updates.next()?.source == .anotherProcess)
            defaults.set(-2, forKey: "n")
            #expect(await updates.next()?.source == .thisProcess)
        }
    }

    @Test("changes(for:_:) yields both keys' values together after a change of either")
    func severalKeys() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "app", directory: dir)
            var updates = defaults.changes(for: .tone, .level).makeAsyncIterator()
            let first = try #require(await updates.next())
            #expect(first.values == ("default", 5) && first.change == nil)
            defaults[.level] = 7
            let second = try #require(await updates.next())
            #expect(second.values == ("default", 7) && second.change?.key == "volume")
            defaults[.tone] = "ring.caf"
            #expect(try #require(await updates.next()).values == ("ring.caf", 7))
        }
    }

    @Test("ObservedDefaults announces each write of another process once, on the actor chosen, and writes through")
    func observedDefaultsAcrossProcesses() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "app", directory: dir)
            let actor = DeliveryActor()
            let settings = ObservedDefaults(defaults, isolation: actor)
            let sounds = Announcements()
            let volumes = Announcements()
            sounds.track { _ = settings[.tone] }
            volumes.track { _ = settings[.level] }

            for (index, sound) in ["ring.caf", "bell.aiff", "horn.mp3"].enumerated() {
                let helper = try await HelperProcess.run("set", directory: dir, suite: "app", ["sound", sound])
                #expect(helper.status == 0, "\(helper.stderr)")
                await sounds.waitFor(count: index + 1)
                #expect(settings[.tone] == sound)
            }
            // A write through it is announced once too, when its commit reaches the feed.
            settings[.level] = 9
            await volumes.waitFor(count: 1)
            #expect(defaults[.level] == 9)
            // The volume's announcement came after every sound's (the feed is in commit order): had
            // a sound been announced twice, it would have been counted by now.
            #expect(sounds.count == 3)
            #expect(sounds.offActor == 0 && volumes.offActor == 0, "announced off the chosen actor")
            await settings.stop()
        }
    }

    @Test("a key declared sync: .local joins the suite's local-only keys at its first use")
    func localKeys() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "app", directory: dir)
            #expect(try defaults.syncState().localOnlyKeys.isEmpty)
            defaults[.windowFrame] = [10, 10, 640, 480]
            defaults[.tone] = "ring.caf"
            #expect(try defaults.syncState().localOnlyKeys == ["windowFrame"])
            // Another process sees the declaration: it is stored in the suite.
            let other = try SharedDefaults(suiteName: "app", directory: dir)
            #expect(other[.windowFrame] == [10, 10, 640, 480])
            #expect(try other.syncState().localOnlyKeys == ["windowFrame"])
            // Configuring sync replaces `--exclude`'s patterns, not the declared keys: the key stays
            // local, and is not marked for pushing.
            try defaults.enableSync(server: "http://127.0.0.1:9", localOnly: ["draft.*"])
            try defaults.enableSync(server: "http://127.0.0.1:9", localOnly: [])
            #expect(try defaults.syncState().localOnlyKeys == ["windowFrame"])
            defaults[.windowFrame] = [0, 0, 1, 1]
            #expect(try defaults.pendingChanges().map(\.key) == [])
        }
    }

    @Test("migrations started by 4 processes at once run exactly once each, in order, and record the version")
    func migrationsRunOnce() async throws {
        try await withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "app", directory: dir)
            try await defaults.write { tx in
                try tx.set(.string("ring.caf"), forKey: "sound")
                try tx.set(.double(0.8), forKey: "volume")
            }
            let workers = try (0..<4).map { _ in try HelperProcess("migrate", directory: dir, suite: "app", ["--wait-for-go"]) }
            for worker in workers { worker.go() }
            var applied: [String] = []
            for worker in workers {
                let result = await worker.finish()
                #expect(result.status == 0, "\(result.stderr)")
                applied.append(result.stdout)
            }
            // Every step ran in exactly one process (steps can be shared out between them).
            let steps = applied.flatMap { $0.dropFirst("applied ".count).split(separator: ",").map(String.init) }
            #expect(steps.sorted() == ["1", "2", "3"], "\(applied)")
            #expect(defaults.integer(forKey: "migration.runs") == 1)
            #expect(try defaults.migrationVersion == 3)
            #expect(defaults.string(forKey: "notification.sound") == "ring.caf" && defaults.object(forKey: "sound") == nil)
            #expect(defaults.object(forKey: "volume") as? Int == 80)
            // Later starts find nothing to do.
            #expect(try await HelperProcess.run("migrate", directory: dir, suite: "app").stdout == "applied")
        }
    }

    @Test("a failing step leaves the suite at the version before it, and the next call resumes there")
    func failingMigration() throws {
        try withTemporaryDirectory { dir in
            let defaults = try SharedDefaults(suiteName: "app", directory: dir)
            struct Refused: Error {}
            let failing = Mutex(true)
            let migrations = [
                SharedDefaults.Migration(1, "first") { tx in try tx.set(.integer(1), forKey: "one") },
                SharedDefaults.Migration(2, "second") { tx in
                    try tx.set(.integer(2), forKey: "two")
                    if failing.withLock({ $0 }) { throw Refused() }
                },
            ]
            #expect(throws: Refused.self) { try defaults.migrate(migrations) }
            #expect(try defaults.migrationVersion == 1)
            #expect(defaults.object(forKey: "two") == nil)  // the step was all or nothing
            failing.withLock { $0 = false }
            #expect(try defaults.migrate(migrations) == [2])
            #expect(defaults.integer(forKey: "two") == 2)

            let unordered = [SharedDefaults.Migration(2, "b") { _ in }, SharedDefaults.Migration(2, "c") { _ in }]
            #expect(throws: SharedDefaultsError.self) { try defaults.migrate(unordered) }
            #expect(throws: SharedDefaultsError.self) { try defaults.migrate([SharedDefaults.Migration(0, "zero") { _ in }]) }
        }
    }
}

/// An actor with an executor of its own (a dispatch queue), so that a test can tell whether code
/// ran on it.
final class DeliveryExecutor: SerialExecutor {
    static let key = DispatchSpecificKey<Bool>()
    let queue = DispatchQueue(label: "observed-settings-tests.delivery")

    init() { queue.setSpecific(key: Self.key, value: true) }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    static var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }
}

actor DeliveryActor {
    private let executor = DeliveryExecutor()
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
}

/// Counts the announcements of what `track` reads, tracking again at each (as a view re-renders).
final class Announcements: Sendable {
    private let state = Mutex((count: 0, offActor: 0))
    private let changed = AsyncStream<Void>.makeStream()

    var count: Int { state.withLock { $0.count } }
    var offActor: Int { state.withLock { $0.offActor } }

    func track(_ read: @escaping @Sendable () -> Void) {
        withObservationTracking(read) { [self] in
            state.withLock { state in
                state.count += 1
                if !DeliveryExecutor.isCurrent { state.offActor += 1 }
            }
            // Tracked again at once, so that no announcement can go uncounted (the registrar calls
            // this outside its lock, after taking the observations this change ends).
            track(read)
            changed.continuation.yield()
        }
    }

    /// Returns once `count` announcements were made.
    func waitFor(count expected: Int) async {
        for await _ in changed.stream where count >= expected { return }
    }
}
