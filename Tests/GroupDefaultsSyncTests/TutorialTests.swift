import AsyncHTTPClient
import Foundation
import GroupDefaults
import GroupDefaultsSync
import Observation
import TestSupport
import Testing

// The code of the DocC tutorial (`Documentation.docc/SoundThatFollowsTheUser.md`), compiled here:
// each region between `// snippet: NAME` and `// end snippet` is the article's code block marked
// `<!-- snippet: NAME -->`, character for character (`articleSnippetsAreThisCode` checks it), and
// the tests below run it.

// snippet: keys
extension SharedDefaults.Keys {
    /// The sound a new message plays: a file in the group's Library/Sounds.
    static let messageSound = Key<String>("notification.sound", default: "default")
    /// Where the settings window was: this machine's business, not the other devices'.
    static let settingsFrame = Key<[Double]>("settings.frame", default: [0, 0, 480, 640], sync: .local)
}
// end snippet

// snippet: open
/// How the settings evolved: each step runs once per suite, whichever process starts first.
let chatMigrations = [
    SharedDefaults.Migration(1, "the sound moves under notification.") { tx in
        try tx.renameKey("sound", to: "notification.sound")
    }
]

/// The group's suite, as every process of the app opens it.
func openChatSettings(in container: AppGroupContainer) throws -> SharedDefaults {
    try container.createDirectories()
    let defaults = try SharedDefaults(appGroup: container)
    try defaults.migrate(chatMigrations)
    return defaults
}
// end snippet

// snippet: host-app
/// The host app: the user picked `file` in the settings screen.
func chooseSound(_ file: URL, in container: AppGroupContainer) throws {
    let defaults = try openChatSettings(in: container)
    let installed = container.soundsDirectory.appendingPathComponent(file.lastPathComponent)
    if !FileManager.default.fileExists(atPath: installed.path) {
        try FileManager.default.copyItem(at: file, to: installed)
    }
    defaults[.messageSound] = file.lastPathComponent  // the extension sees it as soon as this returns
}
// end snippet

// snippet: notification-service
/// The notification service: the payload to deliver, with the chosen sound when it can be found;
/// otherwise the payload as it came (a best attempt, never an empty notification).
func bestAttemptContent(for payload: Data, in container: AppGroupContainer) -> Data {
    guard var message = try? JSONSerialization.jsonObject(with: payload) as? [String: Any],
        var aps = message["aps"] as? [String: Any], aps["mutable-content"] as? Int == 1,
        let defaults = try? openChatSettings(in: container)
    else { return payload }
    let sound = defaults[.messageSound]
    let file = container.soundsDirectory.appendingPathComponent(sound)
    guard ["aiff", "wav", "caf", "mp3"].contains(file.pathExtension.lowercased()),
        FileManager.default.fileExists(atPath: file.path)
    else { return payload }
    aps["sound"] = sound
    message["aps"] = aps
    return (try? JSONSerialization.data(withJSONObject: message)) ?? payload
}
// end snippet

// snippet: settings-screen
/// The settings screen shows the chosen sound, and follows it when another process or device
/// changes it.
@MainActor
final class SoundSettingsScreen {
    let settings: ObservedDefaults
    private(set) var shownSound = ""

    init(defaults: SharedDefaults) {
        settings = ObservedDefaults(defaults)  // announces changes on the main actor
        render()
    }

    func render() {
        withObservationTracking {
            shownSound = settings[.messageSound]
        } onChange: {
            Task { @MainActor in self.render() }
        }
    }

    func choose(_ sound: String) {
        settings[.messageSound] = sound
    }
}
// end snippet

