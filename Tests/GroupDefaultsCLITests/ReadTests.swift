import CommandLineSupport
import Foundation
import TestSupport
import Testing

/// `domains`, `read`, `read-type`: what they print and how they exit.
@Suite struct ReadTests {
    /// A suite holding one value of every type, written with the type flags.
    static func seed(_ sandbox: Sandbox, suite: String = "s") async throws {
        try await sandbox.ok("write", suite, "sound", "ring.caf")
        try await sandbox.ok("write", suite, "volume", "-float", "0.8")
        try await sandbox.ok("write", suite, "badge", "-int", "3")
        try await sandbox.ok("write", suite, "on", "-bool", "yes")
        try await sandbox.ok("write", suite, "off", "-bool", "no")
        try await sandbox.ok("write", suite, "when", "-date", "2026-11-21 10:00:00 +0000")
        try await sandbox.ok("write", suite, "blob", "-data", "0a1b2c")
        try await sandbox.ok("write", suite, "list", "-array", "a", "-int", "2", "b c")
        try await sandbox.ok("write", suite, "prefs", "-dict", "name", "Ann", "age", "-int", "30")
    }

    @Test func domainsPrintsTheSuitesCommaSeparatedOrOnePerLine() async throws {
        try await withSandbox { (sandbox) throws in
            let none = try await sandbox.run("domains")
            #expect(none.succeeded && none.stderr.isEmpty, "\(none)")
            #expect(none.stdout.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(none)")

            for suite in ["group.b", "group.a", "c"] { try await sandbox.ok("write", suite, "k", "v") }
            // Files that are not suites are not listed.
            _ = FileManager.default.createFile(atPath: sandbox.suites.appendingPathComponent("notes.txt").path, contents: Data("x".utf8))
            try FileManager.default.createDirectory(
                at: sandbox.suites.appendingPathComponent("folder.lmdb"),
                withIntermediateDirectories: true
            )

            #expect(try await sandbox.ok("domains") == "c, group.a, group.b\n")
            #expect(try await sandbox.ok("domains", "--list") == "c\ngroup.a\ngroup.b\n")
        }
    }

    @Test func directoryOptionOverridesTheEnvironment() async throws {
        try await withSandbox { (sandbox) throws in
            let other = sandbox.files.appendingPathComponent("other").path
            try await sandbox.ok("write", "--directory", other, "elsewhere", "k", "here")
            try await sandbox.ok("write", "home", "k", "there")
            #expect(try await sandbox.ok("domains", "--directory", other) == "elsewhere\n")
            #expect(try await sandbox.ok("domains") == "home\n")
            #expect(try await sandbox.ok("read", "--directory", other, "elsewhere", "k") == "here\n")
            #expect(FileManager.default.fileExists(atPath: other + "/elsewhere.lmdb"))
        }
    }

