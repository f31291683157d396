import Foundation
import Glibc
package import Testing

/// A command a tool must refuse, run in a fresh directory tree of its own: `$ROOT` in an argument
/// stands for the tree, whose `files/` holds the inputs (`malformed.plist`, a `token` file of mode
/// 0600, `bad.conf`, and `huge.plist` where named), and where `HOME` (`home/`) and the XDG
/// folders (`data/`, `config/`, `state/`, `cache/`) point.
package struct RefusedCommand: Sendable, CustomTestStringConvertible {
    /// The executable's name.
    package var tool: String
    /// Its arguments, `$ROOT` replaced by the tree's path.
    package var arguments: [String]
    /// What the one line on stderr must say.
    package var mentioning: [String]

    /// `tool ARGUMENTS…`, refused with a line mentioning each of `mentioning`.
    package init(_ tool: String, _ arguments: [String], mentioning: [String] = []) {
        self.tool = tool
        self.arguments = arguments
        self.mentioning = mentioning
    }

    /// The command line, for test names.
    package var testDescription: String { ([tool] + arguments).joined(separator: " ") }

    /// Runs the command in a fresh tree and expects it refused (a non-zero exit, not a signal, one
    /// line on stderr naming what is wrong, no stack trace) and the tree exactly as it was: no
    /// file, folder or lock file made, none changed (contents, size, mode).
    package func expectRefusedLeavingNothing(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        try await withTemporaryDirectory(prefix: "refused") { root in
            let files = root.appendingPathComponent("files")
            try FileManager.default.createDirectory(at: root.appendingPathComponent("home"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: files, withIntermediateDirectories: true)
            try Data("{ a = ".utf8).write(to: files.appendingPathComponent("malformed.plist"))
            try Data("GROUPDEFAULTS_SERVER_PORT = nope\n".utf8).write(to: files.appendingPathComponent("bad.conf"))
            try Data("gdt_0123456789\n".utf8).write(to: files.appendingPathComponent("token"))
            _ = chmod(files.appendingPathComponent("token").path, 0o600)
            if arguments.contains("$ROOT/files/huge.plist") {  // over the 4 MiB a value may take
                try Data(("{ a = \"" + String(repeating: "x", count: 4_300_000) + "\"; }").utf8)
                    .write(to: files.appendingPathComponent("huge.plist"))
            }
            let environment = [
                "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin",
                "HOME": root.appendingPathComponent("home").path,
                "XDG_DATA_HOME": root.appendingPathComponent("data").path,
                "XDG_CONFIG_HOME": root.appendingPathComponent("config").path,
                "XDG_STATE_HOME": root.appendingPathComponent("state").path,
                "XDG_CACHE_HOME": root.appendingPathComponent("cache").path,
            ]
            let before = try Self.snapshot(root)
            let line = arguments.map { $0.replacingOccurrences(of: "$ROOT", with: root.path) }
            let result = try await runProcess(BuiltExecutable.url(tool), line, environment: environment, timeLimit: .seconds(60))
            let name = testDescription
            #expect(result.reason == .exit && result.status != 0, "\(name): \(result)", sourceLocation: sourceLocation)
            let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines.count == 2 && !lines[0].isEmpty && lines[1].isEmpty, "\(name): not one line: \(result)", sourceLocation: sourceLocation)
            for marker in ["Fatal error", "Backtrace", "Stack dump"] {
                #expect(!result.stderr.contains(marker), "\(name): \(result)", sourceLocation: sourceLocation)
            }
            for fragment in mentioning.map({ $0.replacingOccurrences(of: "$ROOT", with: root.path) }) {
                #expect(result.stderr.contains(fragment), "\(name): should mention \(fragment): \(result)", sourceLocation: sourceLocation)
            }
            let after = try Self.snapshot(root)
            let made = after.keys.filter { before[$0] == nil }.sorted()
            let changed = before.keys.filter { after[$0] != nil && after[$0] != before[$0] }.sorted()
            let removed = before.keys.filter { after[$0] == nil }.sorted()
            #expect(
                made.isEmpty && changed.isEmpty && removed.isEmpty,
                "\(name): left \(made), changed \(changed), removed \(removed)",
                sourceLocation: sourceLocation
            )
        }
    }

    /// The commands of `tool` (from its own description: a new one is found) that no case of
    /// `cases` runs, as `token create`.
    package static func commandsWithoutACase(_ cases: [RefusedCommand], tool: String) async throws -> [String] {
        let commands = try await HelpCheck.commands(of: tool).filter { !$0.isGroup && !$0.path.isEmpty }
        return commands.map(\.path).filter { path in
            !cases.contains { $0.tool == tool && Array($0.arguments.prefix(path.count)) == path }
        }.map { $0.joined(separator: " ") }
    }

    /// A path's kind and mode, size and bytes.
    struct Entry: Equatable, CustomStringConvertible {
        var mode: mode_t
        var size: Int
        var bytes: Data?
        var description: String { "mode \(String(mode, radix: 8)), \(size) bytes" }
    }

    /// Every path under `root` (hidden ones too) with its kind, mode and bytes.
    static func snapshot(_ root: URL) throws -> [String: Entry] {
        var entries: [String: Entry] = [:]
        let manager = FileManager.default
        guard let walker = manager.enumerator(atPath: root.path) else { return entries }
        while let relative = walker.nextObject() as? String {
            let path = root.appendingPathComponent(relative).path
            var status = stat()
            guard lstat(path, &status) == 0 else { continue }
            let isFile = status.st_mode & S_IFMT == S_IFREG
            entries[relative] = Entry(
                mode: status.st_mode,
                size: isFile ? Int(status.st_size) : 0,
                bytes: isFile ? manager.contents(atPath: path) : nil
            )
        }
        return entries
    }
}
