import Foundation
import TestSupport
import Testing

@testable import GroupDefaults
@testable import GroupDefaultsLMDB

// MARK: Helpers

private func randomBytes(_ count: Int, seed: UInt64) -> Data {
    var rng = SeededGenerator(seed: seed)
    return Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) })
}

private func contents(_ url: URL) throws -> Data {
    try Data(contentsOf: url)
}

private func listing(_ directory: URL) throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
}

/// A suite with a few keys, to check that a failure elsewhere leaves them alone.
private func makeWitness(_ directory: URL) throws -> SharedDefaults {
    let defaults = try openSuite(directory, "witness")
    try defaults.write { tx in
        try tx.set(.string("ring.caf"), forKey: "sound")
        try tx.set(.integer(3), forKey: "badge")
    }
    return defaults
}

private func expectWitnessIntact(_ defaults: SharedDefaults, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(defaults.string(forKey: "sound") == "ring.caf", sourceLocation: sourceLocation)
    #expect(defaults.integer(forKey: "badge") == 3, sourceLocation: sourceLocation)
    #expect((try? defaults.read { try $0.keys }) == ["badge", "sound"], sourceLocation: sourceLocation)
}

/// The `GroupDefaultsTestHelper` executable, built next to the test runner (`.build/debug/`).
/// The directory of a mount point that is mounted read-only, among the system ones that are
/// read-only in many containers.
private let readOnlyMount: String? = {
    guard let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) else { return nil }
    let candidates: Set<String> = ["/sys", "/proc/sys", "/sys/fs/cgroup"]
    for line in mounts.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 4, candidates.contains(String(fields[1])) else { continue }
        if fields[3].split(separator: ",").contains("ro") { return String(fields[1]) }
    }
    return nil
}()

// MARK: Names and keys

