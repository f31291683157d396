import CommandLineSupport
import Foundation
import ServerLaunching
import TestSupport
import Testing

/// `rename`, `delete`, `find`, `increment`.
@Suite struct EditTests {
    @Test func renameMovesTheValueWithItsType() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "old", "-int", "7")
            try await sandbox.ok("write", "s", "taken", "x")
            try await sandbox.ok("rename", "s", "old", "new")
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "--json")) == .object(["new": .integer(7), "taken": .string("x")]))
            #expect(try await sandbox.ok("read-type", "s", "new") == "Type is integer\n")

            // Onto an existing key: refused, nothing changes; with --force it replaces it.
            let refused = try await sandbox.run("rename", "s", "new", "taken")
            #expect(refused.status == 1 && refused.stderr.contains("taken already holds a value"), "\(refused)")
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "--json")) == .object(["new": .integer(7), "taken": .string("x")]))
            try await sandbox.ok("rename", "--force", "s", "new", "taken")
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "--json")) == .object(["taken": .integer(7)]))
        }
    }

    @Test func renameOfAMissingKeyChangesNothing() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "a", "1")
            let before = try await sandbox.contents("s")
            let last = try await sandbox.lastChange("s")
            let result = try await sandbox.run("rename", "s", "nope", "a")
            #expect(result.reason == .exit && result.status == 1, "\(result)")
            #expect(result.stderr == "The domain/default pair of (s, nope) does not exist\n")
            #expect(try await sandbox.contents("s") == before)
            #expect(try await sandbox.lastChange("s") == last)
        }
    }

    /// Readers in other processes never see both names, or neither, while another process renames
    /// back and forth.
    @Test func renameIsAtomicForOtherProcesses() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "a", "-int", "7")
            try await sandbox.ok("write", "s", "other", "x")
            let renamer = try sandbox.startShell(
                """
                i=0
                while [ $i -lt 60 ]; do
                    "$GD" rename s a b || exit 1
                    "$GD" rename s b a || exit 1
                    i=$((i+1))
                done
                """
            )
            defer { renamer.stop() }
            var reads = 0
            repeat {
                let snapshot = try JSONValue.parse(await sandbox.ok("read", "s", "--json"))
                let present = (snapshot["a"] != nil ? 1 : 0) + (snapshot["b"] != nil ? 1 : 0)
                #expect(present == 1, "read \(reads): \(snapshot)")
                #expect((snapshot["a"] ?? snapshot["b"]) == .integer(7))
                #expect(snapshot["other"] == .string("x"))
                reads += 1
            } while renamer.process.isRunning && reads < 2000
            let result = await renamer.finish()
            #expect(result.succeeded, "\(result)")
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "--json")) == .object(["a": .integer(7), "other": .string("x")]))
        }
    }

    @Test func deleteAKey() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "a", "1")
            try await sandbox.ok("write", "s", "b", "2")
            #expect(try await sandbox.ok("delete", "s", "a").isEmpty)
            #expect(try JSONValue.parse(await sandbox.ok("read", "s", "--json")) == .object(["b": .string("2")]))

            let last = try await sandbox.lastChange("s")
            let missing = try await sandbox.run("delete", "s", "a")
            #expect(missing.reason == .exit && missing.status == 1, "\(missing)")
            #expect(missing.stderr == "The domain/default pair of (s, a) does not exist\n")
            #expect(try await sandbox.lastChange("s") == last)
        }
    }

    @Test func deleteTheWholeSuite() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "a", "1")
            try await sandbox.ok("write", "s", "b", "-int", "2")
            try await sandbox.ok("write", "t", "keep", "me")
            #expect(try await sandbox.ok("delete", "s").isEmpty)
            #expect(try await sandbox.ok("read", "s", "--json") == "{}\n")
            #expect(try await sandbox.ok("read", "s") == "{\n}\n")
            #expect(try await sandbox.ok("read", "t", "keep") == "me\n")
            // The file stays (other processes may have it open), and the suite can be written again.
            #expect(try await sandbox.ok("domains") == "s, t\n")
            try await sandbox.ok("write", "s", "c", "3")
            #expect(try await sandbox.ok("read", "s", "c") == "3\n")

            let missing = try await sandbox.run("delete", "nosuch")
            #expect(missing.reason == .exit && missing.status == 1, "\(missing)")
            #expect(missing.stderr == "Domain nosuch does not exist\n")
        }
    }

    @Test func findPrintsEachSuiteWithMatches() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s1", "sound", "ring.caf")
            try await sandbox.ok("write", "s1", "other", "x")
            try await sandbox.ok("write", "s2", "list", "-array", "Ring tone")
            try await sandbox.ok("write", "s2", "k", "v")
            try await sandbox.ok("write", "s3", "RINGER", "1")
            try await sandbox.ok("write", "s4", "nothing", "here")
            let expected = """
                Found 1 keys in domain 's1': {
                    sound = "ring.caf";
                }
                Found 1 keys in domain 's2': {
                    list =     (
                        "Ring tone"
                    );
                }
                Found 1 keys in domain 's3': {
                    RINGER = 1;
                }

                """
            #expect(try await sandbox.ok("find", "ring") == expected)

            try await sandbox.ok("write", "s4", "alsoring", "-int", "5")
            try await sandbox.ok("write", "s4", "n", "-int", "1234")
            #expect(try await sandbox.ok("find", "23") == "Found 1 keys in domain 's4': {\n    n = 1234;\n}\n")
            #expect(try await sandbox.ok("find", "zebra") == "No domain, key, nor value containing 'zebra'\n")
        }
    }

    @Test func incrementAddsAndPrintsTheResult() async throws {
        try await withSandbox { (sandbox) throws in
            #expect(try await sandbox.ok("increment", "s", "count") == "1\n")
            #expect(try await sandbox.ok("increment", "s", "count") == "2\n")
            #expect(try await sandbox.ok("increment", "s", "count", "5") == "7\n")
            #expect(try await sandbox.ok("read-type", "s", "count") == "Type is integer\n")
            #expect(try await sandbox.ok("read", "s", "count") == "7\n")
        }
    }

    /// The help says BY "may be negative"; `increment SUITE KEY -2` must work as written.
    @Test func incrementByANegativeNumber() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "count", "-int", "10")
            let result = try await sandbox.run("increment", "s", "count", "-2")
            #expect(result.succeeded && result.stdout == "8\n", "\(result)")
            #expect(try await sandbox.ok("read", "s", "count") == (result.succeeded ? "8\n" : "10\n"))
        }
    }

    @Test func incrementRefusesWhatIsNotAnInteger() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "text", "hello")
            try await sandbox.ok("write", "s", "ratio", "-float", "1.5")
            try await sandbox.ok("write", "s", "max", "-int", "9223372036854775807")
            let before = try await sandbox.contents("s")
            expectOneLineFailure(try await sandbox.run("increment", "s", "text"), mentioning: ["text", "string"], "string")
            expectOneLineFailure(try await sandbox.run("increment", "s", "ratio"), mentioning: ["ratio", "float"], "float")
            expectOneLineFailure(try await sandbox.run("increment", "s", "max"), mentioning: ["9223372036854775807"], "overflow")
            #expect(try await sandbox.contents("s") == before)
        }
    }
}
