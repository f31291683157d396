import Foundation
import TestSupport
import Testing

/// Keys are their bytes (issue 46): two spellings that Swift's `String ==` takes for one
/// (canonically equivalent: `é` and `e\u{301}`) or that merely look alike (KELVIN SIGN, fullwidth,
/// a ligature, a zero-width space, case) are two keys to every verb, and through every format.
@Suite struct KeyIdentityTests {
    /// Pairs of keys that are one to Swift's `String ==` or look alike, each made unique within a
    /// suite by a random prefix and suffix of plain letters (the generator is seeded: a failure
    /// reproduces).
    static func lookAlikePairs(seed: UInt64 = 46) -> [(String, String)] {
        let pairs = LookAlikeNames.keyPairs
        var generator = SeededGenerator(seed: seed)
        func word() -> String {
            String((0..<Int.random(in: 0...3, using: &generator)).map { _ in "xyz.-_".randomElement(using: &generator)! })
        }
        return pairs.enumerated().map { index, pair in
            let (prefix, suffix) = ("k\(index)" + word(), word())
            return (prefix + pair.0 + suffix, prefix + pair.1 + suffix)
        }
    }

    /// Both spellings written are both read back, each with its value; they survive export in each
    /// of the four formats and import into a fresh suite; deleting or renaming one leaves the other.
    @Test func bothSpellingsSurviveEveryVerbAndFormat() async throws {
        try await withSandbox { sandbox in
            let pairs = Self.lookAlikePairs()
            var expected: [(key: String, value: String)] = []
            for (index, (first, second)) in pairs.enumerated() {
                try await sandbox.ok("write", "s", first, "-int", "\(2 * index)")
                try await sandbox.ok("write", "s", second, "-int", "\(2 * index + 1)")
                expected += [(first, "\(2 * index)"), (second, "\(2 * index + 1)")]
            }
            #expect(try await sandbox.ok("info", "s").contains("keys: \(expected.count)\n"))
            for (key, value) in expected {
                #expect(try await sandbox.ok("read", "s", key) == value + "\n", "read \(key.unicodeScalars.map(\.value))")
            }
            // Python reads what export wrote, comparing keys as code points (as Apple's lists do).
            for format in ["xml", "binary", "openStep", "json"] {
                let file = sandbox.path("s.\(format)")
                try await sandbox.ok("export", "s", file, "--format", format)
                if format != "openStep" {
                    let keys = try await sandbox.python(Self.keysInFile, [file, format])
                    #expect(keys == expected.map { Self.codePoints($0.key) }.sorted().joined(separator: "\n") + "\n", "\(format)")
                }
                try await sandbox.ok("import", "copy-\(format)", file)
                #expect(try await sandbox.ok("info", "copy-\(format)").contains("keys: \(expected.count)\n"), "\(format)")
                #expect(try await sandbox.contents("copy-\(format)") == (try await sandbox.contents("s")) || format == "openStep", "\(format)")
                for (key, value) in expected {
                    // Old-style text has no numbers: they come back as strings, with the same text.
                    #expect(try await sandbox.ok("read", "copy-\(format)", key) == value + "\n", "\(format): \(Self.codePoints(key))")
                }
            }
            // Read of the whole suite and find print both spellings.
            #expect(try await sandbox.ok("read", "s").components(separatedBy: " = ").count == expected.count + 1)
            #expect(try await sandbox.ok("find", "k0").contains("Found 2 keys"))
            // Delete one spelling, rename the other onto it: each touches its own key only.
            let (first, second) = pairs[0]
            try await sandbox.ok("delete", "s", first)
            #expect(try await sandbox.ok("read", "s", second) == "1\n")
            #expect(!(try await sandbox.run("read", "s", first)).succeeded)
            try await sandbox.ok("rename", "s", second, first)
            #expect(try await sandbox.ok("read", "s", first) == "1\n")
            #expect(!(try await sandbox.run("read", "s", second)).succeeded)
            #expect(try await sandbox.ok("info", "s").contains("keys: \(expected.count - 1)\n"))
        }
    }

    /// A property list holding both spellings (written by Python, whose dictionaries keep both)
    /// imports as two keys; a key of the same bytes twice is still refused, as is a dictionary inside
    /// a value holding both spellings (a `[String: …]` there would keep one, silently).
    @Test func importKeepsBothAndRefusesWhatCannotBeKept() async throws {
        try await withSandbox { sandbox in
            let file = sandbox.path("both.plist")
            try await sandbox.python(
                "import plistlib, sys; plistlib.dump({'\\u00e9': 1, 'e\\u0301': 2}, open(sys.argv[1], 'wb'), fmt=plistlib.FMT_BINARY)",
                [file]
            )
            try await sandbox.ok("import", "s", file)
            #expect(try await sandbox.ok("read", "s", "\u{E9}") == "1\n")
            #expect(try await sandbox.ok("read", "s", "e\u{301}") == "2\n")

            try await sandbox.ok("write", "t", "{ \"\\U00e9\" = 1; \"e\\U0301\" = 2; }")
            #expect(try await sandbox.ok("read", "t", "e\u{301}") == "2\n")

            let duplicate = sandbox.path("duplicate.plist")
            try Data("{ \"\\U00e9\" = 1; \"\\U00e9\" = 2; }".utf8).write(to: URL(fileURLWithPath: duplicate))
            expectOneLineFailure(try await sandbox.run("import", "u", duplicate), mentioning: ["duplicate key"], "same bytes twice")

            let nested = sandbox.path("nested.plist")
            try Data("{ outer = { \"\\U00e9\" = 1; \"e\\U0301\" = 2; }; }".utf8).write(to: URL(fileURLWithPath: nested))
            expectOneLineFailure(
                try await sandbox.run("import", "u", nested),
                mentioning: ["U+0065 U+0301", "canonically equivalent"],
                "both spellings inside a value"
            )
            expectOneLineFailure(
                try await sandbox.run("write", "u", "d", "-dict", "\u{E9}", "1", "e\u{301}", "2"),
                mentioning: ["canonically equivalent"],
                "-dict with both spellings"
            )
        }
    }

    /// `U+0065 U+0301`: a key's code points, for messages and comparisons.
    static func codePoints(_ key: String) -> String {
        key.unicodeScalars.map { String(format: "U+%04X", $0.value) }.joined(separator: " ")
    }

    /// Prints the keys of a property list (XML or binary, with plistlib) or typed JSON (with json) as
    /// code points, one line each, sorted.
    static let keysInFile = #"""
        import json, plistlib, sys
        path, fmt = sys.argv[1], sys.argv[2]
        if fmt == "json":
            keys = json.load(open(path, encoding="utf-8"), object_pairs_hook=lambda pairs: dict(pairs))["dictionary"].keys()
        else:
            keys = plistlib.load(open(path, "rb")).keys()
        for line in sorted(" ".join("U+%04X" % ord(c) for c in k) for k in keys): print(line)
        """#
}
