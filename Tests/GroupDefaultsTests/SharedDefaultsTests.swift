import Foundation
import Synchronization
import TestSupport
import Testing

@testable import GroupDefaults
@testable import GroupDefaultsLMDB

// MARK: Typed keys used by these tests

struct Ringtone: Codable, Sendable, Equatable {
    var name: String
    var volume: Double
    var tags: [String]
}

extension SharedDefaults.Keys {
    static let sound = SharedDefaults.Key<String>("sound", default: "default")
    static let badge = SharedDefaults.Key<Int>("badge", default: 0)
    static let volume = SharedDefaults.Key<Double>("volume", default: 0.8)
    static let muted = SharedDefaults.Key<Bool>("muted", default: false)
    static let lastSeen = SharedDefaults.Key<Date>("lastSeen", default: Date(timeIntervalSince1970: 0))
    static let recent = SharedDefaults.Key<[String]>("recent", default: [])
    static let counts = SharedDefaults.Key<[String: Int]>("counts", default: [:])
    static let draft = SharedDefaults.Key<String?>("draft", default: nil)
    static let server = SharedDefaults.Key<URL>("server", default: URL(string: "https://default.example")!)
    static let ringtone = SharedDefaults.Key<Ringtone>("ringtone", default: Ringtone(name: "none", volume: 0, tags: []))
}

// MARK: Helpers

func openSuite(
    _ directory: URL,
    _ name: String = "group.com.example.test",
    _ configure: (inout SharedDefaults.Configuration) -> Void = { _ in }
) throws -> SharedDefaults {
    var configuration = SharedDefaults.Configuration()
    configure(&configuration)
    return try SharedDefaults(suiteName: name, directory: directory, configuration: configuration)
}

