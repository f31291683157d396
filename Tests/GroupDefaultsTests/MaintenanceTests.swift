import Foundation
import Glibc
import ServerLaunching
import TestSupport
import Testing

@testable import GroupDefaults
@testable import GroupDefaultsLMDB

// MARK: Helpers

private func listing(_ directory: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
}

private func contents(_ url: URL) throws -> Data {
    try Data(contentsOf: url)
}

/// The suite's stored values as a dictionary (`storedValues` is an ordered list of pairs).
private func stored(_ defaults: SharedDefaults) throws -> [String: PropertyListValue] {
    Dictionary(uniqueKeysWithValues: try defaults.storedValues().map { ($0.key, $0.value) })
}

/// Every change the feed has now, without waiting.
private func drain(_ feed: SharedDefaults.ChangeFeed) throws -> [SharedDefaults.Change] {
    var changes: [SharedDefaults.Change] = []
    while let change = try feed.nextAvailable() { changes.append(change) }
    return changes
}

/// The offsets of every occurrence of `marker` in the file's bytes.
private func occurrences(of marker: String, in bytes: Data) -> [Int] {
    var offsets: [Int] = []
    var start = bytes.startIndex
    while let range = bytes.range(of: Data(marker.utf8), in: start..<bytes.endIndex) {
        offsets.append(range.lowerBound)
        start = range.upperBound
    }
    return offsets
}

/// Padding that makes a marked value too large for the change log to keep a copy of
/// (`Change.keptValueLimit`), so that the file holds it once, in the `values` tree.
let unlogged = String(repeating: ".", count: SharedDefaults.Change.keptValueLimit)

/// Flips one bit inside every copy of `marker` in `file` ("MARKER" becomes "MASKER": the value
/// record's checksum no longer matches). The suite must not be open in this process.
private func damageValue(marked marker: String, in file: URL) throws {
    var bytes = try contents(file)
    let offsets = occurrences(of: marker, in: bytes)
    try #require(!offsets.isEmpty, "the marker is not in the file")
    for offset in offsets { bytes[offset + 3] ^= 0x01 }
    try bytes.write(to: file)
}

/// Damages the header (the page number) of every page that holds `marker`: the B-tree page of the
/// `values` tree that stores it no longer carries its own number.
private func damagePage(holding marker: String, in file: URL, pageSize: Int = 4096) throws {
    var bytes = try contents(file)
    let pages = Set(occurrences(of: marker, in: bytes).map { $0 / pageSize })
    try #require(!pages.isEmpty, "the marker is not in the file")
    for page in pages { bytes[page * pageSize] ^= 0x5A }
    try bytes.write(to: file)
}

// MARK: Tests

@Suite("Maintenance: finding, inspecting, verifying, backing up and editing suites", .timeLimit(.minutes(2)))
struct MaintenanceTests {
    // MARK: Existing suites

