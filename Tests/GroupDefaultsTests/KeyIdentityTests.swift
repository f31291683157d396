import Foundation
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaults
@testable import PropertyListFormats

/// Keys are their bytes (issue 46): `é` and `e\u{301}`, which Swift's `String ==` takes for one, are
/// two keys to the core and to every property-list format, as to LMDB and Apple's property lists.
@Suite struct KeyIdentityTests {
    /// Pairs that Swift's `String ==` takes for one key or that look alike, one of each kind.
    static let pairs = LookAlikeNames.keyPairs

    /// Every pair's two spellings, each with its own value (and a nested dictionary, whose keys
    /// are plain), as a suite's entries.
    static let entries: [(key: String, value: PropertyListValue)] = pairs.enumerated().flatMap { index, pair in
        [
            (key: "\(index)" + pair.0, value: PropertyListValue.integer(2 * index)),
            (key: "\(index)" + pair.1, value: .dictionary(["n": .integer(2 * index + 1), "list": .array([.string(pair.1)])])),
        ]
    }

    static func byBytes(_ entries: [(key: String, value: PropertyListValue)]) -> [ExactName: PropertyListValue] {
        Dictionary(entries.map { ($0.key.exact, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    @Test("each format writes and reads back both spellings of every pair", arguments: PropertyListFormat.allCases)
    func formatsKeepBothSpellings(format: PropertyListFormat) throws {
        let data = try PropertyListValue.propertyListData(entries: Self.entries, format: format)
        guard case .entries(let read) = try PropertyListValue.decodeSuite(propertyListData: data) else {
            Issue.record("\(format): the top level is not a dictionary")
            return
        }
        #expect(read.count == Self.entries.count, "\(format)")
        let back = Self.byBytes(read)
        for (key, value) in Self.entries where format != .openStep {
            #expect(back[key.exact] == value, "\(format): \(key.unicodeScalars.map(\.value))")
        }
        #expect(Set(back.keys) == Set(Self.entries.map(\.key.exact)), "\(format)")
    }

    @Test("a suite without look-alike keys is written as its dictionary always was", arguments: PropertyListFormat.allCases)
    func entriesEncodeAsTheDictionary(format: PropertyListFormat) throws {
        let dictionary: [String: PropertyListValue] = [
            "sound": "ring.caf", "a10": .integer(1), "a2": .double(0.5), "B": .bool(true), "\u{E9}t\u{E9}": .data(Data([1, 2])),
            "nested": .dictionary(["k": .array([.integer(1), .dictionary([:])])]), "empty": .dictionary([:]), "z/": .string("<&>"),
        ]
        let entries = dictionary.map { (key: $0.key, value: $0.value) }.shuffled()
        #expect(
            try PropertyListValue.propertyListData(entries: entries, format: format)
                == PropertyListValue.dictionary(dictionary).propertyListData(format: format)
        )
        #expect(
            try PropertyListValue.propertyListData(entries: [], format: format) == PropertyListValue.dictionary([:]).propertyListData(format: format)
        )
        #expect(PropertyListValue.openStepText(entries: entries) == PropertyListValue.dictionary(dictionary).openStepText)
        #expect(PropertyListValue.plainJSON(entries: entries) == PropertyListValue.dictionary(dictionary).plainJSON())
    }

    @Test("the same bytes twice are a duplicate; two spellings inside a value are refused, never merged", arguments: PropertyListFormat.allCases)
    func duplicatesAndNestedSpellings(format: PropertyListFormat) throws {
        #expect(throws: PropertyListFormatError.self) {
            try PropertyListValue.propertyListData(entries: [("\u{E9}", .integer(1)), ("\u{E9}", .integer(2))], format: format)
        }
        // Written by hand: the formats' writers cannot produce these.
        let duplicate = Self.document(format, keys: ["\u{E9}", "\u{E9}"], nested: false)
        let nested = Self.document(format, keys: ["\u{E9}", "e\u{301}"], nested: true)
        for (data, expected) in [(duplicate, "duplicate key"), (nested, "canonically equivalent")] {
            let decoders: [(Data) throws -> Void] = [
                { _ = try PropertyListValue.decodeSuite(propertyListData: $0) }, { _ = try PropertyListValue.decode(propertyListData: $0) },
            ]
            for decode in decoders {
                do {
                    try decode(data)
                    Issue.record("\(format): decoded \(expected)")
                } catch {
                    #expect("\(error)".contains(expected), "\(format): \(error)")
                }
            }
        }
        // At the top level, as a plain value, the two spellings are refused too (a dictionary cannot hold them).
        #expect(throws: PropertyListFormatError.self) {
            try PropertyListValue.decode(propertyListData: Self.document(format, keys: ["\u{E9}", "e\u{301}"], nested: false))
        }
    }

