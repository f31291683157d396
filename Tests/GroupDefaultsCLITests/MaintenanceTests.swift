import CommandLineSupport
import Foundation
import TestSupport
import Testing

/// Flips one bit in the middle of every occurrence of `marker` in the file at `path`; returns how
/// many there were. Used to damage one stored value record: its checksum no longer matches.
func damage(fileAt path: String, marker: String) throws -> Int {
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    let needle = Array(marker.utf8)
    var found = 0
    var index = 0
    while index + needle.count <= bytes.count {
        if bytes[index..<index + needle.count].elementsEqual(needle) {
            bytes[index + needle.count / 2] ^= 0x01
            found += 1
            index += needle.count
        } else {
            index += 1
        }
    }
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return found
}

/// `info`, `verify`, `backup`, `restore`, and `export`/`import` one at a time.
@Suite struct MaintenanceTests {
    static let marker = "MARKER-7f3e9a-c41d-VALUE"

    /// A suite `s` whose value under `zz` is damaged (bytes flipped in the file).
    static func damagedSuite(_ sandbox: Sandbox) async throws {
        try await sandbox.ok("write", "s", "a", "1")
        try await sandbox.ok("write", "s", "b", "-int", "2")
        // Last, so no older page copy holds it; too large for the change log to keep a copy.
        try await sandbox.ok("write", "s", "zz", "-string", marker + String(repeating: ".", count: 4096))
        #expect(try damage(fileAt: sandbox.suitePath("s"), marker: marker) >= 1)
    }

