import Foundation
import GroupDefaults
import TestSupport
import Testing

@Suite("demo-notification-service")
struct NotificationServiceTests {
    static let payload = Data(
        """
        {"aps":{"alert":{"title":"Ana","body":"Lunch at noon? \\u00e9"},"badge":3,"mutable-content":1},
         "chat-id":42,"ratio":0.25,"tags":["a/b",true,null]}

        """.utf8
    )

    @Test("sets aps.sound to the chosen sound and keeps everything else; from a file or stdin")
    func rewrites() async throws {
        try await withSandbox { sandbox in
            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            let file = try sandbox.file("payload.json", Self.payload)
            for result in [try await sandbox.service([file]), try await sandbox.service(stdin: Self.payload)] {
                #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
                let expected = try json(Self.payload).mutableCopy() as! NSMutableDictionary
                let aps = (expected["aps"] as! NSDictionary).mutableCopy() as! NSMutableDictionary
                aps["sound"] = "ring.wav"
                expected["aps"] = aps
                #expect(try json(result.stdoutData) == expected)
                #expect(result.stdout.hasSuffix("}\n"))
            }
            // The next notification uses a new choice at once.
            try await sandbox.choose("bell.aiff", Fixture.aiff(seconds: 2))
            let next = try await sandbox.service([file])
            #expect((try json(next.stdoutData)["aps"] as? NSDictionary)?["sound"] as? String == "bell.aiff")
        }
    }

