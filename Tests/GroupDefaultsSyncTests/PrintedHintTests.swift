import Foundation
import TestSupport
import Testing

/// Every command the three tools print for a person to run works when pasted: found in the
/// sources by itself (a new hint is checked without being listed here), each must be written in
/// backticks, parse as its tool's command line once its placeholders are filled, and repeat the
/// location options the tool was given (`--directory`, `--data-dir`, `--config`), so that pasted as
/// is it acts on the same suites or store (`restore it with …` once restored a new empty store).
@Suite("Printed hints, pasted")
struct PrintedHintTests {
    /// The three tools and where their sources are.
    static let tools = ["groupdefaults", "groupdefaults-sync", "groupdefaults-server"]
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources")
    /// Folders whose text is not a terminal's: the benchmark's reports and the console's pages
    /// (an operator's browser, which names commands for another machine).
    static let notPrinted = ["groupdefaults-bench/", "GroupDefaultsServer/Console/"]
    /// Mentions of a command outside backticks that are not for this machine and this folder, each
    /// with why: (file, a fragment of its line).
    static let elsewhere: [(file: String, fragment: String, why: String)] = [
        ("groupdefaults-sync/Pair.swift", "\"  groupdefaults-sync configure", "the command the other device runs"),
        ("groupdefaults-sync/Share.swift", "on a device of their account: groupdefaults-sync configure", "the invited account's device runs it"),
        ("GroupDefaultsServer/Storage/Pairings.swift", "make a new one with groupdefaults-sync pair", "run on a device that has the suite"),
        ("groupdefaults-sync/SyncCommand.swift", "(from groupdefaults-sync pair on a device that has it)", "run on another device"),
        ("groupdefaults-sync/SyncCommand.swift", "(groupdefaults-sync pair on a device that has the new key", "run on another device"),
        ("GroupDefaultsServer/Storage/LMDB/BackupKey.swift", "groupdefaults-server backup key id", "a label the key's id is derived from"),
        ("GroupDefaultsServer/Storage/LMDB/LMDBBackup.swift", "static let magic = \"groupdefaults-server backup\"", "a backup file's first bytes"),
    ]

    /// One command a source line prints.
    struct Hint: CustomStringConvertible {
        var file: String
        var line: Int
        var text: String
        var description: String { "\(file):\(line): \(text)" }
    }

