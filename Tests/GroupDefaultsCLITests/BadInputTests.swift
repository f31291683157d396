import Foundation
import TestSupport
import Testing

/// A command that must fail: `$FILES` in an argument stands for the sandbox's `files/` folder.
struct BadInput: Sendable, CustomTestStringConvertible {
    var arguments: [String]
    var mentioning: [String]
    var stdin: String?

    init(_ arguments: [String], mentioning: [String] = [], stdin: String? = nil) {
        self.arguments = arguments
        self.mentioning = mentioning
        self.stdin = stdin
    }

    var testDescription: String {
        arguments.map { $0.count > 40 ? String($0.prefix(12)) + "…(\($0.utf8.count) bytes)" : $0 }.joined(separator: " ")
    }
}

/// Bad input: one line on stderr that says what was wrong, a non-zero status, no stack trace, and
/// nothing already stored changed.
@Suite struct BadInputTests {
    static let longKey = String(repeating: "k", count: 600)

    static let cases: [BadInput] = [
        BadInput(["write", "s", "n", "-int", "abc"], mentioning: ["-int", "abc"]),
        BadInput(["write", "s", "n", "-integer", "1.5"], mentioning: ["1.5"]),
        BadInput(["write", "s", "n", "-int", "99999999999999999999"], mentioning: ["99999999999999999999"]),
        BadInput(["write", "s", "f", "-float", "x"], mentioning: ["-float", "'x'"]),
        BadInput(["write", "s", "b", "-bool", "maybe"], mentioning: ["maybe"]),
        BadInput(["write", "s", "d", "-data", "0g"], mentioning: ["0g"]),
        BadInput(["write", "s", "d", "-data", "abc"], mentioning: ["abc"]),
        BadInput(["write", "s", "t", "-date", "notadate"], mentioning: ["notadate"]),
        BadInput(["write", "s", "t", "-date", "2026-13-45"], mentioning: ["2026-13-45"]),
        BadInput(["write", "s", "x", "-wat", "3"], mentioning: ["-wat"]),
        BadInput(["write", "s", "k", "-int"], mentioning: ["-int"]),
        BadInput(["write", "s", "k", "-int", "1", "extra"], mentioning: ["extra"]),
        BadInput(["write", "s", "k", "-dict", "a"], mentioning: ["'a'"]),
        BadInput(["write", "s"], mentioning: ["write --help"]),
        BadInput(["write", "s", "{ a = "], mentioning: ["line 1"]),
        BadInput(["write", "s", "{ a = b; a = c; }"], mentioning: ["duplicate"]),
        BadInput(["write", "s", "(a, b)"], mentioning: ["dictionary"]),
        BadInput(["write", "s", "j", "--json", "{bad"], mentioning: ["--json"]),
        BadInput(["write", "s", "j", "--json", "null"], mentioning: ["null"]),
        BadInput(["write", "s", "j", "--json", #"{"integer":"x"}"#], mentioning: ["integer"]),
        BadInput(["import", "s", "$FILES/malformed.plist"], mentioning: ["malformed.plist"]),
        BadInput(["import", "s", "$FILES/array.plist"], mentioning: ["array", "dictionary"]),
        BadInput(["import", "s", "$FILES/junk.bin"], mentioning: ["junk.bin"]),
        BadInput(["import", "s", "$FILES/bad.xml"], mentioning: ["XML"]),
        BadInput(["import", "s", "$FILES/bad-typed.json"], mentioning: ["integer"]),
        BadInput(["import", "s", "$FILES/missing.plist"], mentioning: ["missing.plist"]),
        BadInput(["import", "s", "-"], mentioning: ["stdin"], stdin: "{ a = "),
        BadInput(["import", "s", "-"], mentioning: ["stdin"], stdin: ""),
        BadInput(["write", "a/b", "k", "v"], mentioning: ["'/'"]),
        BadInput(["write", "..", "k", "v"], mentioning: [".."]),
        BadInput(["write", "../s", "k", "v"], mentioning: ["'/'"]),
        BadInput(["write", "x/../s", "k", "v"], mentioning: ["'/'"]),
        BadInput(["import", "..", "$FILES/good.plist"], mentioning: [".."]),
        BadInput(["read", "../s"], mentioning: ["'/'"]),
        BadInput(["read", "a/b", "k"], mentioning: ["'/'"]),
        BadInput(["increment", "../s", "k"], mentioning: ["'/'"]),
        BadInput(["write", "s", longKey, "v"], mentioning: ["600 bytes", "511"]),
        BadInput(["write", "s", longKey, "-int", "1"], mentioning: ["600 bytes"]),
        BadInput(["read", "s", longKey], mentioning: ["600 bytes"]),
        BadInput(["rename", "s", "sound", longKey], mentioning: ["600 bytes"]),
        BadInput(["increment", "s", longKey], mentioning: ["600 bytes"]),
        BadInput(["delete", "s", longKey], mentioning: ["600 bytes"]),
        BadInput(["write", "s", "", "v"], mentioning: ["empty"]),
        BadInput(["increment", "s", "sound"], mentioning: ["string"]),
        BadInput(["rename", "s", "nope", "x"], mentioning: ["nope"]),
        // A rename never overwrites a value unless asked to.
        BadInput(
            ["rename", "s", "sound", "badge"],
            mentioning: ["badge already holds a value in s", "`groupdefaults rename --force s sound badge`"]
        ),
        BadInput(["delete", "s", "nope"], mentioning: ["nope"]),
        BadInput(["backup", "s", "$FILES/backup.txt"], mentioning: [".lmdb"]),
        BadInput(["backup", "s", "$FILES/nodir/backup.lmdb"], mentioning: ["directory"]),
        BadInput(["export", "s", "$FILES/nodir/out.plist"], mentioning: ["out.plist"]),
        BadInput(["restore", "s", "$FILES/missing.lmdb"], mentioning: ["$FILES/missing.lmdb"]),
        BadInput(["restore", "fresh", "$FILES/missing.lmdb"], mentioning: ["$FILES/missing.lmdb"]),
        BadInput(["restore", "fresh", "$FILES/good.plist"], mentioning: [".lmdb"]),
        // Typos are never stored: a mistyped option is not a suite, `--` ends the options, and a
        // refused write to a new suite leaves no suite behind.
        BadInput(["write", "--directry", "$FILES", "k", "v"], mentioning: ["--directry", "did you mean '--directory'"]),
        BadInput(["write", "-x", "k", "v"], mentioning: ["-x", "options go before SUITE"]),
        BadInput(["write", "--", "fresh", "k", "v", "extra"], mentioning: ["extra"]),
        BadInput(["write", "fresh", "badge", "-int", "abc"], mentioning: ["abc"]),
        // A key whose value was forgotten is not a property list for the whole suite.
        BadInput(["write", "fresh", "badge"], mentioning: ["no value for the key badge", "`groupdefaults write fresh KEY VALUE`"]),
        // The suite and the key in the wrong order: no suite named after the key is made.
        BadInput(["write", "sound", "s", "ring"], mentioning: ["there is no suite sound, but there is a suite s", "the suite goes first"]),
        BadInput(["write", "fresh", "badge", "-flaot", "3"], mentioning: ["-flaot", "did you mean '-float'"]),
        // The key forgotten: a type flag (or a near miss of one) is never stored as the key.
        BadInput(["write", "fresh", "-int", "abc"], mentioning: ["'-int' stands where the key goes", "write fresh KEY -int VALUE"]),
        BadInput(["write", "fresh", "-flaot", "1"], mentioning: ["'-flaot' stands where the key goes", "did you mean '-float'"]),
        BadInput(["write", "s", "-array", "a", "b"], mentioning: ["'-array' stands where the key goes"]),
        BadInput(["write", "fresh", "n", "--json", #"{"integr":3}"#], mentioning: ["integr", "did you mean \"integer\"", #"{"dictionary":"#]),
        BadInput(["write", "fresh", "n", "--json", #"{"int":3}"#], mentioning: ["did you mean \"integer\""]),
        BadInput(["write", "fresh", "n", "--json", #"{"integer":3.5}"#], mentioning: ["a whole number"]),
        BadInput(["write", "fresh", "n", "--json", #"{"array":[3]}"#], mentioning: [#"{"array": [typed values]}"#]),
        BadInput(["write", "fresh", "n", "--json", #"{"real":1.5}"#], mentioning: ["did you mean \"double\""]),
        BadInput(["write", "fresh", "n", "--json", #"{"Boolean":true}"#], mentioning: ["did you mean \"bool\""]),
        BadInput(["write", "fresh", "n", "--json", #"{"dict":{}}"#], mentioning: ["did you mean \"dictionary\""]),
        BadInput(
            ["write", "fresh", "k", "--json", String(repeating: "[", count: 150) + String(repeating: "]", count: 150)],
            mentioning: ["100 levels"]
        ),
        BadInput(["write", "fresh", String(repeating: "k", count: 600), "v"], mentioning: ["600 bytes"]),
        BadInput(["import", "fresh", "$FILES/bad-typed.json"], mentioning: ["integer"]),
        // A value over the size limit is refused before the new suite is made.
        BadInput(["import", "fresh", "$FILES/huge.plist"], mentioning: ["the limit is 4194304"]),
        BadInput(["write", "fresh", "n", "--json", #"{"Integer":3}"#], mentioning: ["did you mean \"integer\""]),
        BadInput(["write", "--directory=", "fresh", "k", "v"], mentioning: ["--directory"]),
        BadInput(["increment", "fresh", ""], mentioning: ["empty"]),
        BadInput(["watch", "s", "--count", "0"], mentioning: ["--count must be 1 or more"]),
        BadInput(["watch", "s", "--since", "999999"], mentioning: ["--since 999999 is past s's last change"]),
        BadInput(["verify", "$FILES/missing.lmdb"], mentioning: ["no such file"]),
    ]

    static func prepare(_ sandbox: Sandbox) async throws {
        try await ReadTests.seed(sandbox)
        let files: [String: Data] = [
            "malformed.plist": Data("{ a = ".utf8),
            "array.plist": Data("(a, b)".utf8),
            "junk.bin": Data([0xFF, 0xFE, 0x00, 0xD8, 0x41]),
            "bad.xml": Data(#"<?xml version="1.0"?><plist version="1.0"><dict><key>a</key></dict></plist>"#.utf8),
            "bad-typed.json": Data(#"{"dictionary":{"a":{"integer":"x"}}}"#.utf8),
            "good.plist": Data("{ a = b; }".utf8),
        ]
        for (name, data) in files { try data.write(to: URL(fileURLWithPath: sandbox.path(name))) }
    }

    @Test(arguments: cases)
    func refusedInOneLineAndNothingChanges(_ input: BadInput) async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.prepare(sandbox)
            if input.arguments.contains("$FILES/huge.plist") {  // 4 MB, only where it is used
                try Data(("{ a = \"" + String(repeating: "x", count: 4_300_000) + "\"; }").utf8).write(
                    to: URL(fileURLWithPath: sandbox.path("huge.plist"))
                )
            }
            let before = try await sandbox.contents("s")
            let last = try await sandbox.lastChange("s")
            let listing = sandbox.suiteDirectoryListing
            let files = try FileManager.default.contentsOfDirectory(atPath: sandbox.files.path).sorted()

            let arguments = input.arguments.map { $0.replacingOccurrences(of: "$FILES", with: sandbox.files.path) }
            let result = try await sandbox.run(arguments, stdin: input.stdin.map { Data($0.utf8) })
            let mentioning = input.mentioning.map { $0.replacingOccurrences(of: "$FILES", with: sandbox.files.path) }
            expectOneLineFailure(result, mentioning: mentioning, input.testDescription)
            #expect(result.stdout.isEmpty, "\(result)")

            #expect(try await sandbox.contents("s") == before)
            #expect(try await sandbox.lastChange("s") == last)
            #expect(sandbox.suiteDirectoryListing == listing, "a suite appeared")
            #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.files.path).sorted() == files, "a file appeared")
            #expect(!FileManager.default.fileExists(atPath: sandbox.root.appendingPathComponent("s.lmdb").path))
            #expect(!FileManager.default.fileExists(atPath: sandbox.root.appendingPathComponent("..lmdb").path))
        }
    }

    /// `verify` of a file that is not a suite leaves nothing beside it (the lock and notify files
    /// its open makes go again), and says it is damaged.
    @Test func verifyLeavesNoFilesBehind() async throws {
        try await withSandbox { (sandbox) throws in
            let bad = sandbox.files.appendingPathComponent("bad.lmdb").path
            try Data("garbage, not a suite".utf8).write(to: URL(fileURLWithPath: bad))
            let result = try await sandbox.run(["verify", bad])
            #expect(result.status == 1 && result.stderr.contains("damaged"), "\(result)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.files.path) == ["bad.lmdb"])
        }
    }

    /// `restore` from a backup leaves nothing beside the backup (its open's lock and notify files
    /// go again).
    @Test func restoreLeavesNothingBesideTheBackup() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.prepare(sandbox)
            let folder = sandbox.files.appendingPathComponent("backups")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let copy = folder.appendingPathComponent("s.lmdb").path
            #expect(try await sandbox.run(["backup", "s", copy]).status == 0)
            let restored = try await sandbox.run(["restore", "fresh", copy])
            #expect(restored.status == 0, "\(restored)")
            #expect(try await sandbox.contents("fresh") == sandbox.contents("s"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["s.lmdb"])
        }
    }

    /// `write -- SUITE KEY VALUE`: `--` ends the options, and is not a suite; after it a suite may
    /// start with '-', as with every verb. A suite named `help` is written, not helped.
    @Test func doubleDashEndsTheOptions() async throws {
        try await withSandbox { (sandbox) throws in
            #expect(try await sandbox.run(["write", "--", "s2", "k", "v"]).status == 0)
            #expect(try await sandbox.run(["read", "s2", "k"]).stdout == "v\n")
            #expect(!sandbox.suiteDirectoryListing.contains { $0.hasPrefix("--") })
            #expect(try await sandbox.run(["write", "--", "-x", "k", "v"]).status == 0)
            #expect(try await sandbox.run(["read", "--", "-x", "k"]).stdout == "v\n")
            #expect(try await sandbox.run(["write", "help", "k", "v"]).status == 0)
            #expect(try await sandbox.run(["read", "help", "k"]).stdout == "v\n")
        }
    }

    /// A write refused for its input never touches an existing file of the suite's name, even one
    /// that is not a suite yet (an empty file).
    @Test func refusedWriteKeepsAnExistingFile() async throws {
        try await withSandbox { (sandbox) throws in
            let file = sandbox.suites.appendingPathComponent("e.lmdb")
            try FileManager.default.createDirectory(at: sandbox.suites, withIntermediateDirectories: true)
            try Data().write(to: file)
            let result = try await sandbox.run(["write", "e", "", "v"])
            #expect(result.status == 1 && result.stderr.contains("empty"), "\(result)")
            #expect(FileManager.default.fileExists(atPath: file.path))
        }
    }

    /// Asking for help is not an error: `groupdefaults`, `--help`, `-h` and `help` print the usage
    /// and the verbs, exit status 0.
    @Test(arguments: [[], ["--help"], ["-h"], ["help"]])
    func helpWithoutAVerb(_ arguments: [String]) async throws {
        try await withSandbox { sandbox in
            let result = try await sandbox.run(arguments)
            #expect(result.status == 0, "\(result)")
            #expect(result.stdout.contains("USAGE: groupdefaults") && result.stdout.contains("increment"), "\(result)")
            #expect(result.stderr.isEmpty, "\(result)")
        }
    }

    /// Errors found by the argument parser (unknown verb or flag, a BY that is not a number) follow
    /// the same rule: one line that says what was wrong and what to do.
    @Test(arguments: [
        BadInput(["frob", "s"], mentioning: ["frob"]),
        BadInput(["read", "--frob", "s"], mentioning: ["--frob"]),
        BadInput(["increment", "s", "badge", "abc"], mentioning: ["abc"]),
        BadInput(["info"], mentioning: ["suite"]),
    ])
    func argumentErrorsInOneLine(_ input: BadInput) async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.prepare(sandbox)
            let before = try await sandbox.contents("s")
            let result = try await sandbox.run(input.arguments)
            #expect(result.reason == .exit && result.status != 0, "\(result)")
            #expect(!result.stderr.contains("Fatal error") && !result.stderr.contains("Backtrace"), "\(result)")
            for fragment in input.mentioning {
                #expect(result.stderr.contains(fragment), "\(result)")
            }
            #expect(try await sandbox.contents("s") == before)
            let mentioning = input.mentioning.map { $0.replacingOccurrences(of: "$FILES", with: sandbox.files.path) }
            expectOneLineFailure(result, mentioning: mentioning, input.testDescription)
        }
    }
}

/// A file given as a path that is not a healthy suite.
struct BrokenFile: Sendable, CustomTestStringConvertible {
    enum Kind: Sendable { case randomBytes, text, truncatedSuite, damagedHeader, damagedPages }
    var kind: Kind
    var testDescription: String { "\(kind)" }
}

@Suite struct BrokenFileTests {
    /// Makes `files/broken.lmdb` of the given kind and returns its path.
    static func make(_ kind: BrokenFile.Kind, in sandbox: Sandbox) async throws -> String {
        let path = sandbox.path("broken.lmdb")
        let url = URL(fileURLWithPath: path)
        switch kind {
        case .randomBytes:
            try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }).write(to: url)
        case .text:
            try Data("hello, I am not a suite\n".utf8).write(to: url)
        case .truncatedSuite, .damagedHeader, .damagedPages:
            for i in 0..<20 { try await sandbox.ok("write", "real", "key\(i)", "-string", String(repeating: "v", count: 100)) }
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: sandbox.suitePath("real"))))
            switch kind {
            case .truncatedSuite:
                bytes = Array(bytes.prefix(12_000))
            case .damagedHeader:  // both meta pages
                for page in [0, 4096] { for i in page + 16..<page + 200 { bytes[i] ^= 0x55 } }
            default:  // the pages after the meta pages
                for i in 8192..<min(bytes.count, 8192 * 4) { bytes[i] ^= 0xA5 }
            }
            try Data(bytes).write(to: url)
        }
        return path
    }

    @Test(arguments: [BrokenFile.Kind.randomBytes, .text, .truncatedSuite, .damagedHeader, .damagedPages].map(BrokenFile.init))
    func everyVerbRefusesItInOneLineAndLeavesItUnchanged(_ broken: BrokenFile) async throws {
        try await withSandbox { (sandbox) throws in
            let path = try await Self.make(broken.kind, in: sandbox)
            let original = try Data(contentsOf: URL(fileURLWithPath: path))
            try Data("{ a = b; }".utf8).write(to: URL(fileURLWithPath: sandbox.path("good.plist")))
            let commands: [[String]] = [
                ["read", path], ["read", path, "k"], ["read", path, "--json"], ["read-type", path, "k"],
                ["write", path, "k", "v"], ["write", path, "{ k = v; }"], ["import", path, sandbox.path("good.plist")],
                ["increment", path, "k"], ["delete", path], ["delete", path, "k"], ["rename", path, "a", "b"],
                ["export", path, "-"], ["info", path], ["watch", path], ["backup", path, sandbox.path("copy.lmdb")],
                ["restore", path, path],
            ]
            for command in commands {
                let result = try await sandbox.run(command)
                expectOneLineFailure(result, mentioning: [], "\(broken.kind): \(command.first!)")
                #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == original, "\(broken.kind): \(command.first!) changed the file")
            }
            #expect(!FileManager.default.fileExists(atPath: sandbox.path("copy.lmdb")))

            let verify = try await sandbox.run("verify", path)
            expectOneLineFailure(verify, mentioning: [path], "\(broken.kind): verify")
            #expect(verify.stdout.hasPrefix("damaged structure: "), "\(verify)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == original)
        }
    }

    /// An empty file named `.lmdb` is not a suite: reading it must not turn it into one.
    @Test func anEmptyFileIsNotASuite() async throws {
        try await withSandbox { (sandbox) throws in
            let path = sandbox.path("empty.lmdb")
            _ = FileManager.default.createFile(atPath: path, contents: Data())
            let verify = try await sandbox.run("verify", path)
            expectOneLineFailure(verify, mentioning: [], "verify")
            #expect(verify.stdout == "damaged structure: the file is empty: it is not a suite\n", "\(verify)")
            for command in [["read", path], ["info", path], ["export", path, "-"], ["read-type", path, "k"]] {
                let result = try await sandbox.run(command)
                expectOneLineFailure(result, mentioning: [], command.first!)
                let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int
                #expect(size == 0, "\(command.first!) wrote \(size ?? -1) bytes into an empty file")
            }
        }
    }
}