// snippet: sources
/// A line for the app's log about a change of the sound, saying where it came from.
func describe(_ update: SharedDefaults.KeyChange<String>) -> String {
    switch update.source {
    case nil: "the sound is \(update.value)"
    case .thisProcess?: "you chose \(update.value)"
    case .anotherProcess?: "another app of the group chose \(update.value)"
    case .anotherDevice(let device)?:
        "device \(device) chose \(update.value)" + (update.isConflict ? ", replacing a choice made here" : "")
    case .anotherAccount(let account, _)?:
        "\(account) chose \(update.value)" + (update.isConflict ? ", replacing a choice made here" : "")
    }
}
// end snippet

// snippet: sync
/// Syncs the suite with a groupdefaults-server once, in-process (a daemon would run
/// `groupdefaults-sync run` instead).
func syncChatSettings(_ defaults: SharedDefaults, server: URL, tokenFile: String) async throws -> SyncReport {
    try SyncSettings(server: server, tokenFile: tokenFile).store(in: defaults)
    let http = try SyncClient.makeHTTPClient()
    do {
        let report = try await SyncEngine(configured: defaults, http: http).syncOnce()
        try await http.shutdown()
        return report
    } catch {
        try? await http.shutdown()
        throw error
    }
}
// end snippet

@Suite("The DocC tutorial's code", .timeLimit(.minutes(2)))
struct TutorialTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("every code block of the tutorial and of the migration article is code compiled here, unchanged")
    func articleSnippetsAreThisCode() throws {
        let articles: [(article: String, code: [String])] = [
            ("Sources/GroupDefaults/Documentation.docc/SoundThatFollowsTheUser.md", ["Tests/GroupDefaultsSyncTests/TutorialTests.swift"]),
            ("Sources/GroupDefaults/Documentation.docc/MigratingFromUserDefaults.md", ["Tests/GroupDefaultsTests/MigrationArticleTests.swift"]),
        ]
        for (article, code) in articles {
            let text = try String(contentsOf: Self.root.appendingPathComponent(article), encoding: .utf8)
            let regions = try code.reduce(into: [String: String]()) { regions, file in
                regions.merge(Snippets.regions(try String(contentsOf: Self.root.appendingPathComponent(file), encoding: .utf8))) { a, _ in a }
            }
            let blocks = Snippets.blocks(text)
            #expect(!blocks.isEmpty, "\(article) has no Swift code")
            for block in blocks {
                guard let name = block.name else {
                    Issue.record("\(article): a Swift code block without a `<!-- snippet: NAME -->` line before it:\n\(block.code)")
                    continue
                }
                #expect(regions[name] == block.code, "\(article): the snippet \(name) differs from its code in \(code)")
            }
        }
    }

    @Test("the tutorial's host app and notification service share the sound; the settings screen follows it; sync carries it")
    func tutorialRuns() async throws {
        try await SyncServer.with(.lmdb) { server in
            try await withTemporaryDirectory { root in
                let phone = try AppGroupContainer(groupIdentifier: "group.com.example.chat", root: root.appendingPathComponent("phone"))
                let tablet = try AppGroupContainer(groupIdentifier: "group.com.example.chat", root: root.appendingPathComponent("tablet"))
                // An install from before the rename: the migration moves the old key.
                try phone.createDirectories()
                try SharedDefaults(appGroup: phone).set("old.caf", forKey: "sound")
                #expect(try openChatSettings(in: phone)[.messageSound] == "old.caf")

                let file = root.appendingPathComponent("bell.caf")
                try Data("caf".utf8).write(to: file)
                let phoneSettings = try openChatSettings(in: phone)
                let screen = await MainActor.run { SoundSettingsScreen(defaults: phoneSettings) }
                try chooseSound(file, in: phone)
                #expect(await eventually { await MainActor.run { screen.shownSound == "bell.caf" } })

                let payload = Data(#"{"aps":{"alert":"Hi","mutable-content":1}}"#.utf8)
                let delivered = try JSONSerialization.jsonObject(with: bestAttemptContent(for: payload, in: phone)) as? [String: Any]
                #expect((delivered?["aps"] as? [String: Any])?["sound"] as? String == "bell.caf")
                let plain = Data(#"{"aps":{"alert":"Hi"}}"#.utf8)
                #expect(bestAttemptContent(for: plain, in: phone) == plain)

                // The tablet: the same sound file ships with the app; the choice is what syncs.
                let tokenFile = root.appendingPathComponent("token").path
                try Data(server.token.utf8).write(to: URL(fileURLWithPath: tokenFile))
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: tokenFile)
                phoneSettings[.settingsFrame] = [20, 20, 480, 640]  // this machine's only
                _ = try await syncChatSettings(try openChatSettings(in: phone), server: server.url, tokenFile: tokenFile)
                // Configured again at each sync (`SyncSettings.store`), the frame still stays home.
                phoneSettings[.settingsFrame] = [30, 30, 480, 640]
                _ = try await syncChatSettings(try openChatSettings(in: phone), server: server.url, tokenFile: tokenFile)
                #expect(try await server.snapshot("group.com.example.chat").entries["settings.frame"] == nil)
                try tablet.createDirectories()
                try FileManager.default.copyItem(at: file, to: tablet.soundsDirectory.appendingPathComponent("bell.caf"))
                let tabletSettings = try openChatSettings(in: tablet)
                var updates = tabletSettings.changes(for: .messageSound).makeAsyncIterator()
                #expect(describe(try #require(await updates.next())) == "the sound is default")
                _ = try await syncChatSettings(tabletSettings, server: server.url, tokenFile: tokenFile)
                let arrived = try #require(await updates.next())
                #expect(describe(arrived) == "device \(try openChatSettings(in: phone).origin) chose bell.caf")
                let onTablet = try JSONSerialization.jsonObject(with: bestAttemptContent(for: payload, in: tablet)) as? [String: Any]
                #expect((onTablet?["aps"] as? [String: Any])?["sound"] as? String == "bell.caf")

                await MainActor.run { screen.choose("chime.caf") }
                #expect(await eventually { await MainActor.run { screen.shownSound == "chime.caf" } })
                await screen.settings.stop()
            }
        }
    }
}

