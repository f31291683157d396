import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import PropertyBased
import Testing

/// The server's own writer of a push's answer says what Foundation's `JSONEncoder` says.
@Suite("Wire JSON")
struct WireJSONTests {
    @Test("random answers: the bytes decode to the same answer, and parse to the same JSON as JSONEncoder's")
    func sameAsFoundation() async {
        await propertyCheck(count: 300, input: Self.responses) { response in
            let ours = try WireJSON.encode(response)
            let foundation = try JSONEncoder().encode(response)
            #expect(try JSONDecoder().decode(PushResponse.self, from: Data(ours)) == response)
            let parsed = try JSONSerialization.jsonObject(with: Data(ours)) as? NSDictionary
            let expected = try JSONSerialization.jsonObject(with: foundation) as? NSDictionary
            #expect(parsed != nil && parsed == expected, "\(String(decoding: ours, as: UTF8.self))")
        }
    }

    @Test("random ops and push bodies: the bytes decode to the same push, and parse to the same JSON as JSONEncoder's")
    func opsSameAsFoundation() async {
        await propertyCheck(count: 300, input: Self.responses) { response in
            // Each winner of a random answer as an op: values of each type, deletions, sealed ones.
            let ops = response.results.compactMap(\.winner).map { entry in
                var op =
                    entry.sealed.map { PushOp(keyID: entry.key, sealed: $0, deleted: entry.isDeleted, hlc: entry.hlc) }
                    ?? PushOp(key: entry.key, value: entry.value, hlc: entry.hlc)
                if entry.rev != nil { op.origin = entry.origin }
                return op
            }
            let request = PushRequest(deviceID: UInt64.random(in: 0 ... .max), batchID: "b\"\(ops.count)", ops: ops)
            let ours = WireJSON.pushBody(deviceID: request.deviceID, batchID: request.batchID, encodedOps: try ops.map(WireJSON.encode))
            #expect(try JSONDecoder().decode(PushRequest.self, from: Data(ours)) == request)
            let parsed = try JSONSerialization.jsonObject(with: Data(ours)) as? NSDictionary
            let expected = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(request)) as? NSDictionary
            #expect(parsed != nil && parsed == expected, "\(String(decoding: ours, as: UTF8.self))")
        }
    }

    @Test("pages, history and events written from stored entries: the very bytes JSONEncoder writes with sorted keys")
    func storedPagesSameBytesAsFoundation() async {
        await propertyCheck(count: 300, input: Self.responses) { response in
            let entries = try response.results.compactMap(\.winner).enumerated().map { index, entry in
                let stamp = Stamp(hlc: entry.hlc, origin: entry.origin)
                let rev = entry.rev ?? UInt64(index + 1)
                var stored =
                    try entry.sealed.map { StoredEntry(key: entry.key, sealed: $0, deleted: entry.isDeleted, stamp: stamp, rev: rev) }
                    ?? StoredEntry(key: entry.key, valueJSON: try entry.value?.typedJSON(), stamp: stamp, rev: rev)
                stored.account = entry.account
                return stored
            }
            let sorted = JSONEncoder()
            sorted.outputFormatting = .sortedKeys
            let changes = StoredChanges(entries: entries, lastRev: response.headRev, hasMore: entries.count % 2 == 0)
            let changesJSON = changes.json(valueLimit: .max)
            #expect(changesJSON == Array(try sorted.encode(try changes.page())), "\(String(decoding: changesJSON, as: UTF8.self))")
            let next = entries.last.map { $0.key + "/" }
            let snapshot = StoredSnapshot(entries: entries, headRev: response.headRev, next: next)
            let snapshotJSON = snapshot.json(valueLimit: .max)
            #expect(snapshotJSON == Array(try sorted.encode(try snapshot.page())), "\(String(decoding: snapshotJSON, as: UTF8.self))")
            let versions = entries.map { StoredVersion(entry: $0, receivedMilliseconds: $0.rev % 4_000_000_000_000) }
            let history = KeyHistory(key: "k/\"", versions: try versions.map { try $0.keyVersion() })
            #expect(keyHistoryJSON(key: "k/\"", versions: versions, valueLimit: .max) == Array(try sorted.encode(history)))
            for entry in entries {
                var event = WireJSON()
                SyncStreamEvent.writeEntry(revision: entry.rev, into: &event) { entry.write(into: &$0, valueLimit: .max) }
                let expected = try SyncStreamEvent.entry(try entry.syncEntry(), revision: entry.rev).serverSentEvent().encoded
                #expect(String(decoding: event.bytes, as: UTF8.self) == expected)
                var parser = ServerSentEventParser()
                let parsed = try parser.feed(event.bytes).compactMap(SyncStreamEvent.init)
                #expect(parsed == [.entry(try entry.syncEntry(), revision: entry.rev)])
            }
        }
    }

    /// `depth` arrays around an integer.
    static func nested(_ depth: Int) -> PropertyListValue {
        (0..<depth).reduce(PropertyListValue.integer(1)) { value, _ in .array([value]) }
    }

    /// Typed JSON of `depth` arrays around an integer.
    static func nestedJSON(_ depth: Int) -> [UInt8] {
        Array((String(repeating: "{\"array\":[", count: depth) + "{\"integer\":1}" + String(repeating: "]}", count: depth)).utf8)
    }

    @Test("a stored value that is damaged, too deep or too large is served as unavailable for that key alone, in pages, events and push answers")
    func unavailableStoredValue() throws {
        let stamp = Stamp(hlc: HLC(rawValue: 1), origin: 2)
        let bad: [([UInt8], UnavailableValue)] = [
            (Array("{\"string\":\"a\nb\"}".utf8), .damaged), (Array("garbage".utf8), .damaged), ([0x7B, 0xFF, 0x7D], .damaged), ([], .damaged),
            (Array("{\"string\":\"x\"".utf8), .damaged), (Array("{\"integer\":1.5}".utf8), .damaged), (Array("{\"date\":\"soon\"}".utf8), .damaged),
            (Array("{\"array\":[1]}".utf8), .damaged), (Array("{\"string\":\"a\",\"bool\":true}".utf8), .damaged),
            (Self.nestedJSON(PropertyListValue.maximumNestingDepth + 1), .tooDeep), (Self.nestedJSON(254), .tooDeep),
            (Self.nestedJSON(300), .tooDeep), (Array("{\"string\":\"\(String(repeating: "x", count: 8192))\"}".utf8), .tooLarge),
        ]
        let good = StoredEntry(key: "good", valueJSON: Array("{\"string\":\"é\\/\"}".utf8), stamp: stamp, rev: 2)
        for (json, reason) in bad {
            let stored = StoredEntry(key: "bad", valueJSON: json, stamp: stamp, rev: 1)
            let page = try JSONDecoder().decode(
                ChangesPage.self,
                from: Data(StoredChanges(entries: [stored, good], lastRev: 2, hasMore: false).json(valueLimit: 8192))
            )
            #expect(
                page.entries[0] == SyncEntry(key: "bad", unavailable: reason, hlc: stamp.hlc, origin: 2, rev: 1),
                "\(String(decoding: json.prefix(40), as: UTF8.self))"
            )
            #expect(page.entries[1].value == .string("é/"))
            var event = WireJSON()
            SyncStreamEvent.writeEntry(revision: 1, into: &event) { stored.write(into: &$0, valueLimit: 8192) }
            var parser = ServerSentEventParser()
            #expect(try parser.feed(event.bytes).compactMap(SyncStreamEvent.init) == [.entry(page.entries[0], revision: 1)])
            let answer = try JSONDecoder().decode(
                PushResponse.self,
                from: Data(
                    try WireJSON.encode(
                        PushResponse(
                            headRev: 1,
                            results: [PushResult(key: "bad", status: .superseded, winner: stored.servedEntry(valueLimit: 8192))],
                            serverTime: "t"
                        )
                    )
                )
            )
            #expect(answer.results[0].winner == page.entries[0])
        }
        // A sealed payload is checked by its size alone.
        let sealed = { (count: Int) in
            StoredEntry(key: "id", sealed: SealedPayload(epoch: 1, box: Array(repeating: 7, count: count)), deleted: false, stamp: stamp, rev: 3)
        }
        #expect(sealed(8193).servedEntry(valueLimit: 8192) == SyncEntry(key: "id", unavailable: .tooLarge, hlc: stamp.hlc, origin: 2, rev: 3))
        #expect(sealed(8192).servedEntry(valueLimit: 8192).sealed?.box.count == 8192)
        // What the server's own writer makes passes, up to the limit.
        for value: PropertyListValue in [
            .double(.nan), .double(-1e300), .data(Data(repeating: 0xFF, count: 30)), .date(Date(timeIntervalSince1970: 0)),
            .dictionary(["a": .bool(false), "": .array([])]), Self.nested(PropertyListValue.maximumNestingDepth),
        ] {
            #expect(StoredValueCheck.problem(typedJSON: try value.typedJSON(), maximumBytes: .max) == nil, "\(value)")
        }
    }

    @Test("a device reads an answer or event holding a value too deep for JSON readers: that entry unavailable, the rest decoded")
    func overDeepValueOnDevice() throws {
        let hlc = "\"hlc\":\"5\",\"origin\":\"6\""
        let value = { (depth: Int) in String(decoding: Self.nestedJSON(depth), as: UTF8.self) }
        let page = """
            {"entries":[{"key":"a","value":\(value(300)),\(hlc),"rev":1},{"key":"b","value":{"dictionary":{"value":\(value(3))}},\(hlc),"rev":2},\
            {"key":"c","value":\(value(254)),\(hlc),"rev":3},{"key":"d","value":{"string":"]}\\"{["},\(hlc),"rev":4},{"key":"e","value":\(value(150)),\(hlc)}],\
            "has_more":false,"last_rev":4}
            """
        let decoded = try JSONDecoder().decode(ChangesPage.self, from: Data(OverDeepValues.replaced(in: Array(page.utf8))))
        #expect(decoded.entries.map(\.unavailable) == [.tooDeep, nil, .tooDeep, nil, .tooDeep])
        #expect(decoded.entries[1].value == .dictionary(["value": Self.nested(3)]))
        #expect(decoded.entries[3].value == .string("]}\"{["))
        #expect(decoded.entries.map(\.key) == ["a", "b", "c", "d", "e"])
        // A value that is not typed JSON is that entry's alone too.
        let damaged = try JSONDecoder().decode(SyncEntry.self, from: Data("{\"key\":\"x\",\"value\":{\"integer\":\"one\"},\(hlc)}".utf8))
        #expect(damaged.unavailable == .damaged && damaged.value == nil && !damaged.isDeleted)
        let legal = Array("{\"key\":\"x\",\"value\":\(value(PropertyListValue.maximumNestingDepth)),\(hlc)}".utf8)
        #expect(OverDeepValues.replaced(in: legal) == legal)
    }

    @Test("the server's stored-value check refuses what devices refuse: doubles that overflow, lone surrogates, two keys one to Swift")
    func serverAndDevicesAgree() throws {
        let hlc = "\"hlc\":\"5\",\"origin\":\"6\""
        let cases: [(json: String, taken: Bool)] = [
            (#"{"double":1e999}"#, false), (#"{"double":-1e999}"#, false), (#"{"double":1e-999}"#, false),
            (#"{"double":1.7976931348623159e308}"#, false), (#"{"double":0e999}"#, true), (#"{"double":-0.0e-999}"#, true),
            (#"{"double":5e-324}"#, true), (#"{"double":1.7976931348623157e308}"#, true),
            (#"{"string":"\ud800"}"#, false), (#"{"string":"a\udc00"}"#, false), (#"{"string":"\ud800\u0041"}"#, false),
            (#"{"string":"\ud83d\ude00 \u00e9"}"#, true), (#"{"dictionary":{"\udbff":{"bool":true}}}"#, false),
            (#"{"dictionary":{"\u00e9":{"integer":1},"e\u0301":{"integer":2}}}"#, false),
            (#"{"dictionary":{"é":{"integer":1},"é":{"integer":2}}}"#, false),
            (#"{"array":[{"dictionary":{"a":{"integer":1},"a":{"integer":1}}}]}"#, false),
            (#"{"dictionary":{"é":{"integer":1},"e":{"integer":2},"e\u0301x":{"integer":3}}}"#, true),
        ]
        for (json, taken) in cases {
            let served = StoredValueCheck.problem(typedJSON: Array(json.utf8), maximumBytes: .max)
            #expect(served == (taken ? nil : .damaged), "\(json)")
            // A device reads the value in an entry as it comes: taken, or that key unavailable.
            let entry = try JSONDecoder().decode(
                SyncEntry.self,
                from: Data(OverDeepValues.replaced(in: Array("{\"key\":\"x\",\"value\":\(json),\(hlc)}".utf8)))
            )
            #expect((entry.value != nil) == taken && (entry.unavailable == nil) == taken, "\(json)")
        }
    }

    @Test("a value holding two keys one to Swift is found in a page or a push before it is decoded: that entry or op alone")
    func mergedKeysFound() throws {
        let hlc = "\"hlc\":\"5\",\"origin\":\"6\""
        let merged = #"{"dictionary":{"a":{"dictionary":{"caf\u00e9":{"integer":1},"cafe\u0301":{"integer":2}}}}}"#
        let page = """
            {"entries":[{"key":"a","value":{"dictionary":{"é":{"integer":1}}},\(hlc)},{"key":"b","value":\(merged),\(hlc)},\
            {"key":"c","value":{"string":"e\\u0301"},\(hlc)}],"has_more":false,"last_rev":3}
            """
        let found = OverDeepValues.found(in: Array(page.utf8))
        #expect(found.map(\.index) == [1] && found.map(\.reason) == [.damaged])
        let detail = found.first?.detail ?? ""
        #expect(detail.contains("(U+0063 U+0061 U+0066 U+00E9) and") && detail.contains("(U+0063 U+0061 U+0066 U+0065 U+0301)"), "\(detail)")
        let decoded = try JSONDecoder().decode(ChangesPage.self, from: Data(OverDeepValues.replaced(in: Array(page.utf8))))
        #expect(decoded.entries.map(\.unavailable) == [nil, .damaged, nil])
        #expect(decoded.entries[0].value == .dictionary(["é": .integer(1)]) && decoded.entries[2].value == .string("e\u{301}"))
        // In a push, the op's index in `ops`.
        let push =
            #"{"device_id":"1","batch_id":"b","ops":[{"key":"k","value":{"string":"v"},"hlc":"1"},{"key":"m","value":"#
            + merged + #","hlc":"1"}]}"#
        #expect(OverDeepValues.found(in: Array(push.utf8)).map(\.index) == [1])
    }

    @Test("typed JSON of strings, integers and booleans: the very bytes JSONEncoder writes with sorted keys")
    func typedJSONSameBytesAsFoundation() throws {
        var rng = SystemRandomNumberGenerator()
        let sorted = JSONEncoder()
        sorted.outputFormatting = .sortedKeys
        let special: [Unicode.Scalar] = ["\"", "\\", "/", "\u{7F}", "\u{2028}", "\u{2029}", "\u{FEFF}", "é", "😀"]
        for _ in 0..<2_000 {
            let scalars = (0..<Int.random(in: 0...12, using: &rng)).map { _ -> Unicode.Scalar in
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: Unicode.Scalar(UInt8.random(in: 0...0x7F, using: &rng))
                case 1: special.randomElement(using: &rng)!
                default: Unicode.Scalar(UInt32.random(in: 0x80...0xD7FF, using: &rng))!
                }
            }
            let values: [PropertyListValue] = [
                .string(String(String.UnicodeScalarView(scalars))),
                .integer(Int.random(in: .min ... .max, using: &rng)),
                .integer(Int.random(in: -1000...1000, using: &rng)),
                .bool(Bool.random(using: &rng)),
            ]
            for value in values {
                #expect(try value.typedJSON() == Array(try sorted.encode(value)), "\(value)")
            }
        }
        #expect(try PropertyListValue.integer(.min).typedJSON() == Array(try sorted.encode(PropertyListValue.integer(.min))))
    }

    @Test("strings: quotes, backslashes, every control character and non-ASCII text are escaped as JSON needs")
    func escaping() throws {
        let text = "a\"b\\c/é😀" + String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) })
        var json = WireJSON()
        json.string(text)
        #expect(try JSONDecoder().decode(String.self, from: Data(json.bytes)) == text)
        #expect(!json.bytes.contains { $0 < 0x20 }, "no raw control character")
    }

    /// Answers with every kind of entry: values of each type, deletions, sealed entries, revisions
    /// present or not, keys and times with characters JSON escapes.
    static let responses = Generator<PushResponse, Shrink.None<PushResponse>> { rng in
        let keys = ["sound", "a\"b", "back\\slash", "new\nline", "tab\t", "\u{1}", "é", "😀", ""]
        func value() -> PropertyListValue {
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: .string(keys.randomElement(using: &rng)! + String(Int.random(in: 0...99, using: &rng)))
            case 1: .integer(Int.random(in: .min ... .max, using: &rng))
            case 2: .bool(Bool.random(using: &rng))
            case 3: .double([0.1, -2.5, 1e300, -.infinity, .infinity].randomElement(using: &rng)!)  // not NaN: NaN == NaN is false
            case 4: .date(Date(timeIntervalSince1970: Double(Int.random(in: 0...2_000_000_000, using: &rng))))
            case 5: .data(Data((0..<Int.random(in: 0...9, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }))
            case 6: .array([.integer(1), .string("x")])
            default: .dictionary(["k": .bool(true), "é": .integer(-1)])
            }
        }
        let results = (0..<Int.random(in: 0...4, using: &rng)).map { _ in
            let key = keys.randomElement(using: &rng)!
            let hlc = HLC(rawValue: UInt64.random(in: 0 ... .max, using: &rng))
            let origin = UInt64.random(in: 0 ... .max, using: &rng)
            let rev: UInt64? = Bool.random(using: &rng) ? UInt64.random(in: 1 ... .max, using: &rng) : nil
            var winner: SyncEntry =
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: SyncEntry(key: key, value: value(), hlc: hlc, origin: origin, rev: rev)
                case 1: SyncEntry(key: key, value: nil, hlc: hlc, origin: origin, rev: rev)
                default:
                    SyncEntry(
                        keyID: key,
                        sealed: SealedPayload(
                            epoch: UInt32.random(in: 1 ... .max, using: &rng),
                            box: (0..<40).map { _ in UInt8.random(in: 0...255, using: &rng) }
                        ),
                        deleted: Bool.random(using: &rng),
                        hlc: hlc,
                        origin: origin,
                        rev: rev
                    )
                }
            if Bool.random(using: &rng) { winner.account = keys.randomElement(using: &rng)! }  // pushed by a member
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: return PushResult(key: key, status: .applied, winner: winner)
            case 1: return PushResult(key: key, status: .superseded, winner: winner)
            case 2: return PushResult(key: key, status: .refused, winner: winner, error: .clockSkew, detail: "ahead \"\(key)\"")
            default: return PushResult(key: key, status: .refused, winner: nil, error: .valueTooLarge, detail: "too large\n")
            }
        }
        return PushResponse(
            headRev: UInt64.random(in: 0 ... .max, using: &rng),
            results: results,
            serverTime: "2026-11-25T10:00:00.000Z"
        )
    }
}
