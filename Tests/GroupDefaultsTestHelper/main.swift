// A small executable the tests run as separate processes, to check multi-process claims with real
// processes. Usage: GroupDefaultsTestHelper COMMAND DIRECTORY SUITE [ARGS…]
// Exit status: 0 done, 2 usage, 3 the store reported an error (printed on stderr).
import Foundation
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

    case "stream":  // stream: commits forever; each commit sets a, b, c to the same new counter value
        let defaults = try SharedDefaults(suiteName: suite, directory: directory)
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

    default:
        FileHandle.standardError.write(Data("unknown command \(command)\n".utf8))
        exit(2)
    }
} catch {
    fail("\(error)")
}