/// The error `body` throws, as a `SharedDefaultsError`; records an issue if it throws nothing or
/// something else.
func sharedDefaultsError(
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) -> SharedDefaultsError? {
    do {
        try body()
        Issue.record("expected a SharedDefaultsError, nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as SharedDefaultsError {
        return error
    } catch {
        Issue.record("expected a SharedDefaultsError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

func permissions(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return try #require(attributes[.posixPermissions] as? Int) & 0o777
}

struct Abort: Error {}

/// Collects what `Configuration.onError` is called with.
final class ErrorLog: Sendable {
    private let errors = Mutex<[SharedDefaultsError]>([])
    var all: [SharedDefaultsError] { errors.withLock { $0 } }
    var handler: @Sendable (SharedDefaultsError) -> Void { { error in self.errors.withLock { $0.append(error) } } }
}

// MARK: UserDefaults vocabulary

@Suite("SharedDefaults: the UserDefaults vocabulary")
struct VocabularyTests {
    @Test("each type set through its overload reads back through its getter")
    func setAndGet() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            let date = Date(timeIntervalSince1970: 1_795_255_200.5)
            defaults.set("ring.caf", forKey: "string")
            defaults.set(42, forKey: "int")
            defaults.set(0.8, forKey: "double")
            defaults.set(Float(0.25), forKey: "float")
            defaults.set(true, forKey: "bool")
            defaults.set(date, forKey: "date")
            defaults.set(Data([1, 2, 3]), forKey: "data")
            defaults.set(URL(string: "https://example.com/a?b=c")!, forKey: "url")
            defaults.set(["a", "b"], forKey: "strings")
            defaults.set([1, "two", 3.5] as [Any], forKey: "mixed")
            defaults.set(["volume": 0.8, "muted": false, "name": "x"] as [String: Any], forKey: "dict")
            defaults.set(Int64(-7), forKey: "int64")
            defaults.set(UInt8(200), forKey: "uint8")
            defaults.set(NSNumber(value: 12), forKey: "nsnumber")
            defaults.set(NSNumber(value: true), forKey: "nsbool")
            defaults.set(NSString(string: "ns"), forKey: "nsstring")
            #expect(defaults.lastError == nil)

            #expect(defaults.string(forKey: "string") == "ring.caf")
            #expect(defaults.integer(forKey: "int") == 42)
            #expect(defaults.double(forKey: "double") == 0.8)
            #expect(defaults.float(forKey: "float") == 0.25)
            #expect(defaults.bool(forKey: "bool") == true)
            #expect(defaults.object(forKey: "date") as? Date == date)
            #expect(defaults.data(forKey: "data") == Data([1, 2, 3]))
            #expect(defaults.url(forKey: "url") == URL(string: "https://example.com/a?b=c")!)
            #expect(defaults.stringArray(forKey: "strings") == ["a", "b"])
            let mixed = try #require(defaults.array(forKey: "mixed"))
            #expect(mixed.count == 3 && mixed[0] as? Int == 1 && mixed[1] as? String == "two" && mixed[2] as? Double == 3.5)
            let dict = try #require(defaults.dictionary(forKey: "dict"))
            #expect(dict["volume"] as? Double == 0.8 && dict["muted"] as? Bool == false && dict["name"] as? String == "x")
            #expect(defaults.integer(forKey: "int64") == -7)
            #expect(defaults.integer(forKey: "uint8") == 200)
            #expect(defaults.value(forKey: "nsnumber") == .integer(12))
            #expect(defaults.value(forKey: "nsbool") == .bool(true))
            #expect(defaults.string(forKey: "nsstring") == "ns")

            // object(forKey:) hands back Swift types.
            #expect(defaults.object(forKey: "string") as? String == "ring.caf")
            #expect(defaults.object(forKey: "int") as? Int == 42)
            #expect(defaults.object(forKey: "double") as? Double == 0.8)
            #expect(defaults.object(forKey: "bool") as? Bool == true)
            #expect(defaults.object(forKey: "data") as? Data == Data([1, 2, 3]))
            #expect((defaults.object(forKey: "strings") as? [Any])?.count == 2)
            #expect(defaults.value(forKey: "double") == .double(0.8))
            #expect(defaults.value(forKey: "float") == .double(0.25))
        }
    }

    @Test("missing keys read as the getters' empty answers")
    func missing() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            #expect(defaults.object(forKey: "none") == nil)
            #expect(defaults.value(forKey: "none") == nil)
            #expect(defaults.string(forKey: "none") == nil)
            #expect(defaults.integer(forKey: "none") == 0)
            #expect(defaults.double(forKey: "none") == 0)
            #expect(defaults.float(forKey: "none") == 0)
            #expect(defaults.bool(forKey: "none") == false)
            #expect(defaults.data(forKey: "none") == nil)
            #expect(defaults.url(forKey: "none") == nil)
            #expect(defaults.array(forKey: "none") == nil)
            #expect(defaults.stringArray(forKey: "none") == nil)
            #expect(defaults.dictionary(forKey: "none") == nil)
            #expect(defaults.lastError == nil)
        }
    }

    @Test("removeObject and setting nil remove a key; removing a missing key is harmless")
    func removal() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("a", forKey: "one")
            defaults.set("b", forKey: "two")
            defaults.set(URL(string: "https://x.example")!, forKey: "three")
            defaults.removeObject(forKey: "one")
            defaults.set(nil as Any?, forKey: "two")
            defaults.set(nil as URL?, forKey: "three")
            defaults.removeObject(forKey: "never-stored")
            #expect(defaults.object(forKey: "one") == nil)
            #expect(defaults.object(forKey: "two") == nil)
            #expect(defaults.object(forKey: "three") == nil)
            #expect(try defaults.read { try $0.keys } == [])
            #expect(defaults.lastError == nil)
        }
    }

    @Test("registered defaults: searched after stored values, never stored, shared by this process's handles until the last closes")
    func registeredDefaults() throws {
        try withTemporaryDirectory { dir in
            do {
                let first = try openSuite(dir)
                first.register(defaults: ["sound": "default.caf", "badge": 5, "stored": "registered"])
                first.set("stored value", forKey: "stored")

                #expect(first.string(forKey: "sound") == "default.caf")
                #expect(first.integer(forKey: "badge") == 5)
                #expect(first.string(forKey: "stored") == "stored value")
                #expect(try first.read { try $0.value(forKey: "sound") } == nil)
                #expect(try first.read { try $0.keys } == ["stored"])

                let all = first.dictionaryRepresentation()
                #expect(all["sound"] as? String == "default.caf")
                #expect(all["stored"] as? String == "stored value")

                let second = try openSuite(dir)
                #expect(second.string(forKey: "sound") == "default.caf")
                second.register(defaults: ["badge": 6])
                #expect(first.integer(forKey: "badge") == 6)

                first.removeObject(forKey: "stored")
                #expect(first.string(forKey: "stored") == "registered")
            }
            // Every handle is released: a fresh open sees only what was stored.
            let fresh = try openSuite(dir)
            #expect(fresh.string(forKey: "sound") == nil)
            #expect(fresh.object(forKey: "badge") == nil)
            #expect(fresh.dictionaryRepresentation().isEmpty)
        }
    }

    @Test("dictionaryRepresentation holds every stored value; synchronize succeeds")
    func dictionaryRepresentationAndSynchronize() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            for i in 0..<20 { defaults.set(i, forKey: "k\(i)") }
            defaults.set(["x": [1, 2]] as [String: Any], forKey: "nested")
            let all = defaults.dictionaryRepresentation()
            #expect(all.count == 21)
            for i in 0..<20 { #expect(all["k\(i)"] as? Int == i) }
            #expect(((all["nested"] as? [String: Any])?["x"] as? [Any])?.count == 2)
            #expect(defaults.synchronize())
            #expect(defaults.lastError == nil)
        }
    }

    @Test("coercions follow UserDefaults")
    func coercions() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("42", forKey: "s42")
            defaults.set("0.5", forKey: "shalf")
            defaults.set(" 7 ", forKey: "spadded")
            defaults.set(7, forKey: "i7")
            defaults.set(0.5, forKey: "dhalf")
            defaults.set(3.9, forKey: "d3.9")
            defaults.set(2.0, forKey: "d2")
            defaults.set(true, forKey: "btrue")
            defaults.set(false, forKey: "bfalse")
            for (key, word) in [("yes", "YES"), ("true", "true"), ("one", "1"), ("no", "NO"), ("false", "false"), ("zero", "0")] {
                defaults.set(word, forKey: key)
            }
            defaults.set("banana", forKey: "word")
            defaults.set(["a", 1] as [Any], forKey: "mixedArray")
            defaults.set(Data("https://example.com/x".utf8), forKey: "urlData")

            #expect(defaults.integer(forKey: "s42") == 42)
            #expect(defaults.double(forKey: "s42") == 42)
            #expect(defaults.double(forKey: "shalf") == 0.5)
            #expect(defaults.integer(forKey: "shalf") == 0)
            #expect(defaults.integer(forKey: "spadded") == 7)
            #expect(defaults.string(forKey: "i7") == "7")
            #expect(defaults.double(forKey: "i7") == 7)
            #expect(defaults.string(forKey: "dhalf") == "0.5")
            #expect(defaults.string(forKey: "d2") == "2.0", "as Swift prints a Double, and Foundation's UserDefaults gives it")
            #expect(defaults.integer(forKey: "d3.9") == 3)
            #expect(defaults.string(forKey: "btrue") == "1")
            #expect(defaults.string(forKey: "bfalse") == "0")
            #expect(defaults.integer(forKey: "btrue") == 1)
            #expect(defaults.bool(forKey: "i7") == true)
            #expect(defaults.bool(forKey: "yes") == true)
            #expect(defaults.bool(forKey: "true") == true)
            #expect(defaults.bool(forKey: "one") == true)
            #expect(defaults.bool(forKey: "no") == false)
            #expect(defaults.bool(forKey: "false") == false)
            #expect(defaults.bool(forKey: "zero") == false)
            #expect(defaults.integer(forKey: "yes") == 0, "NSString's integerValue: no digits, 0")
            #expect(defaults.bool(forKey: "word") == false)
            #expect(defaults.integer(forKey: "word") == 0)
            #expect(defaults.double(forKey: "word") == 0)
            #expect(defaults.stringArray(forKey: "mixedArray") == nil)
            #expect(defaults.array(forKey: "mixedArray")?.count == 2)
            #expect(defaults.string(forKey: "mixedArray") == nil)
            #expect(defaults.data(forKey: "word") == nil)
            #expect(defaults.url(forKey: "urlData") == URL(string: "https://example.com/x"))
            // Coercion never rewrites what is stored.
            #expect(defaults.value(forKey: "s42") == .string("42"))
            #expect(defaults.lastError == nil)
        }
    }

    @Test("url(forKey:) keeps a whole URL and expands ~ in file paths")
    func urls() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            let web = URL(string: "https://user@sync.example.com:8443/v1/suites?x=1#top")!
            defaults.set(web, forKey: "web")
            #expect(defaults.url(forKey: "web") == web)
            #expect(defaults.string(forKey: "web") == web.absoluteString)

            defaults.set("http://example.com/path/file.caf", forKey: "http")
            #expect(defaults.url(forKey: "http")?.absoluteString == "http://example.com/path/file.caf")

            defaults.set("~/Library/Sounds/ring.caf", forKey: "tilde")
            let expanded = try #require(defaults.url(forKey: "tilde"))
            #expect(expanded.isFileURL)
            #expect(expanded.path == (NSString(string: "~/Library/Sounds/ring.caf").expandingTildeInPath))
            #expect(!expanded.path.contains("~"))

            defaults.set("/tmp/ring.caf", forKey: "absolute")
            #expect(defaults.url(forKey: "absolute") == URL(fileURLWithPath: "/tmp/ring.caf"))

            let file = dir.appendingPathComponent("a b.caf")
            defaults.set(file, forKey: "fileURL")
            #expect(defaults.url(forKey: "fileURL")?.path == file.path)

            defaults.set("", forKey: "empty")
            #expect(defaults.url(forKey: "empty") == nil)
            defaults.set(3, forKey: "number")
            #expect(defaults.url(forKey: "number") == nil)
        }
    }
}