@Suite("Bad input: suite names, keys, values")
struct BadNamesAndValuesTests {
    @Test("invalid suite names are refused with invalidSuiteName, naming the suite, creating nothing")
    func invalidSuiteNames() throws {
        try withTemporaryDirectory { dir in
            let witness = try makeWitness(dir)
            let before = try listing(dir)
            let names = [
                "", "a/b", "/", "group\u{0}name", ".", "..", String(repeating: "n", count: 250), String(repeating: "n", count: 244),
                String(repeating: "é", count: 122),
            ]
            for name in names {
                let error = sharedDefaultsError { _ = try openSuite(dir, name) }
                #expect(error?.code == .invalidSuiteName, "\(name.debugDescription)")
                #expect(error?.suiteName == name)
                if !name.isEmpty { #expect(error?.description.contains(name) == true, "\(error?.description ?? "")") }
            }
            #expect(try listing(dir) == before)
            expectWitnessIntact(witness)

            // The longest name that fits in a file name with every suffix works.
            let longest = String(repeating: "n", count: 243)
            let defaults = try openSuite(dir, longest)
            defaults.set(1, forKey: "k")
            #expect(defaults.integer(forKey: "k") == 1)
            #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent(longest + ".lmdb-notify").path))
        }
    }

    @Test("keys that are empty or longer than 511 bytes are refused with invalidKey; 511 bytes work")
    func invalidKeys() throws {
        try withTemporaryDirectory { dir in
            let log = ErrorLog()
            let defaults = try openSuite(dir) { $0.onError = log.handler }
            defaults.set("v", forKey: "other")
            let long = String(repeating: "k", count: 512)
            let longUnicode = String(repeating: "é", count: 256)
            for key in ["", long, longUnicode] {
                let thrown = sharedDefaultsError { try defaults.write { try $0.set(.integer(1), forKey: key) } }
                #expect(thrown?.code == .invalidKey)
                #expect(thrown?.key == key)
                if !key.isEmpty { #expect(thrown?.description.contains("511") == true, "\(thrown?.description ?? "")") }
                #expect(sharedDefaultsError { try defaults.read { _ = try $0.value(forKey: key) } }?.code == .invalidKey)
                #expect(sharedDefaultsError { try defaults.write { try $0.removeValue(forKey: key) } }?.code == .invalidKey)
                #expect(sharedDefaultsError { try defaults.update(key) { _ in .integer(1) } }?.code == .invalidKey)

                let reported = log.all.count
                defaults.set(1, forKey: key)
                #expect(defaults.lastError?.code == .invalidKey)
                #expect(defaults.string(forKey: key) == nil)
                defaults.removeObject(forKey: key)
                #expect(log.all.count == reported + 3)
                #expect(log.all.allSatisfy { $0.code == .invalidKey })
            }
            #expect(try defaults.read { try $0.keys } == ["other"])

            let longest = String(repeating: "k", count: 511)
            defaults.set("fits", forKey: longest)
            #expect(defaults.string(forKey: longest) == "fits")
            #expect(try defaults.read { try $0.keys } == [longest, "other"])
            defaults.removeObject(forKey: longest)
            #expect(defaults.string(forKey: "other") == "v")
        }
    }

    @Test("values of unsupported types are refused, reported, and change nothing")
    func unsupportedValues() throws {
        try withTemporaryDirectory { dir in
            let log = ErrorLog()
            let defaults = try openSuite(dir) { $0.onError = log.handler }
            defaults.set("old", forKey: "k")
            let closure: @Sendable () -> Void = {}
            let values: [(String, Any)] = [
                ("NSObject", NSObject()), ("closure", closure), ("array holding an NSObject", [1, NSObject()] as [Any]),
                ("dictionary holding a closure", ["a": closure] as [String: Any]), ("tuple", (1, 2)),
                ("NSDictionary with a number key", NSDictionary(dictionary: [1: "one"])),
            ]
            for (index, (name, value)) in values.enumerated() {
                defaults.set(value, forKey: "k")
                #expect(defaults.lastError?.code == .unsupportedValue, "\(name)")
                #expect(defaults.lastError?.key == "k")
                #expect(log.all.count == 2 * index + 1, "\(name)")
                #expect(defaults.string(forKey: "k") == "old", "\(name)")
                defaults.set(value, forKey: "new")
                #expect(defaults.object(forKey: "new") == nil, "\(name)")
                #expect(log.all.count == 2 * index + 2, "\(name)")
            }
            defaults.register(defaults: ["registered": NSObject(), "fine": 1])
            #expect(defaults.lastError?.code == .unsupportedValue)
            #expect(defaults.object(forKey: "registered") == nil)
            #expect(defaults.integer(forKey: "fine") == 1)
            #expect(try defaults.read { try $0.keys } == ["k"])
        }
    }

    @Test("an NSDictionary holding two canonically equivalent keys is refused by set, naming both; never stored merged")
    func equivalentKeysInNSDictionary() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            // Foundation's NSString equality is canonical equivalence here and its hash is of the
            // code units: the two keys stay apart unless their hashes meet in one bucket of the
            // dictionary's (per-process seeded) table, which a few filler keys change.
            var held: NSDictionary?
            for fillers in 0..<16 where held == nil {
                let keys = [NSString(string: "caf\u{E9}"), NSString(string: "cafe\u{301}")] + (0..<fillers).map { NSString(string: "filler \($0)") }
                let dictionary = NSDictionary(objects: Array(1...keys.count), forKeys: keys)
                if dictionary.count == keys.count { held = dictionary }
            }
            let menu = try #require(held, "an NSDictionary holding both spellings")
            defaults.set(["menu": menu] as [String: Any], forKey: "k")
            #expect(defaults.lastError?.code == .unsupportedValue)
            let reason = defaults.lastError?.reason ?? ""
            #expect(reason.contains("U+00E9") && reason.contains("U+0065 U+0301") && reason.contains("canonically equivalent"), "\(reason)")
            #expect(defaults.object(forKey: "k") == nil)
        }
    }

