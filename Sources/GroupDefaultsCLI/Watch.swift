import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire
import PropertyListFormats

extension GroupDefaultsCommand {
    struct Watch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Follow a suite's changes, from every process, as they happen.",
            discussion: """
                Prints one line per change: sequence number, kind (set, removed, cleared, reset, restored), \
                key and the value that change wrote (also when replayed with --since); with --json, one JSON \
                object per line. A value that takes over 4096 bytes encoded (a string of about 4090 \
                bytes or more) is not kept with its change: for one, the key's value at the time of \
                printing is shown, and said to be so ("value_not_kept" in JSON). A change sync applied \
                from another device says so ("remote"), and so does one that replaced a local value \
                kept in the conflict journal ("conflict"). A "reset" line says that changes were \
                missed (the suite keeps its last 10,000): read the suite again; a "restored" line, that \
                after an operating-system crash or power loss the suite was put back to its last \
                durability point and the changes after it are gone: read it again too. Once it follows the \
                suite it says so on stderr ("watching SUITE after change N"), so that a script can \
                start it and then make changes. A change of another domain that changes what a key reads \
                (a managed settings file, the global domain) ends with where it was made, "(managed by FILE)" \
                or "(global domain)" ("domain" in JSON), and shows what the key reads now; it is numbered \
                with the suite's last change, and --since does not replay it. A key pinned or unpinned \
                for a suite's members (on a member's device) shows as a change of its value as it is. \
                Ends on SIGINT or SIGTERM, or after --count changes.

                Examples:
                  groupdefaults watch group.com.example.chat sound --json
                  groupdefaults watch group.com.example.chat sound --count 1   # the next change
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "Only these keys.") var keys: [String] = []
        @Option(name: .long, help: "Start after this sequence number, replaying what the suite retains.") var since: UInt64?
        @Flag(name: .long, help: "Print JSON lines.") var json = false
        @Option(name: .long, help: "End after printing this many changes.") var count: Int?

        func validate() throws {
            if let count, count < 1 { throw ValidationError("--count must be 1 or more, not \(count)") }
        }

        func run() throws {
            try perform {
                let defaults = try options.open(suite)
                // Past the end, the log would answer with a reset at once: a typo, or another suite's number.
                if let since, case let last = try defaults.lastSequence, since > last {
                    throw CommandFailure("--since \(since) is past \(suite)'s last change, \(last)")
                }
                let feed = try defaults.changeFeed(forKeys: keys.isEmpty ? nil : Set(keys), since: since)
                // Output is written line by line, unbuffered: ending at a signal loses nothing.
                exitOnInterruptOrTermination()
                writeAll(Data("watching \(printable(suite)) after change \(feed.cursor)\n".utf8), to: STDERR_FILENO)
                var printed = 0
                while printed != count, let change = try feed.next() {
                    output(json ? Self.json(change) : Self.text(change))
                    printed += 1
                }
            }
        }

        static func text(_ change: SharedDefaults.Change) -> String {
            let line =
                switch change.kind {
                case .set where change.isValueNotKept:
                    "\(change.sequence) set \(printable(change.key)) \(change.value.map(ValueText.oneLine) ?? "(removed since)")"
                        + " (the value now: this change's own took over \(SharedDefaults.Change.keptValueLimit) bytes and is not kept)"
                case .set: "\(change.sequence) set \(printable(change.key)) \(change.value.map(ValueText.oneLine) ?? "")"
                case .removed: "\(change.sequence) removed \(printable(change.key))"
                case .cleared: "\(change.sequence) cleared"
                case .restored:
                    "\(change.sequence) restored (after an operating-system crash or power loss the suite was put back to its last "
                        + "durability point: changes after it are gone; read the suite again)"
                case .reset:
                    "\(change.sequence) reset (changes before it are no longer kept, or the suite was recreated: read the suite again; "
                        + "watching goes on from here)"
                }
            if change.domain != .suite { return line + " (\(printable("\(change.domain)")))" }
            guard change.isRemote else { return line }
            let account = if case .anotherAccount(let account, _) = change.source { " of account \(printable(account))" } else { "" }
            return line + " (remote, from device \(change.origin)\(account)"
                + (change.isConflict ? "; it replaced a local value kept in the conflict journal)" : ")")
        }

        static func json(_ change: SharedDefaults.Change) -> String {
            var object: [String: PropertyListValue] = [
                "sequence": .integer(Int(change.sequence)), "kind": .string(change.kind.rawValue),
                "origin": .string(String(change.origin)),
            ]
            if !change.key.isEmpty { object["key"] = .string(change.key) }
            if let value = change.value { object["value"] = value }
            if change.isValueNotKept { object["value_not_kept"] = .bool(true) }
            if change.isRemote { object["remote"] = .bool(true) }
            if case .anotherAccount(let account, _) = change.source { object["account"] = .string(account) }
            if change.isConflict { object["conflict"] = .bool(true) }
            if change.domain != .suite { object["domain"] = .string("\(change.domain)") }
            return oneLineJSON(.dictionary(object))
        }

        /// `value` as plain JSON on one line.
        static func oneLineJSON(_ value: PropertyListValue) -> String {
            value.plainJSON().split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        }
    }
}