// MARK: Transactions

@Suite("SharedDefaults: write, update, read")
struct TransactionTests {
    @Test("write is all or nothing: a throw inside leaves nothing changed")
    func writeAllOrNothing() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set(1, forKey: "a")
            defaults.set("keep", forKey: "c")
            #expect(throws: Abort.self) {
                try defaults.write { tx in
                    try tx.set(.integer(2), forKey: "a")
                    try tx.set(.integer(3), forKey: "b")
                    try tx.removeValue(forKey: "c")
                    try tx.removeAll()
                    throw Abort()
                }
            }
            #expect(defaults.integer(forKey: "a") == 1)
            #expect(defaults.object(forKey: "b") == nil)
            #expect(defaults.string(forKey: "c") == "keep")

            let result = try defaults.write { tx in
                try tx.set(.integer(2), forKey: "a")
                try tx.set(.integer(3), forKey: "b")
                try tx.removeValue(forKey: "c")
                return "committed"
            }
            #expect(result == "committed")
            #expect(defaults.integer(forKey: "a") == 2)
            #expect(defaults.integer(forKey: "b") == 3)
            #expect(defaults.object(forKey: "c") == nil)
        }
    }

    @Test("update returns the new value; returning nil removes the key")
    func update() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            for expected in 1...5 {
                let new = try defaults.update("unread") { old in .integer((old?.intValue ?? 0) + 1) }
                #expect(new == .integer(expected))
            }
            #expect(defaults.integer(forKey: "unread") == 5)
            let removed = try defaults.update("unread") { old in
                #expect(old == .integer(5))
                return nil
            }
            #expect(removed == nil)
            #expect(defaults.object(forKey: "unread") == nil)
            #expect(throws: Abort.self) { try defaults.update("x") { _ in throw Abort() } }
            #expect(try defaults.update("missing") { old in old } == nil)
            #expect(try defaults.read { try $0.keys } == [])
        }
    }

    @Test("Transaction.keys lists stored keys in byte order; removeAll removes them all")
    func keysAndRemoveAll() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.register(defaults: ["registered": 1])
            let keys = ["b", "a", "é", "Z", "aa", "a b"]
            try defaults.write { tx in for key in keys { try tx.set(.string(key), forKey: key) } }
            let expected = keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            #expect(try defaults.read { try $0.keys } == expected)
            #expect(try defaults.write { try $0.keys } == expected)

            try defaults.write { tx in
                try tx.removeAll()
                #expect(try tx.keys == [])
                try tx.set(.bool(true), forKey: "after")
            }
            #expect(try defaults.read { try $0.keys } == ["after"])
            try defaults.write { try $0.removeAll() }
            try defaults.write { try $0.removeAll() }  // already empty
            #expect(try defaults.read { try $0.keys } == [])
            #expect(defaults.integer(forKey: "registered") == 1)
        }
    }

    @Test("calls on the suite inside write join its transaction; other threads see only commits")
    func nestedCallsJoin() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("before", forKey: "k")
            #expect(throws: Abort.self) {
                try defaults.write { tx in
                    try tx.set(.string("uncommitted"), forKey: "k")
                    #expect(defaults.string(forKey: "k") == "uncommitted")
                    #expect(defaults.dictionaryRepresentation()["k"] as? String == "uncommitted")
                    defaults.set(5, forKey: "n")  // joins: no deadlock on LMDB's writer lock
                    #expect(try tx.value(forKey: "n") == .integer(5))
                    try defaults.update("n") { .integer(($0?.intValue ?? 0) + 1) }
                    #expect(try tx.value(forKey: "n") == .integer(6))
                    let nested = try defaults.write { inner in try inner.value(forKey: "k") }
                    #expect(nested == .string("uncommitted"))
                    #expect(try defaults.read { try $0.value(forKey: "k") } == .string("uncommitted"))

                    // Another thread reads the last committed snapshot.
                    #expect(readOnAnotherThread(defaults, key: "k") == "before")
                    throw Abort()
                }
            }
            // The joined calls were rolled back with the transaction.
            #expect(defaults.string(forKey: "k") == "before")
            #expect(defaults.object(forKey: "n") == nil)
        }
    }

    @Test("read is read-only")
    func readIsReadOnly() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("v", forKey: "k")
            let attempts: [(String, (SharedDefaults.Transaction) throws -> Void)] = [
                ("set", { try $0.set(.integer(1), forKey: "k") }),
                ("removeValue", { try $0.removeValue(forKey: "k") }),
                ("removeAll", { try $0.removeAll() }),
            ]
            for (name, attempt) in attempts {
                let error = sharedDefaultsError { try defaults.read(attempt) }
                #expect(error?.code == .readOnlyTransaction, "\(name)")
            }
            #expect(try defaults.read { tx in try tx.value(forKey: "k") } == .string("v"))
            #expect(try defaults.read { tx in try tx.record(forKey: "k")?.stamp.origin } != nil)
            #expect(defaults.string(forKey: "k") == "v")
        }
    }

    @Test("threads of one process updating one counter through several handles lose nothing")
    func concurrentUpdates() throws {
        try withTemporaryDirectory { dir in
            let handles = try (0..<2).map { _ in try openSuite(dir) }
            let failures = ErrorLog()
            DispatchQueue.concurrentPerform(iterations: 4) { worker in
                let defaults = handles[worker % 2]
                for _ in 0..<500 {
                    do {
                        try defaults.update("counter") { .integer(($0?.intValue ?? 0) + 1) }
                        _ = defaults.integer(forKey: "counter")  // readers alongside the writers
                    } catch let error as SharedDefaultsError {
                        failures.handler(error)
                    } catch {
                        Issue.record("\(error)")
                    }
                }
            }
            #expect(failures.all.isEmpty)
            #expect(handles[0].integer(forKey: "counter") == 2000)
        }
    }

    @Test("every change carries an HLC that increases, and this store's origin")
    func stamps() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            var previous: Stamp?
            for i in 0..<5 {
                defaults.set(i, forKey: "k\(i % 2)")
                let stamp = try #require(try defaults.read { try $0.record(forKey: "k\(i % 2)")?.stamp })
                #expect(stamp.origin == defaults.store.origin)
                if let previous { #expect(stamp.hlc > previous.hlc) }
                previous = stamp
            }
        }
    }
}

