import CommandLineSupport
import Foundation
import TestSupport
import Testing

/// One `write SUITE KEY WORDS…` and what `read-type` and `read` then print.
struct WriteCase: Sendable, CustomTestStringConvertible {
    var words: [String]
    var type: String
    var text: String

    init(_ words: [String], _ type: String, _ text: String) {
        self.words = words
        self.type = type
        self.text = text
    }

    var testDescription: String { words.joined(separator: " ") }
}

/// `write` with each type flag, `-array-add`/`-dict-add`, `--json`, and a whole property list.
@Suite struct WriteTests {
    static let cases: [WriteCase] = [
        WriteCase(["hello"], "string", "hello"),
        WriteCase(["-5"], "string", "-5"),
        WriteCase(["-string", "-x"], "string", "-x"),
        WriteCase(["-string", "two words"], "string", "two words"),
        WriteCase(["-int", "42"], "integer", "42"),
        WriteCase(["-int", "-7"], "integer", "-7"),
        WriteCase(["-integer", "9223372036854775807"], "integer", "9223372036854775807"),
        WriteCase(["-float", "0.25"], "float", "0.25"),
        WriteCase(["-float", "-1.5"], "float", "-1.5"),
        WriteCase(["-float", "3"], "float", "3"),
        WriteCase(["-bool", "true"], "boolean", "1"),
        WriteCase(["-bool", "false"], "boolean", "0"),
        WriteCase(["-bool", "yes"], "boolean", "1"),
        WriteCase(["-bool", "no"], "boolean", "0"),
        WriteCase(["-bool", "1"], "boolean", "1"),
        WriteCase(["-bool", "0"], "boolean", "0"),
        WriteCase(["-boolean", "YES"], "boolean", "1"),
        WriteCase(["-boolean", "False"], "boolean", "0"),
        WriteCase(["-data", "DEADbeef"], "data", "{length = 4, bytes = 0xdeadbeef}"),
        WriteCase(["-data", ""], "data", "{length = 0, bytes = 0x}"),
        WriteCase(["-date", "2026-11-21 10:00:00 +0000"], "date", "2026-11-21 10:00:00 +0000"),
        WriteCase(["-date", "2026-11-21 12:00:00 +0200"], "date", "2026-11-21 10:00:00 +0000"),
        WriteCase(["-date", "2026-11-21T10:30:00Z"], "date", "2026-11-21 10:30:00 +0000"),
        WriteCase(["-date", "2026-11-21T12:30:00+02:00"], "date", "2026-11-21 10:30:00 +0000"),
        WriteCase(["-array", "x", "-int", "1", "-bool", "yes"], "array", "(\n    x,\n    1,\n    1\n)"),
        WriteCase(["-array"], "array", "(\n)"),
        WriteCase(["-dict", "k", "v", "n", "-float", "1.5"], "dictionary", "{\n    k = v;\n    n = \"1.5\";\n}"),
        WriteCase(["--json", #"{"string":"typed"}"#], "string", "typed"),
        WriteCase(["--json", #"{"integer":3}"#], "integer", "3"),
        WriteCase(["--json", #"{"double":3}"#], "float", "3"),
        WriteCase(["--json", #"{"bool":false}"#], "boolean", "0"),
        WriteCase(["--json", #"{"date":"2026-11-21T10:00:00.000Z"}"#], "date", "2026-11-21 10:00:00 +0000"),
        WriteCase(["--json", #"{"data":"AQID"}"#], "data", "{length = 3, bytes = 0x010203}"),
        WriteCase(["--json", #"{"array":[{"integer":1},{"string":"a"}]}"#], "array", "(\n    1,\n    a\n)"),
        WriteCase(["--json", #"{"dictionary":{"a":{"bool":true}}}"#], "dictionary", "{\n    a = 1;\n}"),
        WriteCase(["--json", "3"], "integer", "3"),
        WriteCase(["--json", "2.5"], "float", "2.5"),
        WriteCase(["--json", "true"], "boolean", "1"),
        WriteCase(["--json", #""plain""#], "string", "plain"),
        WriteCase(["--json", #"[1, "a", [false]]"#], "array", "(\n    1,\n    a,\n        (\n        0\n    )\n)"),
        WriteCase(["--json", #"{"date": 1, "x": "y"}"#], "dictionary", "{\n    date = 1;\n    x = y;\n}"),
    ]

    @Test(arguments: cases)
    func typeFlags(_ write: WriteCase) async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok(["write", "s", "k"] + write.words)
            #expect(try await sandbox.ok("read-type", "s", "k") == "Type is \(write.type)\n")
            #expect(try await sandbox.ok("read", "s", "k") == write.text + "\n")
        }
    }

    @Test func typedJSONKeepsWhatTextCannot() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "when", "--json", #"{"date":"2026-11-21T10:00:00.250Z"}"#)
            try await sandbox.ok("write", "s", "blob", "-data", "00ff10")
            try await sandbox.ok("write", "s", "big", "-int", "-9007199254740993")
            let contents = try await sandbox.typedContents("s")
            #expect(
                contents
                    == .object([
                        "dictionary": .object([
                            "when": .object(["date": .string("2026-11-21T10:00:00.250Z")]),
                            "blob": .object(["data": .string("AP8Q")]),
                            "big": .object(["integer": .integer(-9_007_199_254_740_993)]),
                        ])
                    ])
            )
        }
    }

    @Test func arrayAddAndDictAdd() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "list", "-array", "a")
            try await sandbox.ok("write", "s", "list", "-array-add", "b", "-int", "2")
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "list", "--json")) == .array([.string("a"), .string("b"), .integer(2)]))
            try await sandbox.ok("write", "s", "fresh", "-array-add", "x")
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "fresh", "--json")) == .array([.string("x")]))

            try await sandbox.ok("write", "s", "prefs", "-dict", "k", "1", "keep", "-bool", "yes")
            try await sandbox.ok("write", "s", "prefs", "-dict-add", "k", "-int", "2", "new", "v")
            #expect(
                try JSONValue.parse(await sandbox.ok("read", "s", "prefs", "--json"))
                    == .object(["k": .integer(2), "keep": .bool(true), "new": .string("v")])
            )
            try await sandbox.ok("write", "s", "fresh2", "-dict-add", "a", "b")
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "fresh2", "--json")) == .object(["a": .string("b")]))

            // On a value of another type: refused, nothing changed.
            try await sandbox.ok("write", "s", "text", "v")
            let before = try await sandbox.contents("s")
            expectOneLineFailure(try await sandbox.run("write", "s", "text", "-array-add", "x"), mentioning: ["text", "string"], "-array-add")
            expectOneLineFailure(try await sandbox.run("write", "s", "list", "-dict-add", "x", "y"), mentioning: ["list", "array"], "-dict-add")
            #expect(try await sandbox.contents("s") == before)
        }
    }

    @Test func writeAPropertyListReplacesTheSuite() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "a", "1")
            try await sandbox.ok("write", "s", "b", "-int", "1")
            let last = try await sandbox.lastChange("s")
            try await sandbox.ok("write", "s", "{ b = 2; c = (x, \"y z\"); d = { e = <0102>; }; }")
            #expect(
                try JSONValue.parse(await sandbox.ok("read", "s", "--json"))
                    == .object([
                        "b": .string("2"),  // old-style text has no numbers, as with defaults
                        "c": .array([.string("x"), .string("y z")]),
                        "d": .object(["e": .string("AQI=")]),
                    ])
            )
            // a removed, b and c and d set: four changes.
            #expect(try await sandbox.lastChange("s") == last + 4)

            // A new suite too.
            try await sandbox.ok("write", "fresh", "{ k = v; }")
            #expect(try await sandbox.ok("read", "fresh", "k") == "v\n")
        }
    }

    @Test func writeCreatesTheSuiteAndWritesValuesThatReadBack() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "group.com.example.chat", "sound", "ring.caf")
            #expect(FileManager.default.fileExists(atPath: sandbox.suitePath("group.com.example.chat")))
            try await sandbox.ok("write", "group.com.example.chat", "sound", "bell.aiff")
            #expect(try await sandbox.ok("read", "group.com.example.chat", "sound") == "bell.aiff\n")
        }
    }
}