    @Test func infoPrintsItsFields() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "a", "1")
            try await sandbox.ok("write", "s", "b", "2")
            try await sandbox.ok("delete", "s", "a")
            let lines = try await sandbox.ok("info", "s").split(separator: "\n").map(String.init)
            func field(_ name: String) -> String? {
                lines.first { $0.hasPrefix(name + ": ") }.map { String($0.dropFirst(name.count + 2)) }
            }
            #expect(field("path") == sandbox.suitePath("s"))
            let size = try #require(field("file size"))
            let bytes = try #require(Int(size.replacingOccurrences(of: " bytes", with: "")), "\(size)")
            let fileSize = try FileManager.default.attributesOfItem(atPath: sandbox.suitePath("s"))[.size] as? Int
            #expect(bytes == fileSize)
            #expect(field("keys") == "1")
            #expect(field("last change") == "3")
            #expect(field("map")?.contains(" bytes used (grows up to ") == true, "\(lines)")
            #expect(field("readers")?.contains(" slots") == true, "\(lines)")
            #expect(field("durability") != nil, "\(lines)")
            #expect(field("origin").flatMap { UInt64($0) } != nil, "\(lines)")
            // By path too.
            #expect(try await sandbox.ok("info", sandbox.suitePath("s")).contains("keys: 1\n"))
        }
    }

    @Test func verifyOfAHealthySuite() async throws {
        try await withSandbox { (sandbox) throws in
            try await ReadTests.seed(sandbox)
            #expect(try await sandbox.ok("verify", "s") == "s: 9 keys, all good\n")
            let path = sandbox.suitePath("s")
            #expect(try await sandbox.ok("verify", path) == "\(path): 9 keys, all good\n")
        }
    }

    @Test func verifyNamesTheDamagedKey() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.damagedSuite(sandbox)
            let result = try await sandbox.run("verify", "s")
            expectOneLineFailure(result, mentioning: ["s is damaged", "1 of 3 keys"], "verify")
            let lines = result.stdout.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix("damaged key zz: "), "\(result)")

            // The other keys still read; the damaged one is an error that names it.
            #expect(try await sandbox.ok("read", "s", "a") == "1\n")
            expectOneLineFailure(try await sandbox.run("read", "s", "zz"), mentioning: ["zz"], "read zz")
        }
    }

    @Test func backupOpensAndVerifiesAndRestoreBringsItBack() async throws {
        try await withSandbox { (sandbox) throws in
            try await ReadTests.seed(sandbox)
            let original = try await sandbox.contents("s")
            let backup = sandbox.path("s-backup.lmdb")
            #expect(try await sandbox.ok("backup", "s", backup).isEmpty)
            #expect(try await sandbox.ok("verify", backup) == "\(backup): 9 keys, all good\n")
            #expect(try await sandbox.contents(backup) == original)

            // A backup never overwrites a file.
            let before = try Data(contentsOf: URL(fileURLWithPath: backup))
            expectOneLineFailure(try await sandbox.run("backup", "s", backup), mentioning: [backup], "backup over a file")
            #expect(try Data(contentsOf: URL(fileURLWithPath: backup)) == before)

            // Restore replaces the whole suite: keys not in the backup go.
            try await sandbox.ok("write", "t", "stray", "x")
            try await sandbox.ok("write", "t", "sound", "other.caf")
            #expect(try await sandbox.ok("restore", "t", backup).isEmpty)
            #expect(try await sandbox.contents("t") == original)
            // And into a suite that did not exist.
            #expect(try await sandbox.ok("restore", "fresh", backup).isEmpty)
            #expect(try await sandbox.contents("fresh") == original)
        }
    }

    @Test func restoreRefusesADamagedSourceAndChangesNothing() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.damagedSuite(sandbox)
            let source = sandbox.path("damaged.lmdb")
            try FileManager.default.copyItem(atPath: sandbox.suitePath("s"), toPath: source)
            try await sandbox.ok("write", "t", "keep", "me")
            try await sandbox.ok("write", "t", "n", "-int", "4")
            let before = try await sandbox.contents("t")
            let last = try await sandbox.lastChange("t")
            expectOneLineFailure(try await sandbox.run("restore", "t", source), mentioning: ["does not verify", "zz"], "restore")
            #expect(try await sandbox.contents("t") == before)
            #expect(try await sandbox.lastChange("t") == last)

            // A source that is not a suite at all.
            let junk = sandbox.path("junk.lmdb")
            try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: URL(fileURLWithPath: junk))
            expectOneLineFailure(try await sandbox.run("restore", "t", junk), mentioning: [], "restore junk")
            #expect(try await sandbox.contents("t") == before)
            #expect(try await sandbox.lastChange("t") == last)
        }
    }

    @Test func exportToAPathIsBinaryToStdoutXML() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "sound", "ring.caf")
            try await sandbox.ok("write", "s", "n", "-int", "3")
            let path = sandbox.path("out.plist")
            #expect(try await sandbox.ok("export", "s", path).isEmpty)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).starts(with: Data("bplist00".utf8)))

            let xml = try await sandbox.ok("export", "s", "-")
            #expect(xml.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"), "\(xml)")
            #expect(xml.contains("<key>sound</key>") && xml.contains("<string>ring.caf</string>"), "\(xml)")
            #expect(xml.contains("<key>n</key>") && xml.contains("<integer>3</integer>"), "\(xml)")
            #expect(xml.hasSuffix("</plist>\n"), "\(xml)")

            let json = try JSONValue.parse(await sandbox.ok("export", "s", "-", "--format", "json"))
            #expect(
                json
                    == .object([
                        "dictionary": .object([
                            "sound": .object(["string": .string("ring.caf")]), "n": .object(["integer": .integer(3)]),
                        ])
                    ])
            )
            let jsonPath = sandbox.path("out.json")
            try await sandbox.ok("export", "s", jsonPath, "--format", "json")
            #expect(try JSONValue.parse(String(decoding: Data(contentsOf: URL(fileURLWithPath: jsonPath)), as: UTF8.self)) == json)

            let binary = try await sandbox.run("export", "s", "-", "--format", "binary")
            #expect(binary.succeeded && binary.stdoutData.starts(with: Data("bplist00".utf8)), "\(binary)")
            let xmlPath = sandbox.path("out.xml")
            try await sandbox.ok("export", "s", xmlPath, "--format", "xml")
            #expect(try String(decoding: Data(contentsOf: URL(fileURLWithPath: xmlPath)), as: UTF8.self) == xml)
        }
    }

    @Test func importFromAPathAndFromStdinReplacesTheSuite() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "t", "stray", "x")
            let file = sandbox.path("in.plist")
            try Data("{ sound = \"ring.caf\"; list = (a, b); }".utf8).write(to: URL(fileURLWithPath: file))
            #expect(try await sandbox.ok("import", "t", file).isEmpty)
            #expect(
                try JSONValue.parse(await sandbox.ok("read", "t", "--json"))
                    == .object(["sound": .string("ring.caf"), "list": .array([.string("a"), .string("b")])])
            )

            let typed = #"{"dictionary":{"n":{"integer":5},"on":{"bool":true}}}"#
            #expect(try await sandbox.ok("import", "t", "-", stdin: Data(typed.utf8)).isEmpty)
            #expect(try JSONValue.parse(await sandbox.ok("read", "t", "--json")) == .object(["n": .integer(5), "on": .bool(true)]))
            // Import creates a suite that does not exist.
            #expect(try await sandbox.ok("import", "new", "-", stdin: Data(typed.utf8)).isEmpty)
            #expect(try await sandbox.ok("read", "new", "n") == "5\n")
        }
    }
}