/// `defaults.string(forKey:)` run on a new thread, waited for.
private func readOnAnotherThread(_ defaults: SharedDefaults, key: String) -> String? {
    final class Outcome: Sendable {
        let value = Mutex<String?>(nil)
        let done = DispatchSemaphore(value: 0)
    }
    let outcome = Outcome()
    let thread = Thread {
        let value = defaults.string(forKey: key)
        outcome.value.withLock { $0 = value }
        outcome.done.signal()
    }
    thread.start()
    outcome.done.wait()
    return outcome.value.withLock { $0 }
}

// MARK: Typed keys

@Suite("SharedDefaults: typed keys")
struct TypedKeyTests {
    @Test("each key type reads its default, then what was set")
    func roundTrips() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            #expect(defaults[.sound] == "default")
            #expect(defaults[.badge] == 0)
            #expect(defaults[.volume] == 0.8)
            #expect(defaults[.muted] == false)
            #expect(defaults[.lastSeen] == Date(timeIntervalSince1970: 0))
            #expect(defaults[.recent] == [])
            #expect(defaults[.counts] == [:])
            #expect(defaults[.draft] == nil)
            #expect(defaults[.server] == URL(string: "https://default.example")!)
            #expect(defaults[.ringtone] == Ringtone(name: "none", volume: 0, tags: []))

