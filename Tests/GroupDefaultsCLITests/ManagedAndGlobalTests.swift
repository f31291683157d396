import CommandLineSupport
import Foundation
import Glibc
import ServerLaunching
import TestSupport
import Testing

/// Managed settings and the global domain through the tool, with real processes: an administrator's
/// file watched by another process, a write to a managed key stored but shadowed, the marks of
/// `read`, `groupdefaults managed`, and `-g`.
@Suite struct ManagedAndGlobalTests {
    /// Writes `managed/SUITE.plist` (or under `users/USER`) as an administrator's editor would: a
    /// new file renamed into place.
    static func writeManaged(_ sandbox: Sandbox, _ suite: String, _ text: String, user: String? = nil, mode: Int = 0o644) throws {
        let directory = user.map { sandbox.managed.appendingPathComponent("users/\($0)") } ?? sandbox.managed
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let temporary = directory.appendingPathComponent(".new")
        try Data(text.utf8).write(to: temporary)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: temporary.path)
        #expect(rename(temporary.path, directory.appendingPathComponent("\(suite).plist").path) == 0)
    }

    @Test func aChangeToAManagedFileReachesAWatchingProcess() async throws {
        try await withSandbox { (sandbox) throws in
            try FileManager.default.createDirectory(at: sandbox.managed, withIntermediateDirectories: true)
            try await sandbox.ok("write", "s", "theme", "light")
            let last = try await sandbox.lastChange("s")
            let watch = try sandbox.startShell(#"exec "$GD" watch s theme 2>&1"#)
            defer { watch.stop() }
            #expect(await watch.nextLine() == "watching s after change \(last)")
            let file = sandbox.managed.appendingPathComponent("s.plist").path
            try Self.writeManaged(
                sandbox,
                "s",
                #"<?xml version="1.0"?><plist version="1.0"><dict><key>theme</key><string>dark</string></dict></plist>"#
            )
            #expect(await watch.nextLine() == "\(last) set theme dark (managed by \(file))")
            // The file gone, the key reads the suite's own value again.
            try FileManager.default.removeItem(atPath: file)
            #expect(await watch.nextLine() == "\(last) set theme light (managed by \(file))")
        }
    }

    @Test func aWriteToAManagedKeyIsStoredShadowedAndSaidSo() async throws {
        try await withSandbox { (sandbox) throws in
            try Self.writeManaged(sandbox, "s", "{ theme = dark; \"server url\" = \"https://corp.example\"; }")
            let file = sandbox.managed.appendingPathComponent("s.plist").path
            let write = try await sandbox.run("write", "s", "theme", "light")
            #expect(write.succeeded && write.stdout.isEmpty, "\(write)")
            #expect(write.stderr == "groupdefaults: warning: theme is managed by \(file): the value was stored, but programs read dark\n", "\(write)")
            let read = try await sandbox.run("read", "s", "theme")
            #expect(read.stdout == "light\n", "the suite's own value: \(read)")
            #expect(read.stderr == "groupdefaults: note: theme is managed by \(file): programs read dark\n", "\(read)")
            let whole = try await sandbox.run("read", "s")
            #expect(whole.stderr.split(separator: "\n").count == 2 && whole.stderr.contains("server url is managed"), "\(whole)")
            // Unmanaged keys are written and read without a word.
            try await sandbox.ok("write", "s", "other", "x")
            #expect(try await sandbox.ok("read", "s", "other") == "x\n")

            #expect(
                try await sandbox.ok("managed") == "s server url https://corp.example (\(file))\ns theme dark (\(file))\n"
            )
            #expect(try await sandbox.ok("managed", "other").isEmpty)
            let json = try await sandbox.ok("managed", "s", "--json").split(separator: "\n").map { try JSONValue.parse(String($0)) }
            #expect(json.map { $0["key"] } == [.string("server url"), .string("theme")], "\(json)")
            #expect(json.last?["value"] == .string("dark") && json.last?["file"] == .string(file), "\(json)")
        }
    }

    @Test func aManagedFileThatCannotBeUsedWholeIsIgnoredAndListedWithTheReason() async throws {
        try await withSandbox { (sandbox) throws in
            try Self.writeManaged(sandbox, "s", "{ theme = dark; }", mode: 0o666)
            // No warning of a managed key: the file is ignored, and the log says so, once.
            let write = try await sandbox.run("write", "s", "theme", "light")
            #expect(write.succeeded && !write.stderr.contains("warning"), "\(write)")
            #expect(write.stderr.split(separator: "\n").count == 1 && write.stderr.contains("s.plist ignored: writable by others"), "\(write)")
            let listed = try await sandbox.run("managed")
            #expect(listed.succeeded && listed.stderr.split(separator: "\n").count == 1, "\(listed)")
            #expect(listed.stdout.hasPrefix("s ignored: \(sandbox.managed.path)/s.plist: writable by others than its owner (mode 666"), "\(listed)")
            try Self.writeManaged(sandbox, "s", "{ theme = dark; ", mode: 0o644)
            #expect(try await sandbox.run("managed").stdout.contains("s.plist: old-style property list"))
            try Self.writeManaged(sandbox, "s", "{ theme = dark; \"\" = x; }", mode: 0o644)
            #expect(try await sandbox.run("managed").stdout.contains("s.plist: key \"\""))
        }
    }

    @Test func dashGIsTheGlobalDomainWhichEverySuiteReadsAfterItsOwn() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "-g", "AppleLanguages", "-array", "fr", "en")
            try await sandbox.ok("write", "--directory", sandbox.suites.path, "-g", "theme", "dark")
            #expect(try await sandbox.ok("read", "-g", "theme") == "dark\n")
            #expect(try await sandbox.ok("domains") == "NSGlobalDomain\n")
            #expect(try await sandbox.ok("read", "NSGlobalDomain", "theme") == "dark\n")
            try await sandbox.ok("delete", "-g", "theme")
            let gone = try await sandbox.run("read", "-g", "theme")
            #expect(!gone.succeeded)
        }
    }
}
