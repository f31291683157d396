import CommandLineSupport
import Foundation
import Glibc
import ServerLaunching
import TestSupport
import Testing

/// `watch`, and the tool's processes running side by side.
@Suite struct ConcurrencyTests {
    /// Starts `watch SUITE ARGUMENTS… --since LAST` where LAST is the suite's last change now, so
    /// that it misses nothing written after this call, however long it takes to start.
    static func startWatch(_ sandbox: Sandbox, _ suite: String, _ arguments: [String] = []) async throws -> (RunningProcess, UInt64) {
        let last = try await sandbox.lastChange(suite)
        return (try sandbox.start(["watch", suite] + arguments + ["--since", String(last)]), last)
    }

    @Test func watchPrintsOneLinePerChangeAndEndsOnSIGTERM() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "before", "x")
            let (watch, last) = try await Self.startWatch(sandbox, "s")
            defer { watch.stop() }
            try await sandbox.ok("write", "s", "sound", "-string", "ring tone.caf")
            try await sandbox.ok("write", "s", "n", "-int", "3")
            try await sandbox.ok("write", "s", "prefs", "-dict", "k", "v")
            try await sandbox.ok("delete", "s", "sound")
            try await sandbox.ok("delete", "s")
            var lines: [String] = []
            for _ in 0..<5 {
                guard let line = await watch.nextLine() else { break }
                lines.append(line)
            }
            #expect(
                lines == [
                    "\(last + 1) set sound ring tone.caf",
                    "\(last + 2) set n 3",
                    "\(last + 3) set prefs { k = v; }",
                    "\(last + 4) removed sound",
                    "\(last + 5) cleared",
                ]
            )
            if let result = await watch.end(with: SIGTERM) {
                #expect(result.reason == .exit && result.status == 0, "\(result)")
                #expect(result.stdout.isEmpty && result.stderr == "watching s after change \(last)\n", "\(result)")
            }
        }
    }

    /// A script starts `watch`, waits for its word that it follows the suite, then makes changes:
    /// none is missed, and `--count` ends it once it has printed that many.
    @Test func watchSaysWhenItFollowsAndEndsAfterCount() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "before", "x")
            let last = try await sandbox.lastChange("s")
            let watch = try sandbox.startShell(#"exec "$GD" watch s sound --count 2 2>&1"#)
            defer { watch.stop() }
            #expect(await watch.nextLine() == "watching s after change \(last)")
            try await sandbox.ok("write", "s", "sound", "a")
            try await sandbox.ok("write", "s", "other", "y")
            try await sandbox.ok("write", "s", "sound", "b")
            #expect(await watch.nextLine() == "\(last + 1) set sound a")
            #expect(await watch.nextLine() == "\(last + 3) set sound b")
            #expect(await watch.waitForEnd(), "watch --count 2 went on after two changes")
            let result = await watch.finish()
            #expect(result.succeeded && result.stdout.isEmpty, "\(result)")
        }
    }

    @Test func watchOfSomeKeysShowsOnlyThem() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "other", "x")
            let (watch, last) = try await Self.startWatch(sandbox, "s", ["sound", "--json"])
            defer { watch.stop() }
            try await sandbox.ok("write", "s", "other", "y")
            try await sandbox.ok("write", "s", "sound", "bell.aiff")
            try await sandbox.ok("write", "s", "other", "z")
            try await sandbox.ok("delete", "s")
            let first = try JSONValue.parse(try #require(await watch.nextLine()))
            #expect(
                first
                    == .object([
                        "sequence": .integer(Int64(last + 2)), "kind": .string("set"), "key": .string("sound"),
                        "value": .string("bell.aiff"), "origin": try #require(first["origin"]),
                    ])
            )
            if case .string(let origin) = first["origin"] {
                #expect(UInt64(origin) != nil, "\(first)")
            } else {
                Issue.record("origin is not a string: \(first)")
            }
            let second = try JSONValue.parse(try #require(await watch.nextLine()))
            #expect(second["kind"] == .string("cleared") && second["sequence"] == .integer(Int64(last + 4)), "\(second)")
            if let result = await watch.end(with: SIGINT) {
                #expect(result.reason == .exit && result.status == 0, "\(result)")
                #expect(result.stdout.isEmpty, "printed more than the changes of sound: \(result)")
            }
        }
    }

    /// `watch` ends on SIGINT and SIGTERM even when started with them blocked, as it is when
    /// started from a thread that blocks them (a thread pool's worker, like this test runner's):
    /// a child inherits its parent thread's signal mask.
    @Test(arguments: [SIGINT, SIGTERM])
    func watchEndsOnASignalItInheritedBlocked(_ signal: Int32) async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "a", "1")
            let last = try await sandbox.lastChange("s")
            let watch = try sandbox.start(["watch", "s", "--since", String(last)], blockingTermination: true)
            defer { watch.stop() }
            try await sandbox.ok("write", "s", "b", "2")
            #expect(await watch.nextLine() == "\(last + 1) set b 2")  // it is watching
            if let result = await watch.end(with: signal, timeout: .seconds(5)) {
                #expect(result.reason == .exit && result.status == 0, "\(result)")
            }
        }
    }

    /// Eight `write` processes released together, and a `watch --json` that sees each change once,
    /// in commit order.
    @Test func eightParallelWritersAndAWatcherThatSeesEveryChange() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "setup", "x")
            let (watch, last) = try await Self.startWatch(sandbox, "s", ["--json"])
            defer { watch.stop() }
            // The watcher is live: it prints a marker written after it started.
            try await sandbox.ok("write", "s", "marker", "ready")
            let marker = try JSONValue.parse(try #require(await watch.nextLine(), "watch printed nothing"))
            #expect(marker["key"] == .string("marker") && marker["sequence"] == .integer(Int64(last + 1)), "\(marker)")

            // Each writer waits for a line on stdin, so that all start writing together.
            var writers: [RunningProcess] = []
            defer { for writer in writers { writer.stop() } }
            for i in 0..<8 {
                writers.append(try sandbox.startShell(#"read go && exec "$GD" write s "$1" -int "$2""#, ["w\(i)", String(i * 11)]))
            }
            for writer in writers { writer.send("go\n") }
            for (i, writer) in writers.enumerated() {
                let result = await writer.finish()
                #expect(result.succeeded && result.stderr.isEmpty, "writer \(i): \(result)")
            }

            var seen: [String: (sequence: Int64, value: JSONValue?)] = [:]
            var sequences: [Int64] = []
            let deadline = ContinuousClock.now + .seconds(60)
            while seen.count < 8, let line = await watch.nextLine(timeout: deadline - ContinuousClock.now) {
                let change = try JSONValue.parse(line)
                guard case .integer(let sequence) = change["sequence"], case .string(let key) = change["key"] else {
                    Issue.record("unexpected line \(line)")
                    continue
                }
                #expect(change["kind"] == .string("set"), "\(line)")
                #expect(seen[key] == nil, "\(key) seen twice")
                seen[key] = (sequence, change["value"])
                sequences.append(sequence)
            }
            #expect(Set(seen.keys) == Set((0..<8).map { "w\($0)" }), "saw \(seen.keys.sorted())")
            for i in 0..<8 {
                #expect(seen["w\(i)"]?.value == .integer(Int64(i * 11)), "w\(i)")
            }
            #expect(sequences == Array(Int64(last + 2)...Int64(last + 9)), "in commit order, none missing: \(sequences)")

            if let result = await watch.end(with: SIGINT) {
                #expect(result.reason == .exit && result.status == 0, "\(result)")
                #expect(result.stdout.isEmpty, "more changes than written: \(result)")
            }

            let contents = try JSONValue.parse(await sandbox.ok("read", "s", "--json"))
            for i in 0..<8 { #expect(contents["w\(i)"] == .integer(Int64(i * 11))) }
        }
    }

    /// Each change is printed with the value it wrote, however many processes write the key at once
    /// and however long after it is printed: 15 writers of 1…15 to one key, replayed with `--since`,
    /// print 1…15, once each, in commit order.
    @Test func watchShowsTheValueEachChangeWrote() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "k", "-int", "0")
            let last = try await sandbox.lastChange("s")
            var writers: [RunningProcess] = []
            defer { for writer in writers { writer.stop() } }
            for i in 1...15 {
                writers.append(try sandbox.startShell(#"read go && exec "$GD" write s k -int "$1""#, [String(i)]))
            }
            for writer in writers { writer.send("go\n") }
            for (i, writer) in writers.enumerated() {
                let result = await writer.finish()
                #expect(result.succeeded && result.stderr.isEmpty, "writer \(i + 1): \(result)")
            }
            // Started after every write: everything it prints is replayed from the log.
            let watch = try sandbox.start(["watch", "s", "k", "--since", String(last)])
            defer { watch.stop() }
            var values: [Int] = []
            for sequence in last + 1...last + 15 {
                let line = try #require(await watch.nextLine(), "watch printed \(values.count) lines")
                let prefix = "\(sequence) set k "
                #expect(line.hasPrefix(prefix), "\(line)")
                values.append(try #require(Int(line.dropFirst(prefix.count)), "\(line)"))
            }
            #expect(values.sorted() == Array(1...15), "\(values)")
            // The last of them is what the key holds.
            #expect(try await sandbox.ok("read", "s", "k") == "\(values.last!)\n")
        }
    }

    /// A value over the 4 KiB the log keeps with its change is shown as the key's value when
    /// printed, and said to be so; the changes around it keep their own values.
    @Test func watchSaysWhenAChangesOwnValueWasNotKept() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "k", "a")
            let last = try await sandbox.lastChange("s")
            let large = String(repeating: "x", count: 5000)
            try await sandbox.ok("write", "s", "k", large)
            try await sandbox.ok("write", "s", "k", "b")
            try await sandbox.ok("write", "s", "k", String(repeating: "y", count: 4000))
            try await sandbox.ok("delete", "s", "k")
            let watch = try sandbox.start(["watch", "s", "--since", String(last - 1), "--json"])
            defer { watch.stop() }
            var lines: [JSONValue] = []
            for _ in 0..<5 { lines.append(try JSONValue.parse(try #require(await watch.nextLine()))) }
            #expect(lines.map { $0["kind"] } == ["set", "set", "set", "set", "removed"].map(JSONValue.string), "\(lines)")
            #expect(
                lines.map { $0["value"] } == [
                    .string("a"), nil, .string("b"), .string(String(repeating: "y", count: 4000)), nil,
                ],
                "\(lines)"
            )
            #expect(lines.map { $0["value_not_kept"] } == [nil, .bool(true), nil, nil, nil], "\(lines)")
            let text = try sandbox.start(["watch", "s", "--since", String(last)])
            defer { text.stop() }
            #expect(
                await text.nextLine() == "\(last + 1) set k (removed since) (the value now: this change's own took over 4096 bytes and is not kept)"
            )
            #expect(await text.nextLine() == "\(last + 2) set k b")
        }
    }

    /// Asked to start further back than the suite keeps changes (10,000), `watch` says so in one
    /// `reset` line, then goes on with what comes next.
    @Test func watchSaysWhenChangesAreNoLongerKept() async throws {
        try await withSandbox { (sandbox) throws in
            // One import of 10,200 keys: its sets pass the 10,000 kept and the 64 more that trimming
            // waits for.
            let keys = (0..<10_200).map { "k\($0) = \($0);" }.joined(separator: " ")
            try await sandbox.ok("import", "s", "-", stdin: Data("{ \(keys) }".utf8))
            let last = try await sandbox.lastChange("s")
            let watch = try sandbox.start(["watch", "s", "--since", "1"])
            defer { watch.stop() }
            #expect(
                await watch.nextLine() == "\(last) reset (changes before it are no longer kept, or the suite was recreated: "
                    + "read the suite again; watching goes on from here)"
            )
            try await sandbox.ok("write", "s", "after", "x")
            #expect(await watch.nextLine() == "\(last + 1) set after x")
        }
    }

    /// Increments from several processes add up: none lost.
    @Test func concurrentIncrementsLoseNothing() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "count", "-int", "0")
            var loops: [RunningProcess] = []
            defer { for loop in loops { loop.stop() } }
            for _ in 0..<4 {
                loops.append(
                    try sandbox.startShell(
                        """
                        read go || exit 1
                        i=0
                        while [ $i -lt 25 ]; do "$GD" increment s count > /dev/null || exit 1; i=$((i+1)); done
                        """
                    )
                )
            }
            for loop in loops { loop.send("go\n") }
            for loop in loops {
                let result = await loop.finish()
                #expect(result.succeeded, "\(result)")
            }
            #expect(try await sandbox.ok("read", "s", "count") == "100\n")
        }
    }

    /// A backup taken while other processes increment opens, verifies, and holds a consistent
    /// snapshot.
    @Test func backupWhileWritersRunOpensAndVerifies() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "fixed", "kept")
            let stop = sandbox.path("stop")
            var loops: [RunningProcess] = []
            defer {
                _ = FileManager.default.createFile(atPath: stop, contents: nil)
                for loop in loops { loop.stop() }
            }
            for key in ["c1", "c2"] {
                // Prints each new value; stops when the stop file appears (or after 20,000 rounds).
                loops.append(
                    try sandbox.startShell(
                        """
                        i=0
                        while [ ! -e "$1" ] && [ $i -lt 20000 ]; do "$GD" increment s "$2" || exit 1; i=$((i+1)); done
                        """,
                        [stop, key]
                    )
                )
            }
            // Wait until both writers are well under way.
            for loop in loops {
                #expect(await loop.waitForLine { Int($0).map { $0 >= 10 } ?? false }, "a writer made no progress")
            }
            let backup = sandbox.path("during.lmdb")
            let result = try await sandbox.run("backup", "s", backup)
            // The writers were still running when the backup ended.
            let stillRunning = loops.allSatisfy { $0.process.isRunning }
            _ = FileManager.default.createFile(atPath: stop, contents: nil)
            for loop in loops {
                let end = await loop.finish()
                #expect(end.succeeded && end.stderr.isEmpty, "\(end)")
            }
            var finals: [Int64] = []
            for key in ["c1", "c2"] {
                finals.append(try #require(Int64(try await sandbox.ok("read", "s", key).trimmingCharacters(in: .newlines))))
            }
            #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
            #expect(stillRunning, "a writer ended before the backup did; the test proves nothing")

            #expect(try await sandbox.ok("verify", backup) == "\(backup): 3 keys, all good\n")
            let copy = try JSONValue.parse(await sandbox.ok("read", backup, "--json"))
            #expect(copy["fixed"] == .string("kept"))
            for (index, key) in ["c1", "c2"].enumerated() {
                guard case .integer(let value) = copy[key] else {
                    Issue.record("\(key) is not an integer in the backup: \(copy)")
                    continue
                }
                #expect(value >= 10 && value <= finals[index], "\(key) = \(value), final \(finals[index])")
            }
            #expect(try await sandbox.ok("verify", "s") == "s: 3 keys, all good\n")
        }
    }
}