            let date = Date(timeIntervalSince1970: 1_795_255_200.25)
            let tone = Ringtone(name: "bell", volume: 0.5, tags: ["loud", "é"])
            defaults[.sound] = "bell.aiff"
            defaults[.badge] = 3
            defaults[.volume] = 0.25
            defaults[.muted] = true
            defaults[.lastSeen] = date
            defaults[.recent] = ["a", "b"]
            defaults[.counts] = ["x": 1, "y": 2]
            defaults[.draft] = "hello"
            defaults[.server] = URL(string: "https://sync.example.com/v1?x=1")!
            defaults[.ringtone] = tone
            #expect(defaults.lastError == nil)

            #expect(defaults[.sound] == "bell.aiff")
            #expect(defaults[.badge] == 3)
            #expect(defaults[.volume] == 0.25)
            #expect(defaults[.muted] == true)
            #expect(defaults[.lastSeen] == date)
            #expect(defaults[.recent] == ["a", "b"])
            #expect(defaults[.counts] == ["x": 1, "y": 2])
            #expect(defaults[.draft] == "hello")
            #expect(defaults[.server] == URL(string: "https://sync.example.com/v1?x=1")!)
            #expect(defaults[.ringtone] == tone)

            // Property-list types are stored as themselves, readable by the untyped API.
            #expect(defaults.string(forKey: "sound") == "bell.aiff")
            #expect(defaults.value(forKey: "badge") == .integer(3))
            #expect(defaults.value(forKey: "volume") == .double(0.25))
            #expect(defaults.value(forKey: "muted") == .bool(true))
            #expect(defaults.value(forKey: "lastSeen") == .date(date))
            #expect(defaults.stringArray(forKey: "recent") == ["a", "b"])
            #expect(defaults.value(forKey: "counts") == .dictionary(["x": .integer(1), "y": .integer(2)]))
            #expect(defaults.url(forKey: "server") == URL(string: "https://sync.example.com/v1?x=1")!)
            // A custom Codable is stored as a JSON string.
            let json = try #require(defaults.string(forKey: "ringtone"))
            #expect(try JSONDecoder().decode(Ringtone.self, from: Data(json.utf8)) == tone)

