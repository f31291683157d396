// A small executable the tests run as separate processes, to check multi-process claims with real
// processes. Usage: GroupDefaultsTestHelper COMMAND DIRECTORY SUITE [ARGS…]
// Exit status: 0 done, 2 usage, 3 the store reported an error (printed on stderr), 4 the store
// reported an error that the command expects and prints as "error CODE" on stdout (see `stop`).
//
// Options any command accepts after its arguments: --initial-map-size N, --maximum-map-size N,
// --maximum-readers N, --fsync (durability .fsyncEveryCommit), --durability-interval-ms N,
// --log-retention N.
import Foundation
import Glibc
import GroupDefaults

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 3 else {
    FileHandle.standardError.write(Data("usage: GroupDefaultsTestHelper COMMAND DIRECTORY SUITE [ARGS…]\n".utf8))
    exit(2)
}
let (command, directory, suite) = (arguments[0], URL(fileURLWithPath: arguments[1]), arguments[2])
let rest = Array(arguments.dropFirst(3))

/// Writes a line to stdout at once (stdout is a pipe, and `print` would buffer it).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(3)
}

/// Reports a store error the command expects: "error CODE" on stdout, the message on stderr, exit 4.
func stop(_ error: any Error) -> Never {
    guard let error = error as? SharedDefaultsError else { fail("\(error)") }
    say("error \(error.code)")
    FileHandle.standardError.write(Data((error.description + "\n").utf8))
    exit(4)
}

/// The value of option `name` (`--name VALUE`) as an integer, if given.
func option(_ name: String) -> Int? {
    guard let index = rest.firstIndex(of: name), index + 1 < rest.count else { return nil }
    return Int(rest[index + 1])
}

/// The configuration the options ask for.
var configuration: SharedDefaults.Configuration {
    var configuration = SharedDefaults.Configuration()
    if let size = option("--initial-map-size") { configuration.initialMapSize = size }
    if let retention = option("--log-retention") { configuration.logRetention = retention }
    if let size = option("--maximum-map-size") { configuration.maximumMapSize = size }
    if let readers = option("--maximum-readers") { configuration.maximumReaders = readers }
    if rest.contains("--fsync") { configuration.durability = .fsyncEveryCommit }
    if let milliseconds = option("--durability-interval-ms") { configuration.durabilityInterval = .milliseconds(milliseconds) }
    return configuration
}

/// The value `fill` and `churn` store under `key`: the key, a colon, and padding up to `size` bytes.
func filler(_ key: String, size: Int) -> String {
    key + ":" + String(repeating: "x", count: max(0, size - key.utf8.count - 1))
}

/// Reads every key whose name starts with one of `prefixes` and checks it holds `filler(key, size)`;
/// returns how many were read, or fails naming a wrong one.
func checkFilled(_ defaults: SharedDefaults, prefixes: [String], size: Int) throws -> Int {
    try defaults.read { tx in
        var count = 0
        for key in try tx.keys where prefixes.contains(where: { key.hasPrefix($0 + "-") }) {
            guard try tx.value(forKey: key) == .string(filler(key, size: size)) else { fail("wrong value under \(key)") }
            count += 1
        }
        return count
    }
}

/// The exit status or signal in a `waitpid` status, in words.
func describe(waitStatus status: Int32) -> String {
    status & 0x7f == 0 ? "exit \((status >> 8) & 0xff)" : "signal \(status & 0x7f)"
}

/// Blocks until a line arrives on stdin, so that several processes can be released at one moment.
func waitForGo() {
    if rest.contains("--wait-for-go") { _ = readLine() }
}

