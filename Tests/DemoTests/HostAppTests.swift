import Foundation
import Glibc
import GroupDefaults
import TestSupport
import Testing

@Suite("demo-host-app")
struct HostAppTests {
    @Test("choose-sound copies the sound into Library/Sounds and stores its name in the group's suite")
    func choosesSound() async throws {
        try await withSandbox { sandbox in
            let tone = Fixture.wav(seconds: 1)
            let path = try sandbox.file("tone.wav", tone)
            let result = try await sandbox.host("choose-sound", "ring.wav", path)
            #expect(result.succeeded, "\(result)")
            #expect(result.stdout == "sound = ring.wav (WAV, 1.0 s)\n")
            #expect(result.stderr.isEmpty)
            #expect(FileManager.default.contents(atPath: sandbox.sounds.appendingPathComponent("ring.wav").path) == tone)
            #expect(try await sandbox.host("show").stdout == "sound = ring.wav\n")

            // The suite is the group's, in Library/Preferences, readable by any process.
            let defaults = try SharedDefaults(
                existingSuiteName: Sandbox.group,
                directory: sandbox.preferences
            )
            #expect(defaults.string(forKey: "sound") == "ring.wav")
            for directory in [sandbox.container, sandbox.preferences, sandbox.sounds] {
                let mode = try FileManager.default.attributesOfItem(atPath: directory.path)[.posixPermissions] as? NSNumber
                #expect(mode?.intValue == 0o700, "\(directory.path)")
            }
            // No temporary file is left behind.
            #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.sounds.path) == ["ring.wav"])
        }
    }

    @Test("every accepted kind: WAV, AIFF, AIFF-C, CAF, MP3 with a tag or a frame; a second choice replaces the first")
    func acceptedKinds() async throws {
        try await withSandbox { sandbox in
            let sounds: [(String, Data, String)] = [
                ("a.wav", Fixture.wav(seconds: 1), "WAV, 1.0 s"),
                ("b.aiff", Fixture.aiff(seconds: 1), "AIFF, 1.0 s"),
                ("c.aif", Fixture.aiff(seconds: 2, rate: 44100, compressed: true), "AIFF, 2.0 s"),
                ("d.caf", Fixture.caf, "CAF"),
                ("e.mp3", Fixture.mp3WithTag, "MP3"),
                ("f.MP3", Fixture.mp3Frame, "MP3"),
                ("g.wav", Fixture.wav(seconds: 30), "WAV, 30.0 s"),
            ]
            for (name, data, description) in sounds {
                let result = try await sandbox.host("choose-sound", name, sandbox.file("source-" + name, data))
                #expect(result.succeeded, "\(name): \(result)")
                #expect(result.stdout == "sound = \(name) (\(description))\n")
                #expect(try await sandbox.host("show").stdout == "sound = \(name)\n")
            }
        }
    }