            // Setting an optional key to nil removes it; reset removes any key.
            defaults[.draft] = nil
            #expect(defaults[.draft] == nil)
            #expect(try defaults.read { try $0.value(forKey: "draft") } == nil)
            defaults.reset(.sound)
            #expect(defaults[.sound] == "default")
            #expect(defaults.object(forKey: "sound") == nil)
            #expect(defaults.lastError == nil)
        }
    }

    @Test("typed keys read values of other types through UserDefaults' coercions")
    func coercedReads() throws {
        try withTemporaryDirectory { dir in
            let defaults = try openSuite(dir)
            defaults.set("42", forKey: "badge")
            defaults.set("0.5", forKey: "volume")
            defaults.set("YES", forKey: "muted")
            defaults.set(7, forKey: "sound")
            #expect(defaults[.badge] == 42)
            #expect(defaults[.volume] == 0.5)
            #expect(defaults[.muted] == true)
            #expect(defaults[.sound] == "7")
            #expect(defaults.lastError == nil)
        }
    }

    @Test("a stored value that does not convert gives the default and is reported")
    func mismatches() throws {
        try withTemporaryDirectory { dir in
            let log = ErrorLog()
            let defaults = try openSuite(dir) { $0.onError = log.handler }
            let cases: [(String, PropertyListValue, () -> Bool)] = [
                ("badge", .string("many"), { defaults[.badge] == 0 }),
                ("volume", .data(Data([1])), { defaults[.volume] == 0.8 }),
                ("lastSeen", .string("yesterday"), { defaults[.lastSeen] == Date(timeIntervalSince1970: 0) }),
                ("recent", .array([.string("a"), .data(Data())]), { defaults[.recent] == [] }),
                ("counts", .dictionary(["x": .string("one")]), { defaults[.counts] == [:] }),
                ("ringtone", .string("{not json"), { defaults[.ringtone] == Ringtone(name: "none", volume: 0, tags: []) }),
                ("ringtone", .integer(3), { defaults[.ringtone] == Ringtone(name: "none", volume: 0, tags: []) }),
                ("sound", .array([]), { defaults[.sound] == "default" }),
            ]
            for (index, (key, stored, readsDefault)) in cases.enumerated() {
                try defaults.write { try $0.set(stored, forKey: key) }
                #expect(readsDefault(), "\(key) holding \(stored)")
                #expect(defaults.lastError?.code == .corruptValue, "\(key)")
                #expect(defaults.lastError?.key == key)
                #expect(log.all.count == index + 1)
                // The stored value is reported, not replaced.
                #expect(defaults.value(forKey: key) == stored)
            }
        }
    }
}