do {
    switch command {
    case "set":  // set KEY VALUE
        waitForGo()
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        try defaults.write { try $0.set(.string(rest[1]), forKey: rest[0]) }

    case "migrate":  // migrate: runs `tutorialMigrations` (below) and prints "applied V,V…" (empty when none ran)
        waitForGo()
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        let applied = try defaults.migrate(tutorialMigrations)
        say("applied " + applied.map(String.init).joined(separator: ","))

    case "remove":  // remove KEY
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        try defaults.write { try $0.removeValue(forKey: rest[0]) }

    case "get":  // get KEY → prints the string value or "(nil)"
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        say(defaults.string(forKey: rest[0]) ?? "(nil)")

    case "increment":  // increment KEY COUNT: COUNT atomic increments
        waitForGo()
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        for _ in 0..<Int(rest[1])! {
            try defaults.update(rest[0]) { .integer(($0?.intValue ?? 0) + 1) }
        }

    case "write-keys":  // write-keys PREFIX COUNT: opens (creating) the suite and writes PREFIX-i, one commit each
        waitForGo()
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        for i in 0..<Int(rest[1])! {
            try defaults.write { try $0.set(.integer(i), forKey: "\(rest[0])-\(i)") }
        }

    case "write-loop":  // write-loop PREFIX: sets PREFIX.i = i forever, one commit each, and after each prints
        // "PREFIX.i NANOSECONDS" (the wall clock once the set returned): the power-cut simulator's writer
        // that never exits, whose writes reach the disk only through timed durability points.
        let defaults = try SharedDefaults(suiteName: suite, directory: directory, configuration: configuration)
        var i = 0
        while true {
            i += 1
            let key = "\(rest[0]).\(i)"
            try defaults.write { try $0.set(.integer(i), forKey: key) }
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            say("\(key) \(Int(now.tv_sec) * 1_000_000_000 + now.tv_nsec)")
        }

    case "stream":  // stream: commits forever; each commit sets a, b, c to the same new counter value
        let defaults = try SharedDefaults(suiteName: suite, directory: directory, configuration: configuration)
        var n = try defaults.read { try $0.value(forKey: "a")?.intValue ?? 0 }
        let start = n
        while true {
            n += 1
            let value = n
            try defaults.write { tx in
                try tx.set(.integer(value), forKey: "a")
                try tx.set(.string(String(repeating: "x", count: value % 3000)), forKey: "padding")
                try tx.set(.integer(value), forKey: "b")
                try tx.set(.integer(value), forKey: "c")
            }
            if value == start + 100 { say("streaming") }
        }

    case "check-consistent":  // after a crash: a, b, c equal; a new write works
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        let (a, b, c) = try defaults.read { tx in
            (try tx.value(forKey: "a")?.intValue, try tx.value(forKey: "b")?.intValue, try tx.value(forKey: "c")?.intValue)
        }
        guard let a, a == b, b == c else { fail("inconsistent: a=\(String(describing: a)) b=\(String(describing: b)) c=\(String(describing: c))") }
        try defaults.write { try $0.set(.integer(a + 1), forKey: "after-crash") }
        guard defaults.integer(forKey: "after-crash") == a + 1 else { fail("write after crash not visible") }
        say(String(a))

    case "read-all":  // opens and reads every key; prints "ok KEYS DAMAGED"; exit 3 if the open fails
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        var damaged = 0
        var total = 0
        try defaults.read { tx in
            for key in try tx.keys {
                total += 1
                do { _ = try tx.value(forKey: key) } catch { damaged += 1 }
            }
        }
        say("ok \(total) \(damaged)")

    case "observe":  // observe COUNT [SINCE]: prints "ready", then COUNT changes, one per line, then exits
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        let feed = try defaults.changeFeed(since: rest.count > 1 ? UInt64(rest[1])! : nil)
        say("ready")
        var lines: [String] = []
        for _ in 0..<Int(rest[0])! {
            guard let change = try feed.next(timeout: .seconds(60)) else { fail("timed out after \(lines.count) changes") }
            let value = change.value.map { "\($0.intValue ?? -1)" } ?? "-"
            lines.append("\(change.sequence) \(change.kind.rawValue) \(change.key) \(value)")
        }
        say(lines.joined(separator: "\n"))

    case "open":  // open: opens (creating) the suite and prints "opened"; a store error is "error CODE" (exit 4)
        do {
            _ = try SharedDefaults(suiteName: suite, directory: directory, configuration: configuration)
        } catch {
            stop(error)
        }
        say("opened")

    case "fill":  // fill PREFIX COUNT SIZE [--hold]: writes PREFIX-i = filler (SIZE bytes), one commit each,
        // until COUNT are written or the store fails; prints "written N" (PREFIX-0 ..< PREFIX-N are stored),
        // then on failure "error CODE" (exit 4). With --hold it then prints "holding", waits for a line on
        // stdin, and prints "read N" after checking every key of every prefix in --check P1,P2,… (default PREFIX).
        let (prefix, count, size) = (rest[0], Int(rest[1])!, Int(rest[2])!)
        let defaults = try SharedDefaults(suiteName: suite, directory: directory, configuration: configuration)
        var written = 0
        var failure: (any Error)?
        while written < count {
            let key = "\(prefix)-\(written)"
            do {
                try defaults.write { try $0.set(.string(filler(key, size: size)), forKey: key) }
            } catch {
                failure = error
                break
            }
            written += 1
        }
        say("written \(written)")
        if rest.contains("--hold") {
            if let failure { say("failed \((failure as? SharedDefaultsError)?.code.rawValue ?? "\(failure)")") }
            say("holding")
            _ = readLine()
            let checkIndex = rest.firstIndex(of: "--check")
            let prefixes = checkIndex.map { rest[$0 + 1].split(separator: ",").map(String.init) } ?? [prefix]
            say("read \(try checkFilled(defaults, prefixes: prefixes, size: size))")
        } else if let failure {
            stop(failure)
        }

    case "churn":  // churn PREFIX COUNT SIZE OTHER: writes PREFIX-i (filler of SIZE bytes), one commit each;
        // after each write reads its own key back, and every 10 writes checks every OTHER-j stored so far;
        // prints "ok N" with the number of OTHER keys seen last
        waitForGo()
        let (prefix, count, size, other) = (rest[0], Int(rest[1])!, Int(rest[2])!, rest[3])
        let defaults = try SharedDefaults(suiteName: suite, directory: directory, configuration: configuration)
        var seen = 0
        for i in 0..<count {
            let key = "\(prefix)-\(i)"
            try defaults.write { try $0.set(.string(filler(key, size: size)), forKey: key) }
            guard try defaults.read({ try $0.value(forKey: key) }) == .string(filler(key, size: size)) else {
                fail("\(key) reads back wrong")
            }
            if i % 10 == 9 || i == count - 1 {
                let now = try checkFilled(defaults, prefixes: [other], size: size)
                guard now >= seen else { fail("\(other) keys went from \(seen) to \(now)") }
                seen = now
            }
        }
        say("ok \(seen)")

    case "watch":  // watch [--expect-no-inotify]: prints "ready", then "change KEY VALUE" for each change as it
        // arrives, woken only by the store's signal (no timeout, no polling here); when stdin closes it stops
        // observing (giving up its watcher slot), prints "stopped" and exits
        if rest.contains("--expect-no-inotify") {
            let probe = inotify_init1(Int32(IN_CLOEXEC))
            guard probe < 0 else { fail("inotify works in this process") }
            say("inotify fails: errno \(errno)")
        }
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        var subscription: SharedDefaults.ChangeFeed? = try defaults.changeFeed()  // watching from now on
        let changes = defaults.changes()
        let ended = DispatchSemaphore(value: 0)
        let task = Task.detached {
            for await change in changes {
                say("change \(change.key) \(change.value?.stringValue ?? "-")")
            }
            ended.signal()
        }
        say("ready")
        while readLine() != nil {}
        task.cancel()
        ended.wait()
        subscription = nil
        _ = subscription
        say("stopped")

    case "fork":  // fork: writes, forks; the child checks that the inherited handle refuses (usedAfterFork)
        // and that a new handle works, and exits 0 or a status naming the failed check; the parent prints
        // "child exit N" (or "child signal N"), then writes and reads again and prints "parent ok"
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
        try defaults.write { try $0.set(.string("parent"), forKey: "before-fork") }
        let pid = fork()
        if pid == 0 {
            func check(_ ok: Bool, _ status: Int32, _ what: String) {
                guard !ok else { return }
                let line = "child: \(what)\n"
                _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
                _exit(status)
            }
            do {
                try defaults.write { try $0.set(.string("child"), forKey: "inherited") }
                check(false, 10, "write on the inherited handle did not throw")
            } catch {
                check((error as? SharedDefaultsError)?.code == .usedAfterFork, 11, "write threw \(error)")
            }
            do {
                _ = try defaults.read { try $0.value(forKey: "before-fork") }
                check(false, 12, "read on the inherited handle did not throw")
            } catch {
                check((error as? SharedDefaultsError)?.code == .usedAfterFork, 13, "read threw \(error)")
            }
            defaults.set("child", forKey: "inherited-set")
            check(defaults.lastError?.code == .usedAfterFork, 14, "set reported \(String(describing: defaults.lastError))")
            do {
                let fresh = try SharedDefaults(suiteName: suite, directory: directory)
                check(fresh.string(forKey: "before-fork") == "parent", 15, "the new handle does not read the parent's write")
                try fresh.write { try $0.set(.string("written by the child"), forKey: "child") }
                check(fresh.string(forKey: "child") == "written by the child", 16, "the new handle does not read its write")
            } catch {
                check(false, 17, "the new handle failed: \(error)")
            }
            _exit(0)
        }
        guard pid > 0 else { fail("fork failed: errno \(errno)") }
        var status: Int32 = 0
        guard waitpid(pid, &status, 0) == pid else { fail("waitpid failed: errno \(errno)") }
        say("child \(describe(waitStatus: status))")
        try defaults.write { try $0.set(.string("after"), forKey: "parent-after-fork") }
        guard defaults.string(forKey: "child") == "written by the child" else { fail("the parent does not see the child's write") }
        guard defaults.string(forKey: "parent-after-fork") == "after" else { fail("the parent does not read its write") }
        guard defaults.string(forKey: "inherited") == nil, defaults.string(forKey: "inherited-set") == nil else {
            fail("a write through the inherited handle reached the file")
        }
        say("parent ok")

    case "differential":  // differential SEED COUNT: Foundation's UserDefaults beside the suite (see `Differential`)
        var differential = try Differential(directory: directory, seed: UInt64(rest[0]) ?? 1)
        differential.run(count: Int(rest[1]) ?? 1000)

    case "differential-search":  // differential-search SEED COUNT [-key value…]: the search list beside Foundation's (see `SearchDifferential`)
        var differential = try SearchDifferential(directory: directory, seed: UInt64(rest[0]) ?? 1)
        differential.run(count: Int(rest[1]) ?? 1000)

    case "differential-stated-search":  // differential-stated-search: the documented differences of the search list
        SearchDifferential.statedDifferences(directory: directory)

    case "differential-stated":  // differential-stated: the documented differences that need Foundation's persistent domain
        guard let foundation = UserDefaults(suiteName: Differential.suite) else { fail("no UserDefaults") }
        let shared = try SharedDefaults(suiteName: "stated", directory: directory)
        func row(_ name: String, _ set: (Any, String) -> Void, _ setURL: (URL, String) -> Void, _ string: (String) -> String?) {
            set(1, "n")
            set(1.0, "n")
            setURL(URL(string: "https://example.com/x")!, "u")
            say("\(name) set(1.0) over 1: string \(string("n") ?? "nil"), https URL: string \(string("u") ?? "nil")")
        }
        row("foundation", { foundation.set($0, forKey: $1) }, { foundation.set($0, forKey: $1) }, foundation.string(forKey:))
        row("shared", { shared.set($0, forKey: $1) }, { shared.set($0, forKey: $1) }, shared.string(forKey:))

    default:
        FileHandle.standardError.write(Data("unknown command \(command)\n".utf8))
        exit(2)
    }
} catch {
    fail("\(error)")
}

/// The migrations `migrate` runs: a rename, a step that counts how often it ran (it must run once
/// however many processes migrate at once; it lingers in its transaction to make overlap likely),
/// and a change of a value's type.
var tutorialMigrations: [SharedDefaults.Migration] {
    [
        SharedDefaults.Migration(1, "sound moves under notification.") { tx in try tx.renameKey("sound", to: "notification.sound") },
        SharedDefaults.Migration(2, "count the runs") { tx in
            var runs = 0
            if case .integer(let count)? = try tx.value(forKey: "migration.runs") { runs = count }
            usleep(20_000)
            try tx.set(.integer(runs + 1), forKey: "migration.runs")
        },
        SharedDefaults.Migration(3, "volume becomes a percentage") { tx in
            if case .double(let volume)? = try tx.value(forKey: "volume") {
                try tx.set(.integer(Int((volume * 100).rounded())), forKey: "volume")
            }
        },
    ]
}