    /// A dictionary of `keys` (integers 1, 2, …) in `format`, at the top level or inside a value.
    static func document(_ format: PropertyListFormat, keys: [String], nested: Bool) -> Data {
        let numbered = keys.enumerated().map { ($1, $0 + 1) }
        switch format {
        case .xml:
            let dict = "<dict>" + numbered.map { "<key>\($0)</key><integer>\($1)</integer>" }.joined() + "</dict>"
            return Data(("<plist version=\"1.0\">" + (nested ? "<dict><key>outer</key>\(dict)</dict>" : dict) + "</plist>").utf8)
        case .openStep:
            let dict = "{" + numbered.map { "\"\($0)\" = \($1);" }.joined() + "}"
            return Data((nested ? "{ outer = \(dict); }" : dict).utf8)
        case .json:
            let dict = #"{"dictionary": {"# + numbered.map { #""\#($0)": {"integer": \#($1)}"# }.joined(separator: ", ") + "}}"
            return Data((nested ? #"{"dictionary": {"outer": \#(dict)}}"# : dict).utf8)
        case .binary:
            // Objects: 0 the top dictionary (nested: 1 its key "outer", 2 the inner dictionary);
            // then the keys and the integers.
            func string(_ s: String) -> [UInt8] { [0x60 | UInt8(s.utf16.count)] + s.utf16.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } }
            let base = nested ? 3 : 1
            var objects: [[UInt8]] = nested ? [[0xD1, 1, 2], [0x55] + Array("outer".utf8)] : []
            objects.append(
                [0xD0 | UInt8(keys.count)] + (0..<keys.count).map { UInt8(base + $0) } + (0..<keys.count).map { UInt8(base + keys.count + $0) }
            )
            objects += keys.map(string) + numbered.map { [0x10, UInt8($1)] }
            var out = Array("bplist00".utf8)
            var offsets: [UInt8] = []
            for object in objects {
                offsets.append(UInt8(out.count))
                out += object
            }
            let table = out.count
            out += offsets
            out += [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, UInt8(objects.count)] + [UInt8](repeating: 0, count: 8)
            out += [0, 0, 0, 0, 0, 0, 0, UInt8(table)]
            return Data(out)
        }
    }

    @Test func theCoreKeepsBothSpellings() throws {
        try withTemporaryDirectory { directory in
            let defaults = try openSuite(directory)
            try defaults.replaceAll(with: Self.entries)
            #expect(try defaults.storedValues().count == Self.entries.count)
            for (key, value) in Self.entries { #expect(defaults.value(forKey: key) == value) }

            // Restored from a backup, both stay.
            let backup = directory.appendingPathComponent("backup.lmdb")
            try defaults.backup(to: backup)
            try defaults.replaceAll(with: [(key: "other", value: .integer(0))])
            try defaults.restore(from: backup)
            #expect(Self.byBytes(try defaults.storedValues()) == Self.byBytes(Self.entries))

            // Replacing with one spelling removes the other.
            let (first, second) = ("0" + Self.pairs[0].0, "0" + Self.pairs[0].1)
            try defaults.replaceAll(with: [(key: second, value: .integer(7))])
            #expect(try defaults.storedValues().map(\.key.exact) == [second.exact])
            #expect(throws: SharedDefaultsError.self) {
                try defaults.replaceAll(with: [(key: first, value: .integer(1)), (key: first, value: .integer(2))])
            }

            // Renaming one spelling to the other moves the value.
            try defaults.rename(second, to: first)
            #expect(try defaults.storedValues().map(\.key.exact) == [first.exact])

            // A registered default of one spelling is not the other's.
            defaults.register(defaults: [second: 9])
            #expect(defaults.value(forKey: first) == .integer(7))
            defaults.removeObject(forKey: first)
            #expect(defaults.value(forKey: first) == nil)
            #expect(defaults.value(forKey: second) == .integer(9))

            // A feed of one spelling does not deliver the other's changes.
            let feed = try defaults.changeFeed(forKeys: [first])
            defaults.set(1, forKey: second)
            defaults.set(2, forKey: first)
            #expect(try feed.nextAvailable()?.key.exact == first.exact)
        }
    }

    @Test func localOnlyDeclarationsAndTheConflictJournalKeepBothSpellings() throws {
        try withTemporaryDirectory { directory in
            let defaults = try openSuite(directory)
            let (first, second) = Self.pairs[0]
            defaults[SharedDefaults.Key<Int>(first, default: 0, sync: .local)] = 1
            defaults[SharedDefaults.Key<Int>(second, default: 0, sync: .local)] = 2
            let local = try defaults.syncState().localOnlyKeys.map(\.exact)
            #expect(local.contains(first.exact) && local.contains(second.exact), "\(local)")

            let stamp = try #require(try defaults.syncEntry(forKey: first)).stamp
            _ = try defaults.journalUnpushed(RefusedRecord(key: first, stamp: stamp, reason: "test"))
            #expect(try defaults.conflicts(forKey: first).count == 1)
            #expect(try defaults.conflicts(forKey: second).isEmpty)
        }
    }

    @Test("a new key or suite name holds no control character (NameKind): refused with invalidKey / invalidSuiteName, nothing made")
    func controlCharactersRefused() throws {
        try withTemporaryDirectory { directory in
            for name in ["S\nx", "esc\u{1B}[2K", "a\u{202E}b", "line\u{2028}"] {
                #expect(throws: SharedDefaultsError.self) { _ = try SharedDefaults(suiteName: name, directory: directory) }
                let defaults = try openSuite(directory)
                #expect(throws: SharedDefaultsError.self) { try defaults.write { try $0.set(.integer(1), forKey: name) } }
                #expect(try defaults.storedValues().isEmpty)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).allSatisfy { !$0.contains("\n") })
        }
    }
}