// MARK: Sharing, growth, durability, file modes

@Suite("SharedDefaults: storage")
struct StorageTests {
    @Test("two handles on one suite in one process share one environment")
    func handlesShareEnvironment() throws {
        try withTemporaryDirectory { dir in
            let a = try openSuite(dir)
            // The same file reached through another spelling of the directory.
            let b = try openSuite(dir.appendingPathComponent("sub/..", isDirectory: true))
            #expect(a.store === b.store)
            #expect(a.fileURL.path == b.fileURL.path)
            a.set("from a", forKey: "k")
            #expect(b.string(forKey: "k") == "from a")
            try b.update("n") { _ in .integer(1) }
            #expect(a.integer(forKey: "n") == 1)
            let other = try openSuite(dir, "other.suite")
            #expect(other.store !== a.store)
            #expect(other.string(forKey: "k") == nil)
        }
    }

    @Test("the map grows on demand, many times, and keeps everything")
    func mapGrowth() throws {
        try withTemporaryDirectory { dir in
            let initial = 64 << 10
            let value = { (i: Int) in String(repeating: String(i % 10), count: 1000) + "#\(i)" }
            do {
                let defaults = try openSuite(dir) { $0.initialMapSize = initial }
                #expect(try defaults.store.environment.info().mapSize == initial)
                for batch in 0..<20 {
                    try defaults.write { tx in
                        for i in (batch * 100)..<((batch + 1) * 100) { try tx.set(.string(value(i)), forKey: "key-\(i)") }
                    }
                }
                let info = try defaults.store.environment.info()
                #expect(info.mapSize >= 2_000_000)
                #expect(info.usedBytes > 2_000_000)
                for i in 0..<2000 { #expect(defaults.string(forKey: "key-\(i)") == value(i)) }
            }
            let reopened = try openSuite(dir) { $0.initialMapSize = initial }
            #expect(try reopened.read { try $0.keys.count } == 2000)
            for i in stride(from: 0, to: 2000, by: 7) { #expect(reopened.string(forKey: "key-\(i)") == value(i)) }
        }
    }

    @Test("at the maximum map size writes fail with storeFull, and nothing stored is lost")
    func storeFull() throws {
        try withTemporaryDirectory { dir in
            let maximum = 256 << 10
            let defaults = try openSuite(dir) {
                $0.initialMapSize = 64 << 10
                $0.maximumMapSize = maximum
            }
            let payload = String(repeating: "p", count: 1000)
            var written = 0
            var failure: SharedDefaultsError?
            while failure == nil && written < 1000 {
                do {
                    try defaults.write { try $0.set(.string(payload + "\(written)"), forKey: "key-\(written)") }
                    written += 1
                } catch let error as SharedDefaultsError {
                    failure = error
                }
            }
            let error = try #require(failure)
            #expect(error.code == .storeFull)
            #expect(error.description.contains("\(maximum)"))
            #expect(written > 50)
            #expect(try defaults.store.environment.info().mapSize <= maximum)

            // The non-throwing setter reports the same (for a value larger than the one refused: a
            // smaller one may still fit the pages the refused write would have split).
            defaults.set(String(repeating: payload, count: 8), forKey: "key-extra")
            #expect(defaults.lastError?.code == .storeFull)
            #expect(defaults.object(forKey: "key-extra") == nil)

            for i in 0..<written { #expect(defaults.string(forKey: "key-\(i)") == payload + "\(i)") }
            #expect(defaults.object(forKey: "key-\(written)") == nil)

            // Still usable, as the error advises: keys can be removed, and then written.
            #expect(throws: Never.self, "removing a key from a full store") {
                try defaults.write { try $0.removeValue(forKey: "key-1") }
            }
            #expect(defaults.object(forKey: "key-1") == nil)
            #expect(throws: Never.self, "removing several keys from a full store") {
                try defaults.write { tx in for i in 2..<10 { try tx.removeValue(forKey: "key-\(i)") } }
            }
            #expect(throws: Never.self, "a small overwrite after removals") {
                try defaults.write { try $0.set(.integer(1), forKey: "key-0") }
            }
            #expect(defaults.integer(forKey: "key-0") == 1)
            #expect(defaults.string(forKey: "key-10") == payload + "10")
        }
    }