    @Test("a value larger than maximumValueSize is refused with valueTooLarge; the old value stays")
    func valueTooLarge() throws {
        try withTemporaryDirectory { dir in
            let limit = 1024
            let defaults = try openSuite(dir) { $0.maximumValueSize = limit }
            defaults.set("old", forKey: "k")
            // A string's encoding is a tag, a two-byte length and its bytes.
            let fits = String(repeating: "x", count: limit - 3)
            let tooLarge = String(repeating: "x", count: limit - 2)
            let error = sharedDefaultsError { try defaults.write { try $0.set(.string(tooLarge), forKey: "k") } }
            #expect(error?.code == .valueTooLarge)
            #expect(error?.description.contains("\(limit)") == true)
            defaults.set(Data(count: 5000), forKey: "k")
            #expect(defaults.lastError?.code == .valueTooLarge)
            defaults.set(Array(repeating: tooLarge, count: 2), forKey: "k")
            #expect(defaults.lastError?.code == .valueTooLarge)
            let inUpdate = sharedDefaultsError { try defaults.update("k") { _ in .string(tooLarge) } }
            #expect(inUpdate?.code == .valueTooLarge)
            #expect(defaults.string(forKey: "k") == "old")

            try defaults.write { try $0.set(.string(fits), forKey: "k") }
            #expect(defaults.string(forKey: "k") == fits)
            #expect(try defaults.read { try $0.keys } == ["k"])
        }
    }
}

extension BadNamesAndValuesTests {
    @Test("a value nested deeper than the codec reads back is refused when written, or reads back")
    func overDeepValue() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("old", forKey: "deep")
            var value = PropertyListValue.integer(1)
            for _ in 0..<(BinaryCodec.maximumDecodingDepth + 10) { value = .array([value]) }
            do {
                try defaults.write { try $0.set(value, forKey: "deep") }
                // Accepted: then it must read back.
                let readBack = Result { try defaults.read { try $0.value(forKey: "deep") } }
                #expect(throws: Never.self, "a value the store accepted does not read back") { try readBack.get() }
                #expect((try? readBack.get()) == value)
            } catch let error as SharedDefaultsError {
                #expect(error.code == .unsupportedValue || error.code == .valueTooLarge, "\(error)")
                #expect(defaults.string(forKey: "deep") == "old")
            }
        }
    }

    @Test("error codes match in catch clauses")
    func codePatterns() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            var matched = false
            do {
                try defaults.write { try $0.set(.bool(true), forKey: "") }
            } catch SharedDefaultsError.Code.valueTooLarge {
                Issue.record("matched the wrong code")
            } catch SharedDefaultsError.Code.invalidKey {
                matched = true
            }
            #expect(matched)
        }
    }
}

// MARK: Damaged files

@Suite("Bad input: damaged files")
struct DamagedFileTests {
    @Test(
        "a file that is not an LMDB file is refused with corruptFile and left unchanged",
        arguments: ["random 64 KiB", "random 100 bytes", "text", "zeros"]
    )
    func notAnLMDBFile(_ kind: String) throws {
        try withTemporaryDirectory { dir in
            let witness = try makeWitness(dir)
            let bytes: Data =
                switch kind {
                case "random 64 KiB": randomBytes(64 << 10, seed: 1)
                case "random 100 bytes": randomBytes(100, seed: 2)
                case "text": Data("sound = ring.caf\nbadge = 3\n".utf8)
                default: Data(count: 16 << 10)
                }
            let file = dir.appendingPathComponent("suite.lmdb")
            try bytes.write(to: file)
            for _ in 0..<2 {
                let error = sharedDefaultsError { _ = try openSuite(dir, "suite") }
                #expect(error?.code == .corruptFile)
                #expect(error?.description.contains(file.path) == true)
                #expect(try contents(file) == bytes)
            }
            expectWitnessIntact(witness)
        }
    }