    @Test("opening an existing suite only: a missing one is suiteNotFound and nothing is created")
    func existingOnly() throws {
        try withTemporaryDirectory { dir in
            do {
                let present = try openSuite(dir, "present")
                present.set("ring.caf", forKey: "sound")
            }
            try Data().write(to: dir.appendingPathComponent("ghost.lmdb-lock"))  // a lock file is not a suite
            let before = try listing(dir)

            for name in ["absent", "ghost"] {
                let error = sharedDefaultsError { _ = try SharedDefaults(existingSuiteName: name, directory: dir) }
                #expect(error?.code == .suiteNotFound)
                #expect(error?.suiteName == name)
                #expect(error?.path == dir.path + "/\(name).lmdb")
            }
            let missingFile = dir.appendingPathComponent("absent.lmdb")
            #expect(sharedDefaultsError { _ = try SharedDefaults(fileURL: missingFile) }?.code == .suiteNotFound)
            #expect(try listing(dir) == before)

            // A missing directory is not created either.
            let nested = dir.appendingPathComponent("nested/deeper", isDirectory: true)
            #expect(sharedDefaultsError { _ = try SharedDefaults(existingSuiteName: "present", directory: nested) }?.code == .suiteNotFound)
            #expect(sharedDefaultsError { _ = try SharedDefaults(fileURL: nested.appendingPathComponent("present.lmdb")) }?.code == .suiteNotFound)
            #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("nested").path))
            #expect(try listing(dir) == before)

            // Names are still checked, and a file must be named `.lmdb`.
            #expect(sharedDefaultsError { _ = try SharedDefaults(existingSuiteName: "a/b", directory: dir) }?.code == .invalidSuiteName)
            #expect(sharedDefaultsError { _ = try SharedDefaults(fileURL: dir.appendingPathComponent("present.txt")) }?.code == .invalidSuiteName)
            #expect(sharedDefaultsError { _ = try SharedDefaults(fileURL: dir.appendingPathComponent(".lmdb")) }?.code == .invalidSuiteName)

            // An existing suite opens both ways.
            let byName = try SharedDefaults(existingSuiteName: "present", directory: dir)
            #expect(byName.string(forKey: "sound") == "ring.caf")
            let byFile = try SharedDefaults(fileURL: dir.appendingPathComponent("present.lmdb"))
            #expect(byFile.suiteName == "present")
            #expect(byFile.fileURL.path == byName.fileURL.path)
            #expect(byFile.string(forKey: "sound") == "ring.caf")
        }
    }

    @Test("suiteNames lists the suites of a directory, sorted; none for a missing directory")
    func suiteNames() throws {
        try withTemporaryDirectory { dir in
            for name in ["group.com.example.chat", "b", "a.x"] {
                _ = try openSuite(dir, name)
            }
            try Data("x".utf8).write(to: dir.appendingPathComponent("notes.txt"))
            try Data().write(to: dir.appendingPathComponent("stray.lmdb-lock"))
            try FileManager.default.createDirectory(at: dir.appendingPathComponent("folder.lmdb"), withIntermediateDirectories: false)

            #expect(try SharedDefaults.suiteNames(in: dir) == ["a.x", "b", "group.com.example.chat"])
            #expect(try SharedDefaults.suiteNames(in: dir.appendingPathComponent("missing")) == [])
            let notADirectory = dir.appendingPathComponent("notes.txt")
            #expect(sharedDefaultsError { _ = try SharedDefaults.suiteNames(in: notADirectory) }?.code == .notWritable)

            // The default directory is the one the initializer uses.
            #expect(SharedDefaults.defaultDirectory.path == (try SuiteLocation(suiteName: "x", directory: nil)).directory)
            #expect(SharedDefaults.defaultDirectory.path.hasPrefix("/"))
        }
    }

    // MARK: Info