    @Test("refuses a sound longer than 30 s, a wrong name, bytes of another kind; nothing changes")
    func refusals() async throws {
        try await withSandbox { sandbox in
            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            let cases: [(name: String, data: Data?, fragments: [String])] = [
                ("long.wav", Fixture.wav(seconds: 31), ["31.0 s", "at most 30 s"]),
                ("long.aiff", Fixture.aiff(seconds: 31), ["31.0 s", "at most 30 s"]),
                ("long.aif", Fixture.aiff(seconds: 31, rate: 22050, compressed: true), ["31.0 s"]),
                ("tone.ogg", Fixture.wav(seconds: 1), ["does not end in .aiff, .aif, .wav, .caf or .mp3"]),
                ("tone", Fixture.wav(seconds: 1), ["does not end in"]),
                ("../escape.wav", Fixture.wav(seconds: 1), ["not a plain file name"]),
                (".hidden.wav", Fixture.wav(seconds: 1), ["not a plain file name"]),
                ("tone.mp3", Fixture.wav(seconds: 1), ["not an MP3 file"]),
                ("tone.wav", Fixture.aiff(seconds: 1), ["not a WAV file"]),
                ("tone.aiff", Fixture.wav(seconds: 1), ["not an AIFF file"]),
                ("tone.caf", Fixture.mp3WithTag, ["not a CAF file"]),
                ("empty.wav", Data(), ["not a WAV file"]),
                ("nofmt.wav", Data("RIFF\u{4}\0\0\0WAVE".utf8), ["no valid fmt chunk"]),
                ("nocomm.aiff", Data("FORM\u{0}\0\0\u{4}AIFF".utf8), ["no valid COMM chunk"]),
                ("missing.wav", nil, ["No such file"]),
            ]
            for (name, data, fragments) in cases {
                let path =
                    data == nil
                    ? sandbox.files.appendingPathComponent("absent.wav").path
                    : try sandbox.file("source-\(UUID().uuidString)", data!)
                let result = try await sandbox.host("choose-sound", name, path)
                expectFailure(result, mentioning: fragments)
                #expect(try await sandbox.host("show").stdout == "sound = ring.wav\n", "after \(name)")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.sounds.path) == ["ring.wav"])
            // A directory is not a sound.
            expectFailure(try await sandbox.host("choose-sound", "dir.wav", sandbox.files.path), mentioning: ["not a regular file"])
        }
    }

    @Test("an invalid group identifier and a bad command line are one line on stderr")
    func badInput() async throws {
        try await withSandbox { sandbox in
            let path = try sandbox.file("tone.wav", Fixture.wav(seconds: 1))
            expectFailure(try await sandbox.host("choose-sound", "ring.wav", path, group: "a/b"), mentioning: ["must not contain '/'"])
            expectFailure(try await sandbox.host("show", group: ""), mentioning: ["must not be empty"])
            expectFailure(try await sandbox.host("choose-sound", "ring.wav"), mentioning: ["Missing expected argument"])
            expectFailure(try await sandbox.host("play"), mentioning: ["play"])
            #expect(!FileManager.default.fileExists(atPath: sandbox.root.path))
        }
    }

    @Test("show creates nothing and prints the default when nothing was chosen; lists other settings")
    func show() async throws {
        try await withSandbox { sandbox in
            let result = try await sandbox.host("show")
            #expect(result.succeeded && result.stdout == "sound = (default)\n", "\(result)")
            #expect(!FileManager.default.fileExists(atPath: sandbox.root.path))

            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            let defaults = try SharedDefaults(appGroup: AppGroupContainer(groupIdentifier: Sandbox.group, root: sandbox.root))
            defaults.set(0.5, forKey: "volume")
            #expect(try await sandbox.host("show").stdout == "sound = ring.wav\nvolume = 0.5\n")
        }
    }

    @Test("watch prints each change another process makes, and ends on SIGTERM", .timeLimit(.minutes(1)))
    func watch() async throws {
        try await withSandbox { sandbox in
            // Started with SIGTERM blocked: the watcher must unblock it itself.
            let watcher = try RunningProcess(
                Binary.hostApp,
                ["--group", Sandbox.group, "--root", sandbox.root.path, "watch"],
                terminationSignals: .blocked
            )
            defer { watcher.stop() }

            var lines: [String] = []
            func waitFor(_ line: String) async -> Bool {
                let deadline = ContinuousClock.now + .seconds(30)
                while let next = await watcher.nextLine(timeout: deadline - ContinuousClock.now) {
                    lines.append(next)
                    if next == line { return true }
                }
                return false
            }
            #expect(await waitFor("watching \(Sandbox.group)"))
            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            #expect(await waitFor("sound = ring.wav"))
            try await sandbox.choose("bell.aiff", Fixture.aiff(seconds: 1))
            #expect(await waitFor("sound = bell.aiff"))
            let defaults = try SharedDefaults(appGroup: AppGroupContainer(groupIdentifier: Sandbox.group, root: sandbox.root))
            defaults.removeObject(forKey: "sound")
            #expect(await waitFor("removed sound"))

            watcher.signal(SIGTERM)
            let result = await watcher.finish()
            #expect(result.reason == .exit && result.status == 0)
            lines += result.stdout.split(separator: "\n").map(String.init)
            #expect(lines == ["watching \(Sandbox.group)", "sound = ring.wav", "sound = bell.aiff", "removed sound"])
        }
    }
}