/// Code blocks of an article and regions of a source file.
enum Snippets {
    /// Each ```swift block of `markdown`, with the name of the `<!-- snippet: NAME -->` line right
    /// before it (nil if there is none).
    static func blocks(_ markdown: String) -> [(name: String?, code: String)] {
        let lines = markdown.components(separatedBy: "\n")
        var blocks: [(String?, String)] = []
        var index = 0
        while index < lines.count {
            guard lines[index].trimmingCharacters(in: .whitespaces) == "```swift" else {
                index += 1
                continue
            }
            let previous = index > 0 ? lines[index - 1].trimmingCharacters(in: .whitespaces) : ""
            let name =
                previous.hasPrefix("<!-- snippet: ") && previous.hasSuffix(" -->")
                ? String(previous.dropFirst("<!-- snippet: ".count).dropLast(" -->".count)) : nil
            var code: [String] = []
            index += 1
            while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                code.append(lines[index])
                index += 1
            }
            blocks.append((name, code.joined(separator: "\n")))
            index += 1
        }
        return blocks
    }

    /// The regions of `source` between `// snippet: NAME` and `// end snippet`, by name.
    static func regions(_ source: String) -> [String: String] {
        var regions: [String: String] = [:]
        var name: String?
        var lines: [String] = []
        for line in source.components(separatedBy: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("// snippet: ") {
                name = String(trimmed.dropFirst("// snippet: ".count))
                lines = []
            } else if trimmed == "// end snippet", let current = name {
                // As the article shows it: without the indentation the region has in its file.
                let indent =
                    lines.filter { !$0.trimmingCharacters(in: .whitespaces).isEmpty }
                    .map { $0.prefix { $0 == " " }.count }.min() ?? 0
                regions[current] = lines.map { String($0.dropFirst(min(indent, $0.count))) }.joined(separator: "\n")
                name = nil
            } else if name != nil {
                lines.append(line)
            }
        }
        return regions
    }
}