    /// Each tool's verbs, from its own description (`--experimental-dump-help`).
    static func verbs(of tool: String) async throws -> Set<String> {
        let dump = try await runProcess(BuiltExecutable.url(tool), ["--experimental-dump-help"])
        let json = try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any]
        let command = json?["command"] as? [String: Any]
        let subcommands = command?["subcommands"] as? [[String: Any]] ?? []
        return Set(subcommands.compactMap { $0["commandName"] as? String })
    }

    /// The string-literal lines of the sources that name `TOOL VERB`, outside doc comments, help
    /// and discussion texts: (mentions outside backticks, commands in backticks, and spans in
    /// backticks that start with a verb of a tool but not with the tool's name, as `token revoke ID`
    /// or `share` would: a command that cannot be pasted, or a verb named in prose, which is written
    /// without backticks).
    static func scan() async throws -> (bare: [Hint], backticked: [Hint], unnamed: [Hint]) {
        var verbs: [String: Set<String>] = [:]
        for tool in tools { verbs[tool] = try await Self.verbs(of: tool) }
        let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        var bare: [Hint] = []
        var backticked: [Hint] = []
        var unnamed: [Hint] = []
        let allVerbs = verbs.values.reduce(Set<String>()) { $0.union($1) }
        let mention = #/(?:^|[^\w-])(groupdefaults(?:-sync|-server)?) ([a-z][a-z-]*)/#
        for file in files.sorted() where !notPrinted.contains(where: file.hasPrefix) {
            let lines = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8).components(separatedBy: "\n")
            var inBlock = false
            for (index, line) in lines.enumerated() {
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed.components(separatedBy: "\"\"\"").count % 2 == 0 { inBlock.toggle() }
                let context = lines[max(0, index - 2)...index].joined()
                if inBlock || trimmed.hasPrefix("//") || !trimmed.contains("\"") { continue }
                if ["ArgumentHelp(", "help:", "abstract:", "discussion:", "Example:"].contains(where: context.contains) { continue }
                let spans = line.split(separator: "`", omittingEmptySubsequences: false)
                let inBackticks = spans.enumerated().filter { $0.offset % 2 == 1 && $0.offset < spans.count - 1 }.map { String($0.element) }
                for span in inBackticks where allVerbs.contains(String(span.prefix { $0 != " " })) {
                    unnamed.append(Hint(file: file, line: index + 1, text: span))
                }
                let matches = line.matches(of: mention).filter { verbs[String($0.output.1)]?.contains(String($0.output.2)) == true }
                guard !matches.isEmpty else { continue }
                for span in inBackticks where tools.contains(where: { span.hasPrefix($0 + " ") }) {
                    backticked.append(Hint(file: file, line: index + 1, text: span))
                }
                let outside = spans.enumerated().filter { $0.offset % 2 == 0 || $0.offset == spans.count - 1 }.map(\.element).joined(separator: " ")
                if outside.contains(mention), !elsewhere.contains(where: { file == $0.file && line.contains($0.fragment) }) {
                    bare.append(Hint(file: file, line: index + 1, text: trimmed))
                }
            }
        }
        return (bare, backticked, unnamed)
    }

    /// `hint` as words a shell would pass, its interpolations and placeholders given plausible
    /// values inside `sandbox`.
    static func words(of hint: String, sandbox: String) -> [String] {
        let values = [
            "SUITE": "group.hint.test", "suite": "group.hint.test", "URL": "http://127.0.0.1:9", "PATH": sandbox + "/token",
            "CODE": "code", "code": "code", "ACCOUNT": "ana", "account": "ana", "ID": "tok_000000000000", "id": "inv_000000000000",
            "FILE": sandbox + "/file", "to": sandbox + "/file", "KEY": "k", "VALUE": "1", "flag": "-int", "key": "k",
        ]
        var text = hint
        // An interpolation is named for the last name in it: `\(shellWord(to))` is `to`.
        while let range = text.range(of: #"\\\([^()]*(\([^()]*\))?[^()]*\)"#, options: .regularExpression) {
            let names = text[range].split(whereSeparator: { !$0.isLetter && !$0.isNumber })
            text.replaceSubrange(range, with: names.last.flatMap { values[String($0)] } ?? "x")
        }
        return text.split(separator: " ").dropFirst().map { word in values[String(word)] ?? String(word) }
    }

    @Test("every command printed for this machine is in backticks, and each parses as its tool's command line")
    func everyHintParses() async throws {
        let (bare, backticked, unnamed) = try await Self.scan()
        #expect(
            bare.isEmpty,
            "commands printed outside backticks (put them in backticks, or say in `elsewhere` why they are for another machine): \(bare)"
        )
        #expect(
            unnamed.isEmpty,
            "commands printed without their tool's name (start them with it; a verb only named in prose is written without backticks): \(unnamed)"
        )
        #expect(backticked.count > 20, "the scan finds the hints: \(backticked)")
        let sandbox = FileManager.default.temporaryDirectory.appendingPathComponent("gds-hints-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: sandbox, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: sandbox) }
        // A `serve` it names parses, then finds the host is not this machine's, and ends: no port taken.
        let environment = [
            "HOME": sandbox, "PATH": "/usr/bin:/bin", "XDG_DATA_HOME": sandbox + "/data", "GROUPDEFAULTS_SERVER_HOST": "192.0.2.1",
        ]
        for hint in backticked {
            let tool = String(hint.text.prefix { $0 != " " })
            let arguments = Self.words(of: hint.text, sandbox: sandbox)
            // A command still running after a few seconds (a server) got past its parser.
            let result = try await runProcess(BuiltExecutable.url(tool), arguments, stdin: Data(), environment: environment, timeLimit: .seconds(5))
            let refused =
                result.stderr.contains("; see `\(tool) help`") || result.stderr.contains(": unknown option ")
                || result.stderr.contains(": unknown command ")
            #expect(!refused, "\(hint) does not parse as \(arguments): \(result.stderr)")
        }
    }

    @Test("a hint printed after --data-dir names that store: pasted as is, it lists its accounts and makes no other store")
    func serverHintRepeatsTheStore() async throws {
        let home = ServerTool.temporaryDirectory("gds-hint-home")
        let directory = ServerTool.temporaryDirectory("gds-hint-store")
        _ = try await ServerTool.createToken(storage: ["--data-dir", directory], account: "bob")
        let environment = ["HOME": home, "PATH": "/usr/bin:/bin"]
        let failed = try await runProcess(ServerTool.executable, ["accounts", "export", "nobody", "--data-dir", directory], environment: environment)
        #expect(failed.status == 1)
        let hint = try #require(failed.stderr.firstMatch(of: #/`(groupdefaults-server [^`]+)`/#)?.output.1, "\(failed.stderr)")
        #expect(hint == "groupdefaults-server accounts list --data-dir \(directory)")
        let pasted = try await runProcess(
            URL(fileURLWithPath: "/bin/sh"),
            ["-c", String(hint)],
            environment: environment.merging(["PATH": ServerTool.executable.deletingLastPathComponent().path + ":/usr/bin:/bin"]) { $1 }
        )
        #expect(pasted.status == 0 && pasted.stdout.hasPrefix("bob\t"), "\(pasted)")
        #expect(!FileManager.default.fileExists(atPath: home + "/.local"), "no store made in the default folder")
    }

    @Test("a hint printed after --directory names that folder: pasted with the server and token filled in, it configures that suite")
    func syncHintRepeatsTheFolder() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.hint.folder")
            defer { device.remove() }
            #expect(try await device.defaultsTool(["write", device.suite, "sound", "ring.caf"]).status == 0)
            let status = try await device.sync("sync")
            let hint = try #require(status.stderr.firstMatch(of: #/`(groupdefaults-sync configure [^`]+)`/#)?.output.1, "\(status.stderr)")
            #expect(hint.contains("--directory \(device.directory.path) "), "\(hint)")
            let token = try device.tokenFile(server.token)
            let filled = String(hint).replacingOccurrences(of: "URL", with: server.url.absoluteString).replacingOccurrences(of: "PATH", with: token)
            let path = ToolDevice.syncExecutable.deletingLastPathComponent().path + ":/usr/bin:/bin"
            let home = device.directory.appendingPathComponent("home").path
            let pasted = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", filled], environment: ["PATH": path, "HOME": home])
            #expect(pasted.status == 0, "\(filled): \(pasted)")
            #expect(try await device.sync("sync").status == 0)
            #expect(try await server.snapshot(device.suite).entries["sound"] != nil, "the folder's suite was configured and synced")
        }
    }

    @Test("token create's, write's and rename's hints name their tool and the location given: pasted as is, each does what it says")
    func hintsNameTheirToolAndLocation() async throws {
        let store = ServerTool.temporaryDirectory("gds-hint-revoke")
        defer { try? FileManager.default.removeItem(atPath: store) }
        let made = try await runProcess(ServerTool.executable, ["token", "create", "--create", "--data-dir", store, "--account", "ana"])
        #expect(made.status == 0, "\(made)")
        let revoke = try #require(made.stderr.firstMatch(of: #/`([^`]+)`/#)?.output.1, "\(made.stderr)")
        #expect(revoke.hasPrefix("groupdefaults-server token revoke --data-dir \(store) tok_"), "\(revoke)")
        let path = ServerTool.executable.deletingLastPathComponent().path + ":/usr/bin:/bin"
        let revoked = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", String(revoke)], environment: ["PATH": path, "HOME": store])
        #expect(revoked.status == 0, "\(revoke): \(revoked)")
        let listed = try await runProcess(ServerTool.executable, ["token", "list", "--data-dir", store])
        #expect(listed.stdout.contains("revoked"), "the token of that store was revoked: \(listed)")

        let folder = ServerTool.temporaryDirectory("gds-hint-suites")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let tool = BuiltExecutable.url("groupdefaults")
        func defaults(_ arguments: [String]) async throws -> ProcessResult {
            try await runProcess(tool, [arguments[0], "--directory", folder] + arguments.dropFirst(), environment: ["PATH": path, "HOME": folder])
        }
        #expect(try await defaults(["write", "family", "doorbell", "ding"]).status == 0)
        #expect(try await defaults(["write", "family", "big", "bong"]).status == 0)
        let forgotten = try await defaults(["write", "family", "badge"])
        #expect(forgotten.status == 1)
        #expect(forgotten.stderr.contains("`groupdefaults write --directory \(folder) family KEY VALUE` writes a key"), "\(forgotten.stderr)")
        #expect(forgotten.stderr.contains("`groupdefaults write --directory \(folder) family '{ key = value; }'` replaces"), "\(forgotten.stderr)")
        let taken = try await defaults(["rename", "family", "doorbell", "big"])
        #expect(taken.status == 1)
        let force = try #require(taken.stderr.firstMatch(of: #/`([^`]+)`/#)?.output.1, "\(taken.stderr)")
        #expect(force == "groupdefaults rename --directory \(folder) --force family doorbell big")
        let renamed = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", String(force)], environment: ["PATH": path, "HOME": folder])
        #expect(renamed.status == 0, "\(force): \(renamed)")
        #expect(try await defaults(["read", "family", "big"]).stdout == "ding\n")
    }
}