    @Test("a truncated suite file is refused with corruptFile and left unchanged")
    func truncatedFile() throws {
        try withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("suite.lmdb")
            let used: Int
            do {
                let defaults = try openSuite(dir, "suite")
                try defaults.write { tx in
                    for i in 0..<3000 { try tx.set(.string("value number \(i)"), forKey: "key-\(i)") }
                }
                used = try defaults.store.environment.info().usedBytes
            }
            let original = try contents(file)
            #expect(original.count >= used)
            let pageSize = 4096
            for length in [used / 2, used - pageSize, 2 * pageSize, pageSize + 100, 100] {
                let truncated = original.prefix(length)
                try truncated.write(to: file)
                let error = sharedDefaultsError { _ = try openSuite(dir, "suite") }
                #expect(error?.code == .corruptFile, "truncated to \(length) of \(used) bytes")
                #expect(try contents(file) == truncated, "truncated to \(length)")
            }
            // The whole file opens again, with everything in it.
            try original.write(to: file)
            let defaults = try openSuite(dir, "suite")
            #expect(try defaults.read { try $0.keys.count } == 3000)
            #expect(defaults.string(forKey: "key-2999") == "value number 2999")
        }
    }

    @Test(
        "a file cut short while it was created (LMDB's first meta page only, nothing committed) opens as new; one with a commit is refused",
        arguments: [UInt64(0), 1]
    )
    func creationCutShort(transaction: UInt64) throws {
        try withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("suite.lmdb")
            do {
                let defaults = try openSuite(dir, "suite")
                try defaults.write { try $0.set(.string("ring.caf"), forKey: "sound") }
            }
            // What a power cut leaves of a creation: the first of the two meta pages LMDB writes at
            // once, which says two pages are in use (last page 1) and names transaction 0.
            var page = try contents(file).prefix(4096)
            withUnsafeBytes(of: UInt64(1).littleEndian) { page.replaceSubrange(136..<144, with: $0) }
            withUnsafeBytes(of: transaction.littleEndian) { page.replaceSubrange(144..<152, with: $0) }
            try page.write(to: file)
            if transaction == 0 {
                let defaults = try openSuite(dir, "suite")
                #expect(try defaults.read { try $0.keys.count } == 0)
                try defaults.write { try $0.set(.string("bell.caf"), forKey: "sound") }
                #expect(try openSuite(dir, "suite").string(forKey: "sound") == "bell.caf")
            } else {
                let error = sharedDefaultsError { _ = try openSuite(dir, "suite") }
                #expect(error?.code == .corruptFile)
                #expect(try contents(file) == page)
            }
        }
    }

    @Test("random bytes in a valid file's pages: an error or readable keys, never a crash, never a rewrite")
    func randomDamage() async throws {
        try await withTemporaryDirectory { dir in
            let base = dir.appendingPathComponent("base", isDirectory: true)
            let used: Int
            do {
                let defaults = try openSuite(base, "suite")
                try await defaults.write { tx in
                    for i in 0..<400 {
                        let value: PropertyListValue =
                            switch i % 4 {
                            case 0: .string("value \(i) " + String(repeating: "v", count: i % 50))
                            case 1: .integer(i * 7919)
                            case 2: .array([.double(Double(i)), .dictionary(["n": .integer(i)]), .data(Data(repeating: UInt8(i % 256), count: 20))])
                            default: .string(String(repeating: "big", count: i % 3 == 0 ? 3000 : 10))  // some on overflow pages
                            }
                        try tx.set(value, forKey: "key-\(i)")
                    }
                }
                try await defaults.write { tx in for i in stride(from: 0, to: 400, by: 9) { try tx.removeValue(forKey: "key-\(i)") } }
                used = try defaults.store.environment.info().usedBytes
            }
            let original = try contents(base.appendingPathComponent("suite.lmdb"))
            #expect(used > 64 << 10)

            var opened = 0
            var refused = 0
            var damagedValues = 0
            for seed in UInt64(1)...100 {
                var rng = SeededGenerator(seed: seed)
                var damaged = original
                for _ in 0..<3 {
                    let offset = Int.random(in: 8192..<used, using: &rng)
                    let length = min(Int.random(in: 1...16, using: &rng), used - offset)
                    for i in offset..<(offset + length) { damaged[i] = UInt8.random(in: 0...255, using: &rng) }
                }
                let copy = dir.appendingPathComponent("seed-\(seed)", isDirectory: true)
                try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: false)
                let file = copy.appendingPathComponent("suite.lmdb")
                try damaged.write(to: file)

                // In another process first: a crash must not take the test runner with it.
                let outcome = try await HelperProcess.run("read-all", directory: copy, suite: "suite")
                #expect(outcome.reason == .exit, "seed \(seed): the helper crashed (signal \(outcome.status))")
                #expect(outcome.status == 0 || outcome.status == 3, "seed \(seed): status \(outcome.status), \(outcome.stderr)")
                guard outcome.reason == .exit, outcome.status == 0 || outcome.status == 3 else { continue }

                // It did not crash there, so the same calls are safe here, where the error codes can be seen.
                do {
                    let defaults = try openSuite(copy, "suite")
                    #expect(outcome.status == 0, "seed \(seed): opens here but not in the helper: \(outcome.stderr)")
                    opened += 1
                    let (keys, codes) = try await defaults.read { tx in
                        var codes: [SharedDefaultsError.Code] = []
                        let keys = try tx.keys
                        for key in keys {
                            do { _ = try tx.value(forKey: key) } catch let error as SharedDefaultsError { codes.append(error.code) }
                        }
                        return (keys, codes)
                    }
                    damagedValues += codes.count
                    #expect(codes.allSatisfy { $0 == .corruptValue }, "seed \(seed): \(codes)")
                    #expect(outcome.stdout == "ok \(keys.count) \(codes.count)", "seed \(seed)")
                } catch let error as SharedDefaultsError {
                    refused += 1
                    #expect(outcome.status == 3, "seed \(seed): refused here but not in the helper")
                    #expect(error.code == .corruptFile, "seed \(seed): \(error)")
                }
                #expect(try contents(file) == damaged, "seed \(seed): the damaged file was rewritten")

                // Writing to it (which follows the free-page tree and the log) is an error or works.
                let write = try await HelperProcess.run("write-keys", directory: copy, suite: "suite", ["after-damage", "3"])
                #expect(write.reason == .exit, "seed \(seed): a writer crashed (signal \(write.status))")
                #expect(write.status == 0 || write.status == 3, "seed \(seed): status \(write.status), \(write.stderr)")
            }
            #expect(opened + refused == 100)
            // Not an assertion on the split (it depends on the layout), but worth seeing in the log.
            print("random damage: \(opened) opened (\(damagedValues) damaged values reported), \(refused) refused")
        }
    }

    @Test("a damaged value record reads as nil with corruptValue; other keys are fine")
    func damagedValue() throws {
        try withTemporaryDirectory { dir in
            let marker = "MARKER-5d1c0f2e-unique-value" + unlogged
            do {
                let defaults = try openSuite(dir, "suite")
                try defaults.write { tx in
                    for i in 0..<50 { try tx.set(.string("value \(i)"), forKey: "key-\(i)") }
                    try tx.set(.string(marker), forKey: "victim")
                }
            }
            let file = dir.appendingPathComponent("suite.lmdb")
            var bytes = try contents(file)
            let needle = Data(marker.utf8)
            var found = 0
            var start = bytes.startIndex
            while let range = bytes.range(of: needle, in: start..<bytes.endIndex) {
                bytes[range.lowerBound + 3] ^= 0x01  // "MARKER" → "MASKER": still valid UTF-8
                found += 1
                start = range.upperBound
            }
            try #require(found >= 1, "the marker is not in the file")
            try bytes.write(to: file)

            let log = ErrorLog()
            let defaults = try openSuite(dir, "suite") { $0.onError = log.handler }
            #expect(defaults.string(forKey: "victim") == nil)
            #expect(defaults.lastError?.code == .corruptValue)
            #expect(defaults.lastError?.key == "victim")
            #expect(log.all.map(\.code) == [.corruptValue])
            #expect(defaults.object(forKey: "victim") == nil)
            let thrown = sharedDefaultsError { try defaults.read { _ = try $0.value(forKey: "victim") } }
            #expect(thrown?.code == .corruptValue)
            #expect(thrown?.key == "victim")
            #expect(sharedDefaultsError { try defaults.update("victim") { $0 } }?.code == .corruptValue)

            for i in 0..<50 { #expect(defaults.string(forKey: "key-\(i)") == "value \(i)") }
            #expect(try defaults.read { try $0.keys.count } == 51)
            let all = defaults.dictionaryRepresentation()
            #expect(all.count == 50)
            #expect(all["victim"] == nil)

            // The key can be overwritten (or removed) to recover.
            defaults.set("repaired", forKey: "victim")
            #expect(defaults.string(forKey: "victim") == "repaired")
            try defaults.write { try $0.removeValue(forKey: "victim") }
            #expect(try defaults.read { try $0.keys.count } == 50)
        }
    }

    @Test("a damaged store identity is reported, not silently recreated")
    func damagedIdentity() throws {
        try withTemporaryDirectory { dir in
            let origin: UInt64
            do {
                let defaults = try openSuite(dir, "suite")
                defaults.set("ring.caf", forKey: "sound")
                origin = defaults.store.origin
            }
            // Rename the `format` record of the meta database: the B-tree stays well formed.
            let file = dir.appendingPathComponent("suite.lmdb")
            var bytes = try contents(file)
            let needle = Data("format".utf8)
            var start = bytes.startIndex
            var found = 0
            while let range = bytes.range(of: needle, in: start..<bytes.endIndex) {
                bytes[range.lowerBound] = UInt8(ascii: "F")
                found += 1
                start = range.upperBound
            }
            try #require(found >= 1)
            try bytes.write(to: file)

            do {
                let defaults = try openSuite(dir, "suite")
                #expect(defaults.store.origin == origin, "the store was given a new origin id")
                #expect(defaults.string(forKey: "sound") == "ring.caf")
            } catch let error as SharedDefaultsError {
                #expect(error.code == .corruptFile)
                #expect(try contents(file) == bytes)
            }
        }
    }
}

