import Foundation
import GroupDefaults
import TestSupport
import Testing

@Suite("AppGroupContainer")
struct AppGroupContainerTests {
    @Test("the container, its directories and the group's suite")
    func layout() async throws {
        try await withSandbox { sandbox in
            let container = try AppGroupContainer(groupIdentifier: Sandbox.group, root: sandbox.root)
            #expect(container.url.standardizedFileURL.path == sandbox.container.path)
            #expect(container.preferencesDirectory.path == sandbox.preferences.path)
            #expect(container.soundsDirectory.path == sandbox.sounds.path)
            #expect(!FileManager.default.fileExists(atPath: sandbox.root.path), "describing creates nothing")

            let defaults = try SharedDefaults(appGroup: container)
            defaults.set("ring.caf", forKey: "sound")
            #expect(FileManager.default.fileExists(atPath: sandbox.preferences.appendingPathComponent(Sandbox.group + ".lmdb").path))
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: sandbox.sounds.path, isDirectory: &isDirectory) && isDirectory.boolValue)
            try container.createDirectories()  // again: nothing to do
            #expect(throws: SharedDefaultsError.self) { try AppGroupContainer(groupIdentifier: "a\u{0}b", root: sandbox.root) }
            let reopened = try SharedDefaults(suiteName: Sandbox.group, directory: container.preferencesDirectory)
            #expect(reopened.string(forKey: "sound") == "ring.caf")
        }
    }

    @Test("an identifier that cannot name a suite is refused", arguments: ["", ".", "..", "a/b", "../group.x", String(repeating: "g", count: 300)])
    func invalidIdentifier(_ identifier: String) {
        #expect(throws: SharedDefaultsError.self) {
            try AppGroupContainer(groupIdentifier: identifier, root: URL(fileURLWithPath: "/tmp"))
        }
        do {
            _ = try AppGroupContainer(groupIdentifier: identifier)
            Issue.record("accepted \(identifier.debugDescription)")
        } catch {
            #expect((error as? SharedDefaultsError)?.code == .invalidSuiteName)
        }
    }

    @Test("the root defaults to the suites' default directory")
    func defaultRoot() throws {
        let container = try AppGroupContainer(groupIdentifier: Sandbox.group)
        #expect(
            container.url.deletingLastPathComponent().standardizedFileURL.path
                == SharedDefaults.defaultDirectory.standardizedFileURL.path
        )
    }
}
