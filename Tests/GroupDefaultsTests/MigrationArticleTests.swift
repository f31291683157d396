import Foundation
import GroupDefaults
import TestSupport
import Testing

// The code of the article "Migrating from UserDefaults", compiled here: each region between
// `// snippet: NAME` and `// end snippet` is the article's block marked `<!-- snippet: NAME -->`
// (the sync tests' `TutorialTests.articleSnippetsAreThisCode` compares them).

/// Compiled, not run: it would create a suite in the default directory.
func beforeAndAfter() throws -> (UserDefaults, SharedDefaults) {
    // snippet: before-after
    let before = UserDefaults(suiteName: "group.com.example.chat")!  // before
    let after = try SharedDefaults(suiteName: "group.com.example.chat")  // after
    // end snippet
    return (before, after)
}

// snippet: copy-once
func copyFromUserDefaults(_ name: String, into defaults: SharedDefaults) throws {
    guard let old = UserDefaults(suiteName: name)?.persistentDomain(forName: name) else { return }
    try defaults.write { tx in
        for (key, value) in old where try tx.value(forKey: key) == nil {
            if let value = PropertyListValue(any: value) { try tx.set(value, forKey: key) }
        }
    }
}
// end snippet

@Suite("Migrating from UserDefaults")
struct MigrationArticleTests {
    @Test("the article's copy moves every value of a UserDefaults suite once, keeping what the new suite holds")
    func copyOnce() throws {
        try withTemporaryDirectory { dir in
            let name = "group.test.migration-\(UUID().uuidString)"
            let old = try #require(UserDefaults(suiteName: name))
            defer { old.removePersistentDomain(forName: name) }
            old.set("ring.caf", forKey: "sound")
            old.set(3, forKey: "badge")
            old.set(["a", "b"], forKey: "recent")
            old.set(true, forKey: "previews")

            let defaults = try SharedDefaults(suiteName: name, directory: dir)
            defaults.set("newer.caf", forKey: "sound")  // written by a process that started first
            try copyFromUserDefaults(name, into: defaults)
            #expect(defaults.string(forKey: "sound") == "newer.caf")
            #expect(defaults.integer(forKey: "badge") == 3)
            #expect(defaults.stringArray(forKey: "recent") == ["a", "b"])
            #expect(defaults.bool(forKey: "previews"))

            // A second run changes nothing.
            let before = try defaults.lastSequence
            try copyFromUserDefaults(name, into: defaults)
            #expect(try defaults.lastSequence == before)
            // An unknown suite is nothing to copy.
            try copyFromUserDefaults("group.test.never-\(UUID().uuidString)", into: defaults)
        }
    }
}