// MARK: Directories and file systems

@Suite("Bad input: directories and file systems")
struct UnwritableLocationTests {
    @Test("a directory that cannot be created is refused with notWritable")
    func uncreatableDirectory() throws {
        try withTemporaryDirectory { dir in
            let witness = try makeWitness(dir)
            let file = dir.appendingPathComponent("plain-file")
            try Data("not a directory".utf8).write(to: file)
            let cases = [
                file,  // the directory is a regular file
                file.appendingPathComponent("sub", isDirectory: true),  // under a regular file
                file.appendingPathComponent("a/b/c", isDirectory: true),
                URL(fileURLWithPath: "/proc/groupdefaults-\(UUID().uuidString)", isDirectory: true),
            ]
            for directory in cases {
                let error = sharedDefaultsError { _ = try openSuite(directory, "suite") }
                #expect(error?.code == .notWritable, "\(directory.path): \(error?.description ?? "")")
                #expect(error?.description.contains(directory.path) == true, "\(error?.description ?? "")")
                #expect(error?.suiteName == "suite")
            }
            #expect(try contents(file) == Data("not a directory".utf8))
            #expect(!FileManager.default.fileExists(atPath: cases[3].path))
            expectWitnessIntact(witness)
        }
    }

    @Test(
        "a directory where files cannot be created is refused with notWritable",
        arguments: ["/proc/self", "/sys"]
    )
    func uncreatableFiles(_ path: String) throws {
        let error = sharedDefaultsError { _ = try openSuite(URL(fileURLWithPath: path, isDirectory: true), "groupdefaults-test") }
        #expect(error?.code == .notWritable, "\(error?.description ?? "")")
        // The message names the file (in the directory with symbolic links resolved: /proc/self is one).
        #expect(error?.path.hasSuffix("/groupdefaults-test.lmdb") == true, "\(error?.path ?? "")")
        #expect(error.map { $0.description.contains($0.path) } == true)
        #expect(!FileManager.default.fileExists(atPath: path + "/groupdefaults-test.lmdb"))
    }

    @Test(
        "a directory without write permission is refused with notWritable",
        .enabled(if: getuid() != 0, "permission bits do not stop root")
    )
    func readOnlyDirectory() throws {
        try withTemporaryDirectory { dir in
            let locked = dir.appendingPathComponent("locked", isDirectory: true)
            try FileManager.default.createDirectory(at: locked, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o500])
            defer { try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: locked.path) }
            #expect(sharedDefaultsError { _ = try openSuite(locked, "suite") }?.code == .notWritable)
            #expect(sharedDefaultsError { _ = try openSuite(locked.appendingPathComponent("sub"), "suite") }?.code == .notWritable)
        }
    }

    @Test(
        "a read-only file system is refused with notWritable",
        .enabled(if: readOnlyMount != nil, "no read-only file system is mounted at /sys, /proc/sys or /sys/fs/cgroup here")
    )
    func readOnlyFileSystem() throws {
        let mount = try #require(readOnlyMount)
        let error = sharedDefaultsError { _ = try openSuite(URL(fileURLWithPath: mount, isDirectory: true), "groupdefaults-test") }
        #expect(error?.code == .notWritable, "\(error?.description ?? "")")
        #expect(error?.description.contains("read-only") == true, "\(error?.description ?? "")")
    }
}