    @Test("a critical alert's sound dictionary keeps its volume and gets the name")
    func criticalSound() async throws {
        try await withSandbox { sandbox in
            try await sandbox.choose("ring.caf", Fixture.caf)
            let payload = Data(#"{"aps":{"mutable-content":1,"sound":{"critical":1,"name":"default","volume":0.5}}}"#.utf8)
            let result = try await sandbox.service(stdin: payload)
            #expect(result.succeeded, "\(result)")
            let sound = (try json(result.stdoutData)["aps"] as? NSDictionary)?["sound"] as? NSDictionary
            #expect(sound == ["critical": 1, "name": "ring.caf", "volume": 0.5] as NSDictionary)
        }
    }

    /// Runs the service on `payload` and expects the payload delivered unchanged, byte for byte,
    /// with exit status 0 and one line on stderr mentioning `fragments`.
    func expectUnchanged(
        _ sandbox: Sandbox,
        _ payload: Data = payload,
        arguments: [String] = [],
        group: String = Sandbox.group,
        mentioning fragments: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let result = try await sandbox.service(arguments, stdin: payload, group: group)
        #expect(result.succeeded, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stdoutData == payload, "\(result)", sourceLocation: sourceLocation)
        expectOneLine(result.stderr, mentioning: ["delivered unchanged"] + fragments, sourceLocation: sourceLocation)
    }

    @Test("malformed JSON, no aps, no mutable-content: delivered unchanged")
    func badPayloads() async throws {
        try await withSandbox { sandbox in
            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            try await expectUnchanged(sandbox, Data(#"{"aps":{"mutable-content":1"#.utf8), mentioning: ["not valid JSON"])
            try await expectUnchanged(sandbox, Data([0x7B, 0xFF, 0xFE, 0x7D]), mentioning: ["not valid JSON"])
            try await expectUnchanged(sandbox, Data("[1,2]".utf8), mentioning: ["not a JSON object"])
            try await expectUnchanged(sandbox, Data(#"{"alert":"hi"}"#.utf8), mentioning: ["no aps dictionary"])
            try await expectUnchanged(sandbox, Data(#"{"aps":"hi"}"#.utf8), mentioning: ["no aps dictionary"])
            try await expectUnchanged(sandbox, Data(#"{"aps":{"alert":"hi"}}"#.utf8), mentioning: ["mutable-content is not 1"])
            try await expectUnchanged(sandbox, Data(#"{"aps":{"alert":"hi","mutable-content":0}}"#.utf8), mentioning: ["mutable-content is not 1"])
        }
    }

    @Test("no chosen sound: no container, no suite, no key, not a string")
    func noChoice() async throws {
        try await withSandbox { sandbox in
            try await expectUnchanged(sandbox, mentioning: ["no sound chosen"])
            #expect(!FileManager.default.fileExists(atPath: sandbox.root.path), "the service creates nothing")

            let defaults = try SharedDefaults(appGroup: AppGroupContainer(groupIdentifier: Sandbox.group, root: sandbox.root))
            defaults.set(0.5, forKey: "volume")
            try await expectUnchanged(sandbox, mentioning: ["no sound chosen"])
            defaults.set(3, forKey: "sound")
            try await expectUnchanged(sandbox, mentioning: ["not a file name"])
        }
    }

    @Test("a missing or invalid sound file: delivered unchanged")
    func badSoundFiles() async throws {
        try await withSandbox { sandbox in
            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            let installed = sandbox.sounds.appendingPathComponent("ring.wav")
            try FileManager.default.removeItem(at: installed)
            try await expectUnchanged(sandbox, mentioning: ["cannot be played", "No such file"])

            try Data("not a sound".utf8).write(to: installed)
            try await expectUnchanged(sandbox, mentioning: ["cannot be played", "not a WAV file"])

            try Fixture.wav(seconds: 31).write(to: installed)
            try await expectUnchanged(sandbox, mentioning: ["cannot be played", "31.0 s"])

            try FileManager.default.removeItem(at: installed)
            try FileManager.default.createDirectory(at: installed, withIntermediateDirectories: false)
            try await expectUnchanged(sandbox, mentioning: ["not a regular file"])

            // A name stored by someone else, not through the host app.
            let defaults = try SharedDefaults(appGroup: AppGroupContainer(groupIdentifier: Sandbox.group, root: sandbox.root))
            for name in ["../../../etc/passwd", "ring.ogg", ""] {
                defaults.set(name, forKey: "sound")
                try await expectUnchanged(sandbox, mentioning: ["cannot be played"])
            }
        }
    }

    @Test("an unreadable suite or group: delivered unchanged")
    func unreadableSuite() async throws {
        try await withSandbox { sandbox in
            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            let suite = sandbox.preferences.appendingPathComponent(Sandbox.group + ".lmdb")
            try Data(repeating: 0xAB, count: 8192).write(to: suite)
            try await expectUnchanged(sandbox, mentioning: ["cannot read the group's settings"])

            try await expectUnchanged(sandbox, group: "a/b", mentioning: ["cannot find the app group"])
        }
    }

    @Test("past the deadline: delivered unchanged")
    func deadline() async throws {
        try await withSandbox { sandbox in
            try await sandbox.choose("ring.wav", Fixture.wav(seconds: 1))
            try await expectUnchanged(sandbox, arguments: ["--deadline", "0"], mentioning: ["deadline"])
            let result = try await sandbox.service(["--deadline", "5"], stdin: Self.payload)
            #expect(result.succeeded && result.stderr.isEmpty, "\(result)")
        }
    }

    @Test("nothing to deliver or a bad command line: a non-zero exit and one line, never an empty notification")
    func nothingToDeliver() async throws {
        try await withSandbox { sandbox in
            expectFailure(try await sandbox.service(stdin: Data()), mentioning: ["empty"])
            expectFailure(try await sandbox.service(stdin: Data(" \n".utf8)), mentioning: ["empty"])
            expectFailure(try await sandbox.service([sandbox.files.appendingPathComponent("absent.json").path]), mentioning: ["cannot read"])
            expectFailure(try await sandbox.service(["--deadline", "soon"], stdin: Self.payload), mentioning: ["deadline"])
            expectFailure(try await sandbox.service(["--deadline=-1"], stdin: Self.payload), mentioning: ["deadline"])
            for result in [try await sandbox.service(stdin: Data())] { #expect(result.stdoutData.isEmpty) }
        }
    }
}