    @Test("info reports the file, the exact key count, the last sequence and the configuration")
    func info() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir, "suite") {
                $0.durability = .fsyncEveryCommit
                $0.maximumMapSize = 64 << 20
                $0.maximumReaders = 126
            }
            try defaults.write { tx in
                for i in 0..<25 { try tx.set(.string("value \(i)"), forKey: "key-\(i)") }
            }
            try defaults.write { tx in
                try tx.removeValue(forKey: "key-3")
                try tx.removeValue(forKey: "key-4")
            }
            let info = try defaults.info()
            #expect(info.path == defaults.fileURL.path)
            let size = try FileManager.default.attributesOfItem(atPath: info.path)[.size] as? Int
            #expect(info.fileSize == size)
            #expect(info.keyCount == 23)
            #expect(info.lastSequence == 27)
            #expect(info.lastSequence == (try defaults.lastSequence))
            #expect(info.usedBytes > 0 && info.usedBytes <= info.mapSize)
            #expect(info.mapSize <= info.maximumMapSize)
            #expect(info.maximumMapSize == 64 << 20)
            #expect(info.readers >= 1)  // this thread's slot, at least
            #expect(info.readers <= info.maximumReaders)
            #expect(info.maximumReaders >= 126)
            #expect(info.durability == .fsyncEveryCommit)
            #expect(info.origin == defaults.store.origin)
        }
    }

    // MARK: Verify

    @Test("verify: a healthy suite, values on overflow pages and removed keys included")
    func verifyHealthy() throws {
        try withTemporaryDirectory { dir in
            let file: URL
            do {
                let defaults = try openSuite(dir, "suite")
                try defaults.write { tx in
                    for i in 0..<300 {
                        let value: PropertyListValue =
                            i % 10 == 0
                            ? .string(String(repeating: "big", count: 2000))  // overflow pages
                            : .array([.integer(i), .dictionary(["n": .double(Double(i))]), .data(Data(repeating: 7, count: 9))])
                        try tx.set(value, forKey: "key-\(i)")
                    }
                }
                try defaults.write { tx in for i in stride(from: 0, to: 300, by: 7) { try tx.removeValue(forKey: "key-\(i)") } }
                let report = try defaults.verify()
                #expect(report.isHealthy)
                #expect(report.checkedKeys == 300 - 43)
                #expect(report.damagedKeys.isEmpty)
                #expect(report.structureProblem == nil)
                file = defaults.fileURL
            }
            let report = SharedDefaults.verify(fileAt: file)
            #expect(report.isHealthy, "\(report)")
            #expect(report.checkedKeys == 257)
        }
    }

    @Test("verify reports a damaged value record by its key; storedValues throws corruptValue for it")
    func verifyDamagedValue() throws {
        try withTemporaryDirectory { dir in
            let marker = "MARKER-2b7e41c9-maintenance" + unlogged
            let file = dir.appendingPathComponent("suite.lmdb")
            do {
                let defaults = try openSuite(dir, "suite")
                try defaults.write { tx in
                    for i in 0..<50 { try tx.set(.string("value \(i)"), forKey: "key-\(i)") }
                    try tx.set(.string(marker), forKey: "victim")
                }
            }
            try damageValue(marked: marker, in: file)

            let fromFile = SharedDefaults.verify(fileAt: file)
            #expect(!fromFile.isHealthy)
            #expect(fromFile.checkedKeys == 51)
            #expect(fromFile.damagedKeys.map(\.key) == ["victim"])
            #expect(fromFile.structureProblem == nil)

            let defaults = try SharedDefaults(existingSuiteName: "suite", directory: dir)
            let report = try defaults.verify()
            #expect(report.checkedKeys == 51)
            #expect(report.damagedKeys.map(\.key) == ["victim"])
            #expect(report.damagedKeys.first?.reason.contains("checksum") == true, "\(report.damagedKeys)")
            #expect(report.structureProblem == nil)
            #expect(!report.isHealthy)

            let error = sharedDefaultsError { _ = try defaults.storedValues() }
            #expect(error?.code == .corruptValue)
            #expect(error?.key == "victim")
        }
    }

    @Test("verify reports a damaged page as a structure problem, whatever structureCheckLimit says")
    func verifyDamagedStructure() throws {
        try withTemporaryDirectory { dir in
            let marker = "MARKER-8f03aa17-page"
            let file = dir.appendingPathComponent("suite.lmdb")
            do {
                let defaults = try openSuite(dir, "suite")
                try defaults.write { tx in
                    for i in 0..<400 { try tx.set(.string("value number \(i)"), forKey: "key-\(i)") }
                    try tx.set(.string(marker), forKey: "key-200-victim")
                }
            }
            try damagePage(holding: marker, in: file)

            // A file that does not even open is reported, not thrown.
            let fromFile = SharedDefaults.verify(fileAt: file)
            #expect(!fromFile.isHealthy)
            #expect(fromFile.checkedKeys == 0)
            #expect(fromFile.structureProblem?.contains("page") == true, "\(fromFile)")

            // Opened without the check at open (as a large suite is), verify still checks every page
            // before LMDB reads one.
            let defaults = try openSuite(dir, "suite") { $0.structureCheckLimit = 0 }
            let report = try defaults.verify()
            #expect(!report.isHealthy)
            #expect(report.structureProblem?.contains("page") == true, "\(report)")
            #expect(report.checkedKeys == 0)

            // Other files are reported as such.
            let text = dir.appendingPathComponent("text.lmdb")
            try Data("sound = ring.caf\n".utf8).write(to: text)
            #expect(SharedDefaults.verify(fileAt: text).structureProblem != nil)
            let empty = dir.appendingPathComponent("empty.lmdb")
            try Data().write(to: empty)
            #expect(SharedDefaults.verify(fileAt: empty).structureProblem != nil)
            #expect(try contents(empty).isEmpty)
            #expect(SharedDefaults.verify(fileAt: dir.appendingPathComponent("missing.lmdb")).structureProblem != nil)
        }
    }

    // MARK: Backup

    @Test("backups taken while another process writes open, verify and hold one consistent commit")
    func backupWhileWriting() async throws {
        try await withTemporaryDirectory { dir in
            let writer = try HelperProcess("stream", directory: dir, suite: "live")
            defer { writer.stop() }
            try #require(await writer.waitForLine("streaming"), "the writer never got going")
            let backups = dir.appendingPathComponent("backups", isDirectory: true)
            try FileManager.default.createDirectory(at: backups, withIntermediateDirectories: false)

            let live = try SharedDefaults(existingSuiteName: "live", directory: dir)
            var previous = 0
            for round in 0..<5 {
                let file = backups.appendingPathComponent("live-\(round).lmdb")
                try live.backup(to: file)
                #expect(try permissions(file.path) == 0o600)
                let report = SharedDefaults.verify(fileAt: file)
                #expect(report.isHealthy, "round \(round): \(report)")
                #expect(report.checkedKeys == 4)

                let copy = try SharedDefaults(fileURL: file)
                #expect(copy.suiteName == "live-\(round)")
                let (a, b, c, padding) = try await copy.read { tx in
                    (
                        try tx.value(forKey: "a")?.intValue, try tx.value(forKey: "b")?.intValue,
                        try tx.value(forKey: "c")?.intValue, try tx.value(forKey: "padding")?.stringValue
                    )
                }
                let value = try #require(a, "round \(round)")
                #expect(a == b && b == c, "round \(round): a=\(value) b=\(String(describing: b)) c=\(String(describing: c))")
                #expect(padding?.count == value % 3000, "round \(round)")
                #expect(value > previous, "round \(round): the writer did not move on between backups")
                #expect(try copy.lastSequence > 0)
                previous = value
                // The writer is still going.
                #expect(writer.process.isRunning)
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(live.integer(forKey: "a") > previous)
        }
    }

    @Test("a backup never overwrites a file, and a failed one leaves nothing behind")
    func backupRefusesToOverwrite() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir, "suite")
            defaults.set("first", forKey: "sound")
            let file = dir.appendingPathComponent("copy.lmdb")
            try defaults.backup(to: file)
            let first = try contents(file)

            defaults.set("second", forKey: "sound")
            let error = sharedDefaultsError { try defaults.backup(to: file) }
            #expect(error?.code == .notWritable)
            #expect(error?.reason.contains("already exists") == true, "\(error?.description ?? "")")
            #expect(try contents(file) == first)
            // Its own file, or any other file, is refused the same way.
            #expect(sharedDefaultsError { try defaults.backup(to: defaults.fileURL) }?.code == .notWritable)
            let other = dir.appendingPathComponent("other.lmdb")
            try Data("keep me".utf8).write(to: other)
            #expect(sharedDefaultsError { try defaults.backup(to: other) }?.code == .notWritable)
            #expect(try contents(other) == Data("keep me".utf8))

            let before = try listing(dir)
            #expect(sharedDefaultsError { try defaults.backup(to: dir.appendingPathComponent("missing/copy.lmdb")) }?.code == .notWritable)
            #expect(sharedDefaultsError { try defaults.backup(to: dir.appendingPathComponent("copy.bak")) }?.code == .invalidSuiteName)
            #expect(try listing(dir) == before)

            let copy = try SharedDefaults(fileURL: file)
            #expect(copy.string(forKey: "sound") == "first")
        }
    }

    // MARK: Restore

    @Test("restore replaces the whole suite in one transaction that observers see")
    func restoreReplacesAtomically() throws {
        try withTemporaryDirectory { dir in
            let live = try openSuite(dir, "live")
            try live.write { tx in
                try tx.set(.integer(1), forKey: "keep")
                try tx.set(.string("old"), forKey: "change")
                try tx.set(.bool(true), forKey: "onlyLive")
            }
            let sourceValues: [String: PropertyListValue] = [
                "keep": .integer(1), "change": .string("new"), "onlySource": .array([.integer(1), .data(Data([2]))]),
            ]
            let backup = dir.appendingPathComponent("backups/source.lmdb")
            try FileManager.default.createDirectory(at: backup.deletingLastPathComponent(), withIntermediateDirectories: false)
            do {
                let source = try openSuite(dir.appendingPathComponent("source"), "source")
                try source.replaceAll(with: sourceValues)
                try source.backup(to: backup)
            }

            let feed = try live.changeFeed()
            let before = try live.lastSequence
            try live.restore(from: backup)

            #expect(try stored(live) == sourceValues)
            #expect(try live.storedValues().map(\.key) == ["change", "keep", "onlySource"])
            let changes = try drain(feed)
            #expect(changes.map { "\($0.kind) \($0.key)" } == ["removed onlyLive", "set change", "set keep", "set onlySource"])
            #expect(changes.map(\.sequence) == Array((before + 1)...(before + 4)))
            #expect(Set(changes.map(\.hlc)).count == 1, "one transaction, one stamp")
            #expect(changes.allSatisfy { $0.origin == live.store.origin })
            // The removed key left a tombstone, as any removal does.
            let tombstone = try live.store.read { txn in try withKeyBytes("onlyLive") { try txn.get(.tombstones, $0) != nil } }
            #expect(tombstone)
            #expect(try live.verify().isHealthy)
        }
    }

    @Test("restore refuses a damaged or missing source and changes nothing")
    func restoreRefusesDamagedSource() throws {
        try withTemporaryDirectory { dir in
            let marker = "MARKER-c4d2-restore-source" + unlogged
            let live = try openSuite(dir, "live")
            try live.write { tx in
                try tx.set(.string("ring.caf"), forKey: "sound")
                try tx.set(.integer(3), forKey: "badge")
            }
            let backup = dir.appendingPathComponent("backups/source.lmdb")
            try FileManager.default.createDirectory(at: backup.deletingLastPathComponent(), withIntermediateDirectories: false)
            do {
                let source = try openSuite(dir.appendingPathComponent("source"), "source")
                try source.write { tx in
                    for i in 0..<20 { try tx.set(.integer(i), forKey: "key-\(i)") }
                    try tx.set(.string(marker), forKey: "victim")
                }
                try source.backup(to: backup)
            }
            try damageValue(marked: marker, in: backup)

            let before = try stored(live)
            let sequence = try live.lastSequence
            let error = sharedDefaultsError { try live.restore(from: backup) }
            #expect(error?.code == .corruptFile)
            #expect(error?.suiteName == "live")
            #expect(error?.reason.contains("victim") == true, "\(error?.description ?? "")")
            #expect(error?.reason.contains("nothing was changed") == true)

            let text = dir.appendingPathComponent("backups/text.lmdb")
            try Data("sound = bell\n".utf8).write(to: text)
            #expect(sharedDefaultsError { try live.restore(from: text) }?.code == .corruptFile)
            #expect(sharedDefaultsError { try live.restore(from: dir.appendingPathComponent("backups/missing.lmdb")) }?.code == .suiteNotFound)

            #expect(try stored(live) == before)
            #expect(try live.lastSequence == sequence)
        }
    }

    // MARK: Rename, replaceAll, storedValues

    @Test("rename moves a value in one transaction; a missing key is keyNotFound and changes nothing")
    func rename() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.write { tx in
                try tx.set(.string("ring.caf"), forKey: "sound")
                try tx.set(.integer(1), forKey: "other")
            }
            let feed = try defaults.changeFeed()
            try defaults.rename("sound", to: "ringtone")
            #expect(try stored(defaults) == ["ringtone": .string("ring.caf"), "other": .integer(1)])
            let changes = try drain(feed)
            #expect(changes.map { "\($0.kind) \($0.key)" } == ["set ringtone", "removed sound"])
            #expect(Set(changes.map(\.hlc)).count == 1, "one transaction, one stamp")

            let sequence = try defaults.lastSequence
            let missing = sharedDefaultsError { try defaults.rename("sound", to: "again") }
            #expect(missing?.code == .keyNotFound)
            #expect(missing?.key == "sound")
            #expect(sharedDefaultsError { try defaults.rename("ringtone", to: "") }?.code == .invalidKey)
            let taken = sharedDefaultsError { try defaults.rename("ringtone", to: "other", replacing: false) }
            #expect(taken?.code == .keyExists && taken?.key == "other")
            #expect(try stored(defaults) == ["ringtone": .string("ring.caf"), "other": .integer(1)])
            #expect(try defaults.lastSequence == sequence)
            #expect(try drain(feed).isEmpty)

            // Onto an existing key: it is replaced. Onto itself: nothing happens.
            try defaults.rename("ringtone", to: "other")
            #expect(try stored(defaults) == ["other": .string("ring.caf")])
            let afterReplace = try defaults.lastSequence
            try defaults.rename("other", to: "other")
            #expect(try defaults.lastSequence == afterReplace)
        }
    }

    @Test("replaceAll makes the given values the whole suite in one transaction, or changes nothing")
    func replaceAll() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            try defaults.write { tx in
                for key in ["a", "b", "c"] { try tx.set(.string(key), forKey: key) }
            }
            let feed = try defaults.changeFeed()
            try defaults.replaceAll(with: ["b": .integer(2), "d": .string("x")])
            #expect(try defaults.storedValues().map(\.key) == ["b", "d"])
            #expect(try stored(defaults) == ["b": .integer(2), "d": .string("x")])
            let changes = try drain(feed)
            #expect(changes.map { "\($0.kind) \($0.key)" } == ["removed a", "removed c", "set b", "set d"])
            #expect(Set(changes.map(\.hlc)).count == 1)

            // A bad key anywhere: nothing changes.
            let sequence = try defaults.lastSequence
            #expect(sharedDefaultsError { try defaults.replaceAll(with: ["z": .integer(1), "": .integer(0)]) }?.code == .invalidKey)
            #expect(try stored(defaults) == ["b": .integer(2), "d": .string("x")])
            #expect(try defaults.lastSequence == sequence)

            try defaults.replaceAll(with: [:])
            #expect(try defaults.storedValues().isEmpty)
        }
    }

    @Test("storedValues lists stored keys only, in key order, from one snapshot")
    func storedValuesInOrder() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.register(defaults: ["registered": 1])
            let keys = ["zeta", "Alpha", "beta", "é", "b", "a-1", "a"]
            try defaults.write { tx in
                for (i, key) in keys.enumerated() { try tx.set(.integer(i), forKey: key) }
            }
            let entries = try defaults.storedValues()
            #expect(entries.map(\.key) == keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) })
            #expect(entries.first { $0.key == "beta" }?.value == .integer(2))
            #expect(!entries.contains { $0.key == "registered" })
        }
    }
}
