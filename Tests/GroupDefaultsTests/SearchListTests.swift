import Foundation
import TestSupport
import Testing

@testable import GroupDefaults

/// The search list, as the README promises it: managed settings, the argument domain, the suite,
/// the added suites (the last added first), the global domain, the registered defaults; writes go
/// to the suite only; observers hear of a change in any domain that changes what a key reads.
@Suite("The search list", .timeLimit(.minutes(2)))
struct SearchListTests {
    /// A configuration that reads `arguments` and the managed files under `managed`.
    static func configuration(arguments: [String] = [], managed: URL? = nil) -> SharedDefaults.Configuration {
        var configuration = SharedDefaults.Configuration()
        configuration.arguments = arguments
        configuration.managedDirectory = managed?.path
        return configuration
    }

    /// Writes a managed settings file, mode 0644, atomically (as an administrator's editor would).
    static func writeManaged(_ text: String, suite: String, in directory: URL, mode: Int = 0o644) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let temporary = directory.appendingPathComponent(".\(suite).tmp")
        try Data(text.utf8).write(to: temporary)
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: temporary.path)
        #expect(rename(temporary.path, directory.appendingPathComponent("\(suite).plist").path) == 0)
    }

    @Test("the argument domain is parsed as Foundation parses it")
    func argumentParsing() {
        let parsed = ArgumentDomain.parse([
            "/usr/bin/app", "-sound", "bell.caf", "-volume", " 3 ", "-quiet", "{ from = 22; to = 7; }", "-list", "(a, b)",
            "-bad", "{x", "-flag", "-neg", "-1", "-", "skipped", "-xml", "<plist><integer>4</integer></plist>", "-quoted", "\"q\"",
            "-json", "[1, 2]", "-sound", "later.caf", "-last",
        ])
        #expect(parsed["sound"] == .string("later.caf"))
        #expect(parsed["volume"] == .string("3"))
        #expect(parsed["quiet"] == .dictionary(["from": .string("22"), "to": .string("7")]))
        #expect(parsed["list"] == .array([.string("a"), .string("b")]))
        #expect(parsed["bad"] == .string("{x"))
        #expect(parsed["flag"] == nil && parsed["neg"] == nil && parsed["last"] == nil && parsed[""] == nil)
        #expect(parsed["xml"] == .integer(4) && parsed["quoted"] == .string("q"))
        #expect(parsed["json"] == .string("[1, 2]"))
    }

    @Test("each domain in its place: managed, arguments, suite, added suites (last added first), global domain, registered")
    func order() throws {
        try withTemporaryDirectory { directory in
            let managed = directory.appendingPathComponent("managed")
            try Self.writeManaged("{ k1 = managed; }", suite: "app", in: managed)
            let configuration = Self.configuration(arguments: ["app", "-k1", "argument", "-k2", "argument"], managed: managed)
            let app = try SharedDefaults(suiteName: "app", directory: directory, configuration: configuration)
            let group = try SharedDefaults(suiteName: "group", directory: directory)
            let other = try SharedDefaults(suiteName: "other", directory: directory)
            let global = try SharedDefaults(suiteName: SharedDefaults.globalDomain, directory: directory)
            for key in ["k1", "k2", "k3", "k4", "k5", "k6"] {
                app.set("suite", forKey: key)
                group.set("group", forKey: key)
                other.set("other", forKey: key)
                global.set("global", forKey: key)
            }
            app.register(defaults: [
                "k1": "registered", "k2": "registered", "k3": "registered", "k4": "registered", "k5": "registered", "k6": "registered",
                "k7": "registered",
            ])
            app.addSuite(named: "other")
            app.addSuite(named: "group")
            app.removeObject(forKey: "k4")
            app.removeObject(forKey: "k5")
            group.removeObject(forKey: "k5")
            app.removeObject(forKey: "k6")
            group.removeObject(forKey: "k6")
            other.removeObject(forKey: "k6")
            let read = ["k1", "k2", "k3", "k4", "k5", "k6", "k7"].map { app.string(forKey: $0) }
            #expect(read == ["managed", "argument", "suite", "group", "other", "global", "registered"])
            #expect(app.resolvedValue(forKey: "k1")?.domain == .managed(file: managed.appendingPathComponent("app.plist").path))
            #expect(app.resolvedValue(forKey: "k4")?.domain == .addedSuite("group"))
            #expect(app.resolvedValue(forKey: "k6")?.domain == .global)
            #expect(app.objectIsForced(forKey: "k1") && !app.objectIsForced(forKey: "k2"))

            // Writes go to the suite only; the domains above it still win.
            app.set("written", forKey: "k2")
            #expect(app.string(forKey: "k2") == "argument")
            #expect(try app.read { try $0.value(forKey: "k2") } == .string("written"))
            #expect(group.string(forKey: "k2") == "group")

            // Removing a suite from the list, and the list of a handle is its own.
            app.removeSuite(named: "group")
            #expect(app.string(forKey: "k4") == "other")
            let second = try SharedDefaults(suiteName: "app", directory: directory, configuration: Self.configuration())
            #expect(second.string(forKey: "k4") == "global" && second.string(forKey: "k1") == "suite")

            // dictionaryRepresentation is the registered defaults and the suite, as Foundation's on Linux.
            let all = app.dictionaryRepresentation()
            #expect(all["k1"] as? String == "suite" && all["k2"] as? String == "written" && all["k6"] as? String == "registered")
        }
    }

    @Test("an added suite or global domain that does not exist reads as empty and is not created")
    func missingLowerSuites() async throws {
        try await withTemporaryDirectory { directory in
            let app = try SharedDefaults(suiteName: "app", directory: directory, configuration: Self.configuration())
            app.addSuite(named: "later")
            #expect(app.string(forKey: "k") == nil)
            #expect(try SharedDefaults.suiteNames(in: directory) == ["app"])
            app.addSuite(named: "bad/name")
            #expect(app.lastError?.code == .invalidSuiteName)
            let later = try SharedDefaults(suiteName: "later", directory: directory)
            later.set("from later", forKey: "k")
            #expect(await eventually { app.string(forKey: "k") == "from later" })
        }
    }

    @Test("volatile and persistent domains, with Foundation's names")
    func volatileAndPersistent() throws {
        try withTemporaryDirectory { directory in
            let app = try SharedDefaults(suiteName: "app", directory: directory, configuration: Self.configuration(arguments: ["x", "-a", "1"]))
            #expect(app.volatileDomain(forName: SharedDefaults.argumentDomain) as? [String: String] == ["a": "1"])
            #expect(app.volatileDomainNames == [SharedDefaults.argumentDomain])
            app.setVolatileDomain(["v": 1], forName: "mine")
            #expect(Set(app.volatileDomainNames) == [SharedDefaults.argumentDomain, "mine"])
            #expect(app.integer(forKey: "v") == 0, "a volatile domain of its own is not in the search list")
            app.setVolatileDomain(["a": "2"], forName: SharedDefaults.argumentDomain)
            #expect(app.string(forKey: "a") == "2")
            app.setVolatileDomain(["r": true], forName: SharedDefaults.registrationDomain)
            #expect(app.bool(forKey: "r") && app.volatileDomain(forName: SharedDefaults.registrationDomain)["r"] as? Bool == true)
            app.removeVolatileDomain(forName: "mine")
            #expect(!app.volatileDomainNames.contains("mine"))
            app.setVolatileDomain(["bad": NSObject()], forName: SharedDefaults.argumentDomain)
            #expect(app.lastError?.code == .unsupportedValue && app.string(forKey: "a") == "2")

            app.set("own", forKey: "o")
            #expect(app.persistentDomain(forName: "app")?["o"] as? String == "own")
            #expect(app.persistentDomain(forName: "none")?.isEmpty == true)
            #expect(try SharedDefaults.suiteNames(in: directory) == ["app"])
            app.setPersistentDomain(["g": 7], forName: SharedDefaults.globalDomain)
            #expect(app.integer(forKey: "g") == 7)
            app.setPersistentDomain(["p": "q"], forName: "app")
            #expect(app.string(forKey: "o") == nil && app.string(forKey: "p") == "q")
            app.removePersistentDomain(forName: SharedDefaults.globalDomain)
            #expect(app.integer(forKey: "g") == 0 && app.persistentDomain(forName: SharedDefaults.globalDomain)?.isEmpty == true)
            #expect(app.persistentDomain(forName: "a/b") == nil && app.lastError?.code == .invalidSuiteName)
        }
    }

    @Test("a managed file that does not parse, is writable by others or holds what a suite cannot store is ignored whole")
    func badManagedFiles() async throws {
        try await withTemporaryDirectory { directory in
            let managed = directory.appendingPathComponent("managed")
            let app = try SharedDefaults(suiteName: "app", directory: directory, configuration: Self.configuration(managed: managed))
            app.set("stored", forKey: "k")
            for (text, mode, reason) in [
                ("{ k = managed; ", 0o644, "dictionary"), ("{ k = managed; }", 0o664, "writable by others"),
                ("{ k = managed; \"\" = x; }", 0o644, "key \"\""), ("( a, b )", 0o644, "not a dictionary"),
            ] {
                try Self.writeManaged(text, suite: "app", in: managed, mode: mode)
                let found = await eventually { app.managedSettings.ignoredFiles.contains { $0.reason.contains(reason) } }
                #expect(found, "\(app.managedSettings.ignoredFiles)")
                #expect(app.string(forKey: "k") == "stored" && !app.objectIsForced(forKey: "k"))
            }
            // A symbolic link is not followed, and a folder others may write is not trusted.
            let target = directory.appendingPathComponent("elsewhere.plist")
            try Data("{ k = linked; }".utf8).write(to: target)
            try FileManager.default.removeItem(at: managed.appendingPathComponent("app.plist"))
            try FileManager.default.createSymbolicLink(atPath: managed.appendingPathComponent("app.plist").path, withDestinationPath: target.path)
            #expect(await eventually { app.managedSettings.ignoredFiles.contains { $0.reason.contains("symbolic link") } })
            #expect(app.string(forKey: "k") == "stored")
            try FileManager.default.removeItem(at: managed.appendingPathComponent("app.plist"))
            try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: managed.path)
            try Self.writeManaged("{ k = managed; }", suite: "app", in: managed)
            #expect(await eventually { app.managedSettings.ignoredFiles.contains { $0.reason.contains("anyone could put a file there") } })
            #expect(app.string(forKey: "k") == "stored")
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: managed.path)
            #expect(await eventually { app.string(forKey: "k") == "managed" })
            #expect(app.objectIsForced(forKey: "k") && app.managedSettings.ignoredFiles.isEmpty)
            // A write is stored, shadowed, and says so.
            app.set("new", forKey: "k")
            #expect(app.lastError?.code == .managedKey && app.string(forKey: "k") == "managed")
            #expect(try await app.read { try $0.value(forKey: "k") } == .string("new"))
            // The user's own file wins key by key.
            if let user = ManagedSettings.userName {
                try Self.writeManaged("{ k = mine; }", suite: "app", in: managed.appendingPathComponent("users/\(user)"))
                #expect(await eventually { app.string(forKey: "k") == "mine" })
            }
        }
    }

    @Test("observers hear of changes in every domain that change what a key reads, and where they were made")
    func observation() throws {
        try withTemporaryDirectory { directory in
            let managed = directory.appendingPathComponent("managed")
            try FileManager.default.createDirectory(at: managed, withIntermediateDirectories: true)  // watched at once (inotify)
            let app = try SharedDefaults(suiteName: "app", directory: directory, configuration: Self.configuration(managed: managed))
            let global = try SharedDefaults(suiteName: SharedDefaults.globalDomain, directory: directory)
            let feed = try app.changeFeed()
            global.set("g", forKey: "theme")
            var change = try #require(try feed.next(timeout: .seconds(10)))
            #expect(change.domain == .global && change.key == "theme" && change.value == .string("g") && change.kind == .set)
            app.set("mine", forKey: "theme")
            change = try #require(try feed.next(timeout: .seconds(10)))
            #expect(change.domain == .suite && change.key == "theme")
            global.set("hidden", forKey: "theme")  // the suite holds the key: nothing changes what it reads
            app.setVolatileDomain(["theme": "argument"], forName: SharedDefaults.argumentDomain)
            change = try #require(try feed.next(timeout: .seconds(10)))
            #expect(change.domain == .arguments && change.value == .string("argument"))
            try Self.writeManaged("{ theme = managed; }", suite: "app", in: managed)
            change = try #require(try feed.next(timeout: .seconds(10)))
            #expect(change.domain == .managed(file: managed.appendingPathComponent("app.plist").path) && change.value == .string("managed"))
            try FileManager.default.removeItem(at: managed.appendingPathComponent("app.plist"))
            change = try #require(try feed.next(timeout: .seconds(10)))
            // The file gone, the key reads the argument domain's value: what the change says.
            #expect(change.kind == .set && change.key == "theme" && change.value == .string("argument"))
            app.register(defaults: ["sound": "bell"])
            change = try #require(try feed.next(timeout: .seconds(10)))
            #expect(change.domain == .registration && change.key == "sound")
            #expect(try feed.nextAvailable() == nil)
        }
    }
}