    @Test("a maximum map size below the initial size is still the maximum")
    func maximumBelowInitial() throws {
        try withTemporaryDirectory { dir in
            let maximum = 256 << 10  // initialMapSize stays at its default, 1 MiB
            let defaults = try openSuite(dir) { $0.maximumMapSize = maximum }
            let payload = String(repeating: "p", count: 1000)
            var written = 0
            while written < 2000 {
                do {
                    try defaults.write { try $0.set(.string(payload), forKey: "key-\(written)") }
                    written += 1
                } catch {
                    #expect((error as? SharedDefaultsError)?.code == .storeFull)
                    break
                }
            }
            #expect(try defaults.store.environment.info().mapSize <= maximum)
            #expect(written < 256, "wrote \(written) KB into a store limited to 256 KiB")
        }
    }

    @Test("fsyncEveryCommit stores and reads values like the default mode")
    func fsyncEveryCommit() throws {
        try withTemporaryDirectory { dir in
            let configure = { (configuration: inout SharedDefaults.Configuration) in configuration.durability = .fsyncEveryCommit }
            do {
                let defaults = try openSuite(dir, "durable", configure)
                #expect(defaults.configuration.durability == .fsyncEveryCommit)
                defaults.set("ring.caf", forKey: "sound")
                try defaults.write { tx in
                    try tx.set(.integer(3), forKey: "badge")
                    try tx.set(.array([.bool(true)]), forKey: "list")
                }
                try defaults.update("badge") { .integer(($0?.intValue ?? 0) + 1) }
                defaults.removeObject(forKey: "list")
                #expect(defaults.synchronize())
                #expect(defaults.lastError == nil)
            }
            let reopened = try openSuite(dir, "durable", configure)
            #expect(reopened.string(forKey: "sound") == "ring.caf")
            #expect(reopened.integer(forKey: "badge") == 4)
            #expect(reopened.object(forKey: "list") == nil)
        }
    }

    @Test("files are 0600 and a new directory 0700")
    func ownerModes() throws {
        try withTemporaryDirectory { dir in
            let suiteDir = dir.appendingPathComponent("new/suites", isDirectory: true)
            let defaults = try openSuite(suiteDir, "modes")
            defaults.set(1, forKey: "k")
            let path = defaults.fileURL.path
            #expect(path == suiteDir.appendingPathComponent("modes.lmdb").path)
            #expect(try permissions(path) == 0o600)
            #expect(try permissions(path + "-lock") == 0o600)
            #expect(try permissions(path + "-notify") == 0o600)
            #expect(try permissions(suiteDir.path) == 0o700)
        }
    }

    @Test("group sharing makes files 0660 and a new directory 0770")
    func groupModes() throws {
        try withTemporaryDirectory { dir in
            let suiteDir = dir.appendingPathComponent("shared", isDirectory: true)
            let defaults = try openSuite(suiteDir, "modes") { $0.fileSharing = .group }
            defaults.set(1, forKey: "k")
            let path = defaults.fileURL.path
            #expect(try permissions(path) == 0o660)
            #expect(try permissions(path + "-lock") == 0o660)
            #expect(try permissions(path + "-notify") == 0o660)
            #expect(try permissions(suiteDir.path) == 0o770)
        }
    }

    @Test("an existing directory's mode is left alone")
    func existingDirectoryMode() throws {
        try withTemporaryDirectory { dir in
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: dir.path)
            let defaults = try openSuite(dir)
            defaults.set(1, forKey: "k")
            #expect(try permissions(dir.path) == 0o755)
            #expect(try permissions(defaults.fileURL.path) == 0o600)
        }
    }
}