    @Test func readPrintsTheWholeSuiteAsOldStyleText() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            let expected = """
                {
                    badge = 3;
                    blob = {length = 3, bytes = 0x0a1b2c};
                    list =     (
                        a,
                        2,
                        "b c"
                    );
                    off = 0;
                    on = 1;
                    prefs =     {
                        age = 30;
                        name = Ann;
                    };
                    sound = "ring.caf";
                    volume = "0.8";
                    when = "2026-11-21 10:00:00 +0000";
                }

                """
            #expect(try await sandbox.ok("read", "s") == expected)
        }
    }

    @Test func readOfAKeyPrintsTheValueAsDefaultsDoes() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            try await sandbox.ok("write", "s", "message", "-string", "He said \"hi\"; then: left")
            let expected: [(String, String)] = [
                ("sound", "ring.caf"),
                ("message", "He said \"hi\"; then: left"),
                ("volume", "0.8"),
                ("badge", "3"),
                ("on", "1"),
                ("off", "0"),
                ("when", "2026-11-21 10:00:00 +0000"),
                ("blob", "{length = 3, bytes = 0x0a1b2c}"),
                ("list", "(\n    a,\n    2,\n    \"b c\"\n)"),
                ("prefs", "{\n    age = 30;\n    name = Ann;\n}"),
            ]
            for (key, text) in expected {
                #expect(try await sandbox.ok("read", "s", key) == text + "\n", "read s \(key)")
            }
        }
    }

    @Test func readJSONPrintsPlainJSON() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            let whole = try JSONValue.parse(try await sandbox.ok("read", "s", "--json"))
            let expected = JSONValue.object([
                "badge": .integer(3),
                "blob": .string("Chss"),  // base64 of 0a1b2c
                "list": .array([.string("a"), .integer(2), .string("b c")]),
                "off": .bool(false),
                "on": .bool(true),
                "prefs": .object(["age": .integer(30), "name": .string("Ann")]),
                "sound": .string("ring.caf"),
                "volume": .double(0.8),
                "when": .string("2026-11-21T10:00:00.000Z"),
            ])
            #expect(whole == expected)
            #expect(try await sandbox.ok("read", "s", "sound", "--json") == "\"ring.caf\"\n")
            #expect(try await sandbox.ok("read", "s", "badge", "--json") == "3\n")
            #expect(try await sandbox.ok("read", "s", "on", "--json") == "true\n")
            #expect(try JSONValue.parse(try await sandbox.ok("read", "s", "prefs", "--json")) == expected["prefs"])
        }
    }

    @Test func readWithoutASuitePrintsEverySuite() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "a", "k", "v")
            try await sandbox.ok("write", "b", "n", "-int", "1")
            #expect(try await sandbox.ok("read") == "{\n    a =     {\n        k = v;\n    };\n    b =     {\n        n = 1;\n    };\n}\n")
        }
    }

    @Test func missingKeyIsReportedAsDefaultsReportsIt() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            for verb in ["read", "read-type"] {
                let result = try await sandbox.run(verb, "s", "nope")
                #expect(result.reason == .exit && result.status == 1, "\(verb): \(result)")
                #expect(result.stderr == "The domain/default pair of (s, nope) does not exist\n", "\(verb)")
                #expect(result.stdout.isEmpty, "\(verb): \(result)")
            }
        }
    }

    @Test func missingSuiteIsReportedAsDefaultsReportsIt() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "other", "k", "v")
            for arguments in [["read", "nosuch"], ["read", "nosuch", "k"], ["read-type", "nosuch", "k"], ["read", "nosuch", "--json"]] {
                let result = try await sandbox.run(arguments)
                #expect(result.reason == .exit && result.status == 1, "\(arguments): \(result)")
                #expect(result.stderr == "Domain nosuch does not exist\n", "\(arguments)")
                #expect(result.stdout.isEmpty, "\(arguments): \(result)")
            }
        }
    }

    @Test func readingNeverCreatesASuiteOrItsDirectory() async throws {
        try await withSandbox { (sandbox) throws in
            let readOnly: [[String]] = [
                ["read", "nosuch"], ["read", "nosuch", "k"], ["read", "nosuch", "--json"], ["read-type", "nosuch", "k"],
                ["export", "nosuch", "-"], ["export", "nosuch", sandbox.path("out.plist")], ["info", "nosuch"],
                ["verify", "nosuch"], ["watch", "nosuch"], ["find", "x"], ["domains"], ["read"],
                ["backup", "nosuch", sandbox.path("b.lmdb")],
            ]
            for arguments in readOnly { try await sandbox.run(arguments) }
            #expect(!FileManager.default.fileExists(atPath: sandbox.suites.path), "\(sandbox.suiteDirectoryListing)")
            #expect(!FileManager.default.fileExists(atPath: sandbox.path("out.plist")))
            #expect(!FileManager.default.fileExists(atPath: sandbox.path("b.lmdb")))

            // And beside an existing suite, nothing new appears either.
            try await sandbox.ok("write", "s", "k", "v")
            let before = sandbox.suiteDirectoryListing
            for arguments in readOnly { try await sandbox.run(arguments) }
            #expect(sandbox.suiteDirectoryListing == before)
        }
    }

    @Test func readTypeNamesEveryType() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            let expected = [
                "sound": "string", "badge": "integer", "volume": "float", "on": "boolean", "off": "boolean",
                "when": "date", "blob": "data", "list": "array", "prefs": "dictionary",
            ]
            for (key, type) in expected {
                #expect(try await sandbox.ok("read-type", "s", key) == "Type is \(type)\n", "read-type s \(key)")
            }
        }
    }
}
