import Foundation
import GroupDefaultsWire
import PropertyBased
import ServerLaunching
import TestSupport
import Testing

@testable import GroupDefaults
@testable import PropertyListFormats

// MARK: Samples

private let sampleDate = Date(timeIntervalSince1970: 1_795_255_200)  // 2026-11-21T10:00:00Z

/// One value of every case with its edges, and nested shapes.
private let everyCase: [PropertyListValue] = [
    .string(""), .string("ring.caf"), .string("é 日本 🎵 \u{10FFFF}"), .string("e\u{301} vs \u{E9}"),
    .string("quote \" backslash \\ newline \n tab \t cr \r crlf \r\n end"), .string("<&>]]>&amp;"),
    .string("\u{0}\u{1}\u{7}\u{1F}\u{7F}"), .string(String(repeating: "long ", count: 100)),
    .integer(0), .integer(1), .integer(-1), .integer(14), .integer(15), .integer(255), .integer(256), .integer(65535),
    .integer(65536), .integer(Int(Int32.max) + 1), .integer(4_294_967_296), .integer(Int.max), .integer(Int.min),
    .double(0), .double(-0.0), .double(0.8), .double(-1.5), .double(2), .double(.pi), .double(1e300),
    .double(.greatestFiniteMagnitude), .double(.leastNonzeroMagnitude), .double(.infinity), .double(-.infinity), .double(.nan),
    .bool(true), .bool(false),
    .date(sampleDate), .date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSince1970: -1.5)),
    .date(Date(timeIntervalSince1970: 1_795_255_200.123_456)), .date(.distantPast), .date(.distantFuture),
    .data(Data()), .data(Data([0, 1, 2, 0xFF])), .data(Data((0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) })),
    .array([]), .dictionary([:]),
    .array([.integer(1), .string("a"), .bool(false), .array([]), .dictionary([:])]),
    .dictionary(["": .string("empty key"), "é": .integer(2), "list": .array([.double(0.5)]), "B": .bool(true), "a-b": .data(Data([1]))]),
    .array((0..<300).map { .string("item \($0)") }),  // more than 255 objects: two-byte references
    nested(depth: 6),
]

/// Arrays of dictionaries of arrays…, with a leaf of each kind at every level.
private func nested(depth: Int) -> PropertyListValue {
    guard depth > 0 else { return .string("leaf") }
    let inner = nested(depth: depth - 1)
    if depth.isMultiple(of: 2) {
        return .array([inner, .integer(depth), .data(Data([UInt8(depth)])), .date(Date(timeIntervalSince1970: Double(depth)))])
    }
    return .dictionary(["child": inner, "n": .double(Double(depth) / 3), "flag": .bool(depth % 3 == 0), "s\(depth)": .string("x y")])
}

/// What reading `value` back from `format` gives: XML keeps whole seconds (rounded down), typed
/// JSON microseconds; old-style text turns numbers, booleans and dates into their text.
private func expectedAfterRoundTrip(_ value: PropertyListValue, _ format: PropertyListFormat) -> PropertyListValue {
    switch value {
    case .array(let elements): return .array(elements.map { expectedAfterRoundTrip($0, format) })
    case .dictionary(let d): return .dictionary(d.mapValues { expectedAfterRoundTrip($0, format) })
    case .date(let date):
        switch format {
        case .xml: return .date(Date(timeIntervalSinceReferenceDate: date.timeIntervalSinceReferenceDate.rounded(.down)))
        case .json: return .date(nearestMicrosecond(date))
        case .binary: return value
        case .openStep: return .string(value.openStepText)
        }
    case .integer, .double, .bool:
        return format == .openStep ? .string(value.openStepText) : value
    case .string, .data:
        return value
    }
}

/// Equality that also holds NaN equal to NaN and tells 0.0 from -0.0, and compares strings by
/// their scalars (so that a format may not swap canonically equivalent strings).
private func same(_ a: PropertyListValue, _ b: PropertyListValue) -> Bool {
    switch (a, b) {
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern || (x.isNaN && y.isNaN)
    case (.string(let x), .string(let y)): return Array(x.unicodeScalars) == Array(y.unicodeScalars)
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(same)
    case (.dictionary(let x), .dictionary(let y)):
        guard x.count == y.count else { return false }
        let xs = x.sortedForPropertyList
        let ys = y.sortedForPropertyList
        return zip(xs, ys).allSatisfy { same(.string($0.key), .string($1.key)) && same($0.value, $1.value) }
    default: return a == b
    }
}

/// The first character XML 1.0 cannot hold in a string or key of `value`, if any.
private func nonXMLCharacter(_ value: PropertyListValue) -> Unicode.Scalar? {
    func bad(_ string: String) -> Unicode.Scalar? {
        string.unicodeScalars.first { !(0x20...0xFFFD).contains($0.value) && $0.value < 0x10000 && ![0x9, 0xA, 0xD].contains($0.value) }
    }
    switch value {
    case .string(let string): return bad(string)
    case .array(let elements): return elements.lazy.compactMap(nonXMLCharacter).first
    case .dictionary(let dictionary):
        return dictionary.sortedForPropertyList.lazy.compactMap { bad($0.key) ?? nonXMLCharacter($0.value) }.first
    default: return nil
    }
}

private func roundTrip(_ value: PropertyListValue, _ format: PropertyListFormat) throws -> PropertyListValue {
    try PropertyListValue.decode(propertyListData: value.propertyListData(format: format))
}

/// Asserts that `body` throws a `PropertyListFormatError` (and not something else, nor nothing).
private func expectFormatError(
    _ comment: Comment? = nil,
    containing fragment: String? = nil,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> PropertyListValue
) {
    do {
        let value = try body()
        Issue.record("expected a PropertyListFormatError, got \(value) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
    } catch let error as PropertyListFormatError {
        if let fragment {
            #expect(error.description.contains(fragment), "\(error.description) \(comment.map { "(\($0))" } ?? "")", sourceLocation: sourceLocation)
        }
    } catch {
        Issue.record("expected a PropertyListFormatError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
    }
}

private func decodeText(_ text: String) throws -> PropertyListValue {
    try PropertyListValue.decode(propertyListData: Data(text.utf8))
}

// MARK: Python's plistlib, a reader and writer no one here wrote

/// Runs `python3 -c script arguments…` and returns its standard output.
private func python(_ script: String, _ arguments: [String]) async throws -> String {
    let result = try await runProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", script] + arguments)
    guard result.status == 0 else { throw PythonFailed(message: result.stderr) }
    return result.stdout
}

private struct PythonFailed: Error, CustomStringConvertible {
    var message: String
    var description: String { "python3 failed: \(message)" }
}

/// Python helpers: plist values to typed JSON and back (bool before int: a bool is an int there).
private let pythonTypedJSON = """
    import base64, datetime, json, math, plistlib, sys
    def typed(v):
        if isinstance(v, bool): return {"bool": v}
        if isinstance(v, int): return {"integer": v}
        if isinstance(v, float):
            if math.isnan(v): return {"double": "nan"}
            if math.isinf(v): return {"double": "inf" if v > 0 else "-inf"}
            return {"double": v}
        if isinstance(v, str): return {"string": v}
        if isinstance(v, bytes): return {"data": base64.b64encode(v).decode()}
        if isinstance(v, datetime.datetime):
            return {"date": v.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (v.microsecond // 1000)}
        if isinstance(v, list): return {"array": [typed(e) for e in v]}
        if isinstance(v, dict): return {"dictionary": {k: typed(e) for k, e in v.items()}}
        raise TypeError(type(v))
    def native(t):
        (tag, v), = t.items()
        if tag == "double" and isinstance(v, str): return float(v)
        if tag == "double": return float(v)
        if tag == "data": return base64.b64decode(v)
        if tag == "date": return datetime.datetime.strptime(v, "%Y-%m-%dT%H:%M:%S.%fZ")
        if tag == "array": return [native(e) for e in v]
        if tag == "dictionary": return {k: native(e) for k, e in v.items()}
        return v

    """

/// Values plistlib can carry: no control characters but tab and line ends, dates in whole
/// seconds after year 1.
private let plistlibSample: PropertyListValue = [
    "strings": ["", "ring.caf", "é 日本 🎵", "tab\tnew\nline", "<&>\"'", .string(String(repeating: "x", count: 40))],
    "carriage": "a\rb\r\nc",
    "integers": [0, 1, -1, 14, 15, 255, 256, 65535, 65536, .integer(4_294_967_296), .integer(Int.max), .integer(Int.min)],
    "doubles": [0.8, -1.5, 2.0, 1e300, .double(.leastNonzeroMagnitude), .double(.infinity), .double(-.infinity), .double(.nan)],
    "bools": [true, false],
    "dates": [
        .date(sampleDate), .date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSince1970: 0)),
        .date(Date(timeIntervalSince1970: -2_195_000_000)),
    ],
    "data": [.data(Data()), .data(Data([1, 2, 3])), .data(Data((0..<300).map { UInt8(truncatingIfNeeded: $0) }))],
    "empty": [[], [:]],
    "many": .array((0..<300).map { .string("item \($0)") }),
    "nested": nested(depth: 5),
    "ключ": "non-ASCII key",
]

// MARK: Tests

@Suite("PropertyListFormats")
struct PropertyListFormatsTests {
    // MARK: Round trips

    @Test("every case round-trips through each format (dates to the precision it keeps)", arguments: PropertyListFormat.allCases)
    func roundTrips(format: PropertyListFormat) throws {
        for value in everyCase {
            let wrapped: PropertyListValue = format == .openStep ? .array([value]) : value
            if format == .xml, let bad = nonXMLCharacter(value) {
                let code = "U+" + TextScanning.zeroPadded(String(bad.value, radix: 16, uppercase: true), width: 4)
                expectFormatError("\(value)", containing: code) { try roundTrip(value, .xml) }
                continue
            }
            let data = try wrapped.propertyListData(format: format)
            let back = try PropertyListValue.decode(propertyListData: data)
            let expected = expectedAfterRoundTrip(wrapped, format)
            #expect(same(back, expected), "\(format): \(value) came back as \(back)")
        }
    }

    @Test("the whole sample as one dictionary round-trips through each format", arguments: PropertyListFormat.allCases)
    func wholeSampleRoundTrips(format: PropertyListFormat) throws {
        var suite = Dictionary(uniqueKeysWithValues: everyCase.enumerated().map { ("key \($0.offset)", $0.element) })
        if format == .xml {
            // The string of control characters is refused, naming its key; the rest goes through.
            let refused = try #require(suite.first { nonXMLCharacter($0.value) != nil })
            expectFormatError(containing: "the value at [\"\(refused.key)\"] holds U+0000") { try roundTrip(.dictionary(suite), .xml) }
            suite[refused.key] = nil
        }
        #expect(same(try roundTrip(.dictionary(suite), format), expectedAfterRoundTrip(.dictionary(suite), format)))
    }

    @Test("random nested values round-trip through binary, XML and typed JSON")
    func propertyRoundTrips() async {
        await propertyCheck(count: 150, input: PropertyListGenerator.value(maxDepth: 4, jsonSafe: true)) { value throws in
            for format in [PropertyListFormat.binary, .xml, .json] {
                // XML refuses a string or key holding a character it cannot hold (the generator's
                // strings hold control characters and U+FFFE/U+FFFF), and only such a value.
                if format == .xml, nonXMLCharacter(value) != nil {
                    expectFormatError("\(value)", containing: "XML 1.0 cannot hold") { try roundTrip(value, .xml) }
                    continue
                }
                let back = try roundTrip(value, format)
                #expect(same(back, expectedAfterRoundTrip(value, format)), "\(format)")
            }
        }
    }

    @Test("a .bool stays a .bool and .integer(1) an integer, in every format that has both")
    func boolsAreNotIntegers() throws {
        let value: PropertyListValue = [true, false, 1, 0, 1.0, 0.0]
        for format in [PropertyListFormat.binary, .xml, .json] {
            let back = try roundTrip(value, format)
            #expect(back == value, "\(format)")
            #expect(back.arrayValue?.map(\.typeName) == ["boolean", "boolean", "integer", "integer", "float", "float"])
        }
    }

    @Test("binary output is what Apple's format prescribes")
    func binaryLayout() throws {
        let data = [UInt8](try PropertyListValue.dictionary(["a": 1]).propertyListData(format: .binary))
        // magic, dict of 1 (0xD1) with key 1 and value 2, "a" (0x51 'a'), integer 1 (0x10 01),
        // offsets 8, 11, 13, then the trailer: sizes 1 and 1, 3 objects, top 0, table at 15.
        #expect(
            data == Array("bplist00".utf8) + [0xD1, 0x01, 0x02, 0x51, 0x61, 0x10, 0x01, 0x08, 0x0B, 0x0D]
                + [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 3] + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 15]
        )
    }

    @Test("XML output is Apple's layout")
    func xmlLayout() throws {
        let value: PropertyListValue = [
            "sound": "ring.caf", "volume": 0.8, "on": true, "when": .date(sampleDate.addingTimeInterval(0.9)),
            "blob": .data(Data([1, 2, 3])), "list": [1, []], "a&b": "<x>\r",
        ]
        let xml = String(decoding: try value.propertyListData(format: .xml), as: UTF8.self)
        #expect(
            xml == """
                <?xml version="1.0" encoding="UTF-8"?>
                <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
                <plist version="1.0">
                <dict>
                \t<key>a&amp;b</key>
                \t<string>&lt;x&gt;&#13;</string>
                \t<key>blob</key>
                \t<data>
                \tAQID
                \t</data>
                \t<key>list</key>
                \t<array>
                \t\t<integer>1</integer>
                \t\t<array/>
                \t</array>
                \t<key>on</key>
                \t<true/>
                \t<key>sound</key>
                \t<string>ring.caf</string>
                \t<key>volume</key>
                \t<real>0.8</real>
                \t<key>when</key>
                \t<date>2026-11-21T10:00:00Z</date>
                </dict>
                </plist>

                """
        )
    }

    /// Issue 48, item 9: these were written raw, and every XML parser but ours refused the file.
    @Test(
        "XML refuses a string or key holding a character XML 1.0 cannot hold, naming where and which",
        arguments: [0x0, 0x1, 0x8, 0xB, 0xC, 0xE, 0x1B, 0x1F, 0xFFFE, 0xFFFF] as [UInt32]
    )
    func xmlRefusesWhatXMLCannotHold(code: UInt32) throws {
        let character = String(Character(Unicode.Scalar(code)!))
        let name = "U+" + TextScanning.zeroPadded(String(code, radix: 16, uppercase: true), width: 4)
        let cases: [(entries: [(key: String, value: PropertyListValue)], fragment: String)] = [
            ([("sound", .string("ring\(character).caf"))], "the value of \"sound\" holds \(name)"),
            ([("ok", "fine"), ("k\(character)", 1)], "the key \"k\(character)\" holds \(name)"),
            ([("prefs", ["inner": [1, .string(character)]])], "the value of \"prefs\" at [\"inner\"][1] holds \(name)"),
            ([("prefs", ["a": .dictionary([character: true])])], "the key \"\(character)\" in the value of \"prefs\" at [\"a\"] holds \(name)"),
        ]
        for (entries, fragment) in cases {
            do {
                _ = try PropertyListValue.propertyListData(entries: entries, format: .xml)
                Issue.record("\(entries) was written as XML")
            } catch let error as PropertyListFormatError {
                #expect(error.description.contains(fragment), "\(error)")
                #expect(error.formatsThatHoldIt == [.binary, .json])
            }
            // The formats that hold it keep it.
            for format in [PropertyListFormat.binary, .json] {
                let data = try PropertyListValue.propertyListData(entries: entries, format: format)
                guard case .entries(let back) = try PropertyListValue.decodeSuite(propertyListData: data) else {
                    Issue.record("\(format): not a dictionary")
                    continue
                }
                #expect(
                    back.map(\.key.exact) == entries.sortedForPropertyList.map(\.key.exact)
                        && back.map(\.value) == entries.sortedForPropertyList.map(\.value)
                )
            }
        }
        expectFormatError(containing: "the value holds \(name)") { try roundTrip(.string(character), .xml) }
    }

    @Test("XML keeps the characters it can hold, and plistlib (expat) reads them")
    func xmlCharactersItHolds() async throws {
        let value: PropertyListValue = [
            "controls": "tab\t lf\n cr\r del\u{7F} nel\u{85} \u{9F} \u{2028}", "edges": "\u{FFFD}\u{E000}\u{10000}\u{10FFFF}",
            "k\u{7F}\u{FFFD}": "key",
        ]
        #expect(same(try roundTrip(value, .xml), value))
        try await withTemporaryDirectory { directory in
            let file = directory.appendingPathComponent("ours.xml")
            try value.propertyListData(format: .xml).write(to: file)
            let json = try await python(
                pythonTypedJSON + """
                    with open(sys.argv[1], "rb") as f:
                        print(json.dumps(typed(plistlib.load(f))))
                    """,
                [file.path]
            )
            #expect(same(try JSONDecoder().decode(PropertyListValue.self, from: Data(json.utf8)), value))
        }
    }

    @Test("typed JSON output is pretty-printed with sorted keys")
    func typedJSONLayout() throws {
        let json = String(decoding: try PropertyListValue.dictionary(["b": 3, "a": "x/y"]).propertyListData(format: .json), as: UTF8.self)
        #expect(
            json == """
                {
                  "dictionary" : {
                    "a" : {
                      "string" : "x/y"
                    },
                    "b" : {
                      "integer" : 3
                    }
                  }
                }

                """
        )
    }

    // MARK: Old-style text

    @Test("old-style text is exactly what defaults read prints")
    func openStepTextOfSample() {
        let value: PropertyListValue = [
            "": "",
            "badge": 3,
            "big": .data(Data(0..<100)),
            "blob": .data(Data([1, 2, 3])),
            "enabled": true,
            "key with space": "é\n\"q\" \\",
            "list": ["a", "b c", []],
            "muted": false,
            "name": "value with space",
            "nested": ["inner": ["x": 1], "empty": [:]],
            "offset": -1,
            "ratio": 2.0,
            "sound": "ring.caf",
            "volume": 0.8,
            "when": .date(sampleDate.addingTimeInterval(0.75)),
            "FK_Flag": 1,
        ]
        #expect(
            value.openStepText == #"""
                {
                    "" = "";
                    "FK_Flag" = 1;
                    badge = 3;
                    big = {length = 100, bytes = 0x00010203 04050607 08090a0b 0c0d0e0f ... 5c5d5e5f 60616263 };
                    blob = {length = 3, bytes = 0x010203};
                    enabled = 1;
                    "key with space" = "\U00e9\n\"q\" \\";
                    list =     (
                        a,
                        "b c",
                                (
                        )
                    );
                    muted = 0;
                    name = "value with space";
                    nested =     {
                        empty =         {
                        };
                        inner =         {
                            x = 1;
                        };
                    };
                    offset = "-1";
                    ratio = 2;
                    sound = "ring.caf";
                    volume = "0.8";
                    when = "2026-11-21 10:00:00 +0000";
                }
                """#
        )
    }

    @Test("old-style layout of the simple shapes")
    func openStepSimpleShapes() {
        #expect(
            PropertyListValue.dictionary(["key": "value", "key with space": "value with space"]).openStepText
                == "{\n    key = value;\n    \"key with space\" = \"value with space\";\n}"
        )
        #expect(PropertyListValue.array(["a", "b"]).openStepText == "(\n    a,\n    b\n)")
        #expect(PropertyListValue.dictionary([:]).openStepText == "{\n}")
        #expect(PropertyListValue.array([]).openStepText == "(\n)")
        #expect(PropertyListValue.array([["k": "v"]]).openStepText == "(\n        {\n        k = v;\n    }\n)")
        #expect(
            PropertyListValue.data(Data(repeating: 0xAB, count: 24)).openStepText == "{length = 24, bytes = 0x" + String(repeating: "ab", count: 24)
                + "}"
        )
        #expect(PropertyListValue.data(Data()).openStepText == "{length = 0, bytes = 0x}")
        #expect(PropertyListValue.array(["🎵", "tab\t", "\u{1}"]).openStepText == #"(\#n    "\Ud83c\Udfb5",\#n    "tab\t",\#n    "\U0001"\#n)"#)
    }

    @Test("a value that is not a container prints as defaults read SUITE KEY shows it")
    func openStepTopLevelScalars() {
        #expect(PropertyListValue.string("ring.caf").openStepText == "ring.caf")
        #expect(PropertyListValue.string("a b").openStepText == "a b")
        #expect(PropertyListValue.integer(-3).openStepText == "-3")
        #expect(PropertyListValue.double(0.8).openStepText == "0.8")
        #expect(PropertyListValue.double(1).openStepText == "1")
        #expect(PropertyListValue.double(1e300).openStepText == "1e+300")
        #expect(PropertyListValue.bool(true).openStepText == "1")
        #expect(PropertyListValue.bool(false).openStepText == "0")
        #expect(PropertyListValue.date(sampleDate).openStepText == "2026-11-21 10:00:00 +0000")
        #expect(PropertyListValue.data(Data([1, 2, 3])).openStepText == "{length = 3, bytes = 0x010203}")
    }

    @Test("the .openStep format quotes top-level values and writes data so that it reads back")
    func openStepFormat() throws {
        let data = Data((0..<30).map { UInt8($0) })
        let text = String(
            decoding: try PropertyListValue.dictionary(["d": .data(data), "s": "a b"]).propertyListData(format: .openStep),
            as: UTF8.self
        )
        #expect(text == "{\n    d = <00010203 04050607 08090a0b 0c0d0e0f 10111213 14151617 18191a1b 1c1d>;\n    s = \"a b\";\n}\n")
        #expect(try roundTrip(.string("a b"), .openStep) == .string("a b"))
        #expect(try roundTrip(.data(data), .openStep) == .data(data))
    }

    @Test("old-style text parses: bare and quoted strings, escapes, data, comments, nesting")
    func openStepParsing() throws {
        let text = #"""
            // A comment
            {
                bare = com.example/path_$:-1.5;   /* a block
                   comment */
                "quoted key" = "line\nnext \"q\" \\ \t \U00e9\Ud83c\Udfb5 \101 \é";
                'single' = 'it''s';
                list = ( 1, "two", <0102 0a>, (), {}, );
                nested = { k = v };
                description = {length = 3, bytes = 0x010203};
                empty = <>;
                "" = "";
            }
            """#
        // 'it''s' is two strings in a row, which is an error; fix that line first.
        expectFormatError(containing: "line 6") { try decodeText(text) }
        let fixed = text.replacingOccurrences(of: "'it''s'", with: #"'it\'s'"#)
        let value = try decodeText(fixed)
        #expect(
            value == [
                "bare": "com.example/path_$:-1.5",
                "quoted key": "line\nnext \"q\" \\ \t é🎵 A é",
                "single": "it's",
                "list": ["1", "two", .data(Data([1, 2, 10])), [], [:]],
                "nested": ["k": "v"],
                "description": .data(Data([1, 2, 3])),
                "empty": .data(Data()),
                "": "",
            ]
        )
        // A top-level dictionary without braces, as in a .strings file; a lone string.
        #expect(try decodeText("a = b; c = (d);") == ["a": "b", "c": ["d"]])
        #expect(try decodeText("a = b") == ["a": "b"])
        #expect(try decodeText("  hello ") == "hello")
        #expect(try decodeText("\u{FEFF}{a = b;}") == ["a": "b"])
    }

    @Test("what defaults read prints reads back (data up to 24 bytes)")
    func openStepTextReadsBack() throws {
        let value: PropertyListValue = [
            "s": "a \"b\"\n\\ é🎵", "n": 3, "f": 0.5, "t": true, "d": .data(Data([1, 2, 3])),
            "when": .date(sampleDate), "list": [["x": []]], "e": [:],
        ]
        let back = try decodeText(value.openStepText)
        #expect(back == expectedAfterRoundTrip(value, .openStep))
        expectFormatError(containing: "abbreviated") { try decodeText(PropertyListValue.array([.data(Data(count: 25))]).openStepText) }
    }

    @Test(
        "old-style mistakes are reported with their line and column",
        arguments: [
            ("{ a = b", "unterminated dictionary", "line 1, column 1"),
            ("{ a = ; }", "expected a value, found ';'", "line 1, column 7"),
            ("{\n  a b }", "expected '=' after the key \"a\"", "line 2, column 5"),
            ("{ a = b c }", "expected ';'", "line 1, column 9"),
            ("( a, b", "unterminated array", "line 1, column 1"),
            ("( a b )", "expected ',' or ')'", "line 1, column 5"),
            ("( , )", "expected a value", "line 1, column 3"),
            ("\"unterminated", "unterminated string", "line 1, column 1"),
            ("<01 0>", "odd number of hex digits", "line 1, column 1"),
            ("<0g>", "hex digit", "line 1, column 3"),
            ("/* never closed", "unterminated /* comment", "line 1, column 1"),
            ("a b", "unexpected 'b' after the value", "line 1, column 3"),
            (")", "expected a value, found ')'", "line 1, column 1"),
            ("{ a = b; a = c; }", "duplicate key \"a\"", "line 1, column 10"),
            ("{ é = b; }", "expected a key", "line 1, column 3"),
            ("\"\\Ud83c\"", "unpaired surrogate", "line 1, column 2"),
            ("{length = 4, bytes = 0x010203}", "says length 4 but holds 3 bytes", "line 1, column 1"),
            ("   \n  ", "holds no value", "line 2, column 3"),
        ]
    )
    func openStepErrors(text: String, fragment: String, location: String) {
        expectFormatError(containing: fragment) { try decodeText(text) }
        expectFormatError(containing: location) { try decodeText(text) }
        expectFormatError(containing: "old-style property list") { try decodeText(text) }
    }

    // MARK: JSON

    @Test("plain JSON for people and scripts")
    func plainJSONText() {
        let value: PropertyListValue = [
            "b": 3, "a": [0.8, 2.0, true, "x\"\n/é"], "when": .date(sampleDate), "blob": .data(Data([1, 2, 3])),
            "empty": [], "none": [:], "odd": [.double(.nan), .double(-.infinity)], "ctl": "\u{1}",
        ]
        #expect(
            value.plainJSON() == #"""
                {
                  "a" : [
                    0.8,
                    2.0,
                    true,
                    "x\"\n/é"
                  ],
                  "b" : 3,
                  "blob" : "AQID",
                  "ctl" : "\u0001",
                  "empty" : [],
                  "none" : {},
                  "odd" : [
                    "nan",
                    "-inf"
                  ],
                  "when" : "2026-11-21T10:00:00.000Z"
                }
                """#
        )
        // And it is JSON.
        #expect((try? JSONSerialization.jsonObject(with: Data(value.plainJSON().utf8))) != nil)
        #expect(PropertyListValue.string("x").plainJSON() == "\"x\"")
    }

    @Test("parseJSON: plain JSON, integers stay integers, typed JSON is recognised")
    func parseJSON() throws {
        #expect(
            try PropertyListValue.parseJSON(#" {"volume": 0.8, "badge": 3, "on": true, "list": [1, "a", -0, 1e3, 2.50], "o": {"x": {}}} "#)
                == ["volume": 0.8, "badge": 3, "on": true, "list": [1, "a", 0, 1000.0, 2.5], "o": ["x": [:]]]
        )
        #expect(try PropertyListValue.parseJSON("3") == .integer(3))
        #expect(try PropertyListValue.parseJSON("3.0") == .double(3))
        #expect(try PropertyListValue.parseJSON("-9223372036854775808") == .integer(Int.min))
        #expect(try PropertyListValue.parseJSON(#""\u00e9\ud83c\udfb5\n""#) == .string("é🎵\n"))
        #expect(try PropertyListValue.parseJSON(#"{"date": "2026-11-21T10:00:00.000Z"}"#) == .date(sampleDate))
        #expect(try PropertyListValue.parseJSON(#"{"array": [{"integer": 1}, {"double": "nan"}]}"#).arrayValue?.count == 2)
        #expect(try PropertyListValue.parseJSON(#"{"string": "a", "b": 1}"#) == ["string": "a", "b": 1])  // two keys: plain
        #expect(try PropertyListValue.parseJSON(#"{"sound": "ring.caf"}"#) == ["sound": "ring.caf"])  // not a tag: plain
        for value in everyCase where value.dateValue.map({ TypedJSONDate.valueText($0) != nil }) ?? true {
            let typed = String(decoding: try value.propertyListData(format: .json), as: UTF8.self)
            #expect(same(try PropertyListValue.parseJSON(typed), expectedAfterRoundTrip(value, .json)))
        }
    }

    @Test(
        "JSON mistakes are reported with their line and column",
        arguments: [
            (#"{"a": }"#, "expected a value, found '}'", "line 1, column 7"),
            ("[1, 2", "unterminated array", "line 1, column 1"),
            (#"{"a" 1}"#, "expected ':'", "line 1, column 6"),
            ("{a: 1}", "expected a key in double quotes", "line 1, column 2"),
            ("nul", "expected a value", "line 1, column 1"),
            ("[\n  null]", "null is not a property-list value", "line 2, column 3"),
            ("99999999999999999999", "does not fit in 64 bits", "line 1, column 1"),
            ("1e999", "out of the range of a double", "line 1, column 1"),
            ("01", "leading zeros", "line 1, column 1"),
            ("1.", "digits must follow", "line 1, column 1"),
            (#""\ud800""#, "unpaired surrogate", "line 1, column 2"),
            (#""\x""#, "unknown escape", "line 1, column 2"),
            ("\"a\nb\"", "control character", "line 1, column 3"),
            (#"{"a": 1, "a": 2}"#, "duplicate key \"a\"", "line 1, column 10"),
            ("[1] [2]", "after the JSON value", "line 1, column 5"),
            ("", "expected a value, found the end of the text", "line 1, column 1"),
        ]
    )
    func jsonErrors(text: String, fragment: String, location: String) {
        expectFormatError(containing: fragment) { try PropertyListValue.parseJSON(text) }
        expectFormatError(containing: location) { try PropertyListValue.parseJSON(text) }
    }

    @Test("typed JSON of the wrong shape names the path")
    func typedJSONErrors() {
        expectFormatError(containing: "$.integer") { try PropertyListValue.parseJSON(#"{"integer": "x"}"#) }
        expectFormatError(containing: "$.dictionary.sound.date") {
            try PropertyListValue.parseJSON(#"{"dictionary": {"sound": {"date": "tomorrow"}}}"#)
        }
        expectFormatError(containing: "typed JSON") { try decodeText(#"{"data": "not base64!"}"#) }
        expectFormatError(containing: "exactly one") { try decodeText(#"{"string": "a", "integer": 1}"#) }
        expectFormatError(containing: "typed JSON: ") {
            _ = try PropertyListValue.date(Date(timeIntervalSince1970: 1e15)).propertyListData(format: .json)
            return .bool(true)
        }
    }

    // MARK: Detection and bad input

    @Test("decode detects each format")
    func detection() throws {
        let value: PropertyListValue = ["a": ["b"]]
        #expect(try decodeText(#"{"dictionary": {"a": {"array": [{"string": "b"}]}}}"#) == value)
        #expect(try decodeText("  \n{ \"dictionary\" : {\"a\": {\"array\": [{\"string\": \"b\"}]}}}") == value)
        #expect(try decodeText("<plist version=\"1.0\"><dict><key>a</key><array><string>b</string></array></dict></plist>") == value)
        #expect(
            try decodeText(
                "\n<?xml version=\"1.0\"?>\n<!-- hi --><!DOCTYPE plist [ <!ENTITY x \"y\"> ]><plist><dict><key>a</key><array><string>b</string></array></dict></plist>\n"
            ) == value
        )
        #expect(try decodeText("{ a = (b); }") == value)
        // UTF-16 with a byte-order mark, both byte orders.
        let text = "{ a = (b); }"
        let bigEndian: [UInt8] = [0xFE, 0xFF] + text.utf16.flatMap { unit -> [UInt8] in [UInt8(unit >> 8), UInt8(unit & 0xFF)] }
        let littleEndian: [UInt8] = [0xFF, 0xFE] + text.utf16.flatMap { unit -> [UInt8] in [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        #expect(try PropertyListValue.decode(propertyListData: Data(bigEndian)) == value)
        #expect(try PropertyListValue.decode(propertyListData: Data(littleEndian)) == value)
    }

    @Test("empty data, unknown binary versions and non-text bytes are refused")
    func undetectable() {
        expectFormatError(containing: "empty") { try PropertyListValue.decode(propertyListData: Data()) }
        expectFormatError(containing: "bplist15") { try PropertyListValue.decode(propertyListData: Data("bplist15xxxxxxxxxxxxxxx".utf8)) }
        expectFormatError(containing: "neither") { try PropertyListValue.decode(propertyListData: Data([0xC3, 0x28, 0xFF])) }
        expectFormatError { try PropertyListValue.decode(propertyListData: Data([0x00, 0x01, 0x02])) }
    }

    @Test(
        "XML mistakes are reported with their line",
        arguments: [
            ("<?xml version=\"1.0\"?>", "expected <plist> or a value"),
            ("<plist version=\"1.0\"><dict><key>a</key></dict></plist>", "the key \"a\" has no value"),
            ("<plist version=\"1.0\"><dict><string>a</string></dict></plist>", "expected <key> in <dict>"),
            ("<plist version=\"1.0\"><string>x</integer></plist>", "</integer> does not close the <string>"),
            ("<plist version=\"1.0\">\n<foo/></plist>", "unknown element <foo> at line 2"),
            ("<plist version=\"1.0\"><data>AQ!D</data></plist>", "valid base64"),
            ("<plist version=\"1.0\"><data>A</data></plist>", "valid base64"),
            ("<plist version=\"1.0\"><integer>12abc</integer></plist>", "not an integer"),
            ("<plist version=\"1.0\"><integer>18446744073709551615</integer></plist>", "fits in 64 bits"),
            ("<plist version=\"1.0\"><real>1.5x</real></plist>", "not a number"),
            ("<plist version=\"1.0\"><date>tomorrow</date></plist>", "not a date"),
            ("<plist version=\"1.0\"><true>x</true></plist>", "must be empty"),
            ("<plist version=\"1.0\"><string>&bogus;</string></plist>", "unknown entity"),
            ("<plist version=\"1.0\"><string>a<b/></string></plist>", "unexpected markup"),
            ("<plist version=\"1.0\"><string>a</string></plist>junk", "after the property list"),
            ("<plist version=\"1.0\"><string>a</string><string>b</string></plist>", "expected </plist>"),
            ("<plist version=\"1.0\"></plist>", "holds no value"),
            ("<plist version=\"1.0\"><array><string>a</string>", "expected a value or </array>"),
            ("<plist version=\"1.0\"><dict><key>a</key><true/><key>a</key><false/></dict></plist>", "duplicate key"),
            ("<plist version=\"1.0\"><key>a</key></plist>", "<key> outside a <dict>"),
            ("<plist version=\"1.0\"><string>abc", "unterminated <string>"),
            ("<plist version=\"1.0\"><!-- open", "unterminated comment"),
            ("<plist version=1.0>", "must be quoted"),
        ]
    )
    func xmlErrors(text: String, fragment: String) {
        expectFormatError(containing: fragment) { try decodeText(text) }
        expectFormatError(containing: "XML property list:") { try decodeText(text) }
        expectFormatError(containing: "line ") { try decodeText(text) }
    }

    @Test("XML reads what other writers write: entities, CDATA, hex integers, unpadded base64, CRLF")
    func xmlReaderLeniency() throws {
        let xml =
            "<?xml version='1.0' encoding='UTF-8'?>\r\n<plist version='1.0'><array>"
            + "<string>&lt;&#233;&#x1F3B5;&quot;&apos;<![CDATA[<raw> & ]]>x\r\ny</string><string/><integer> 0x1F </integer>"
            + "<integer>-9223372036854775808</integer><real>+infinity</real><real> -1.5e3 </real><data>AQI</data>"
            + "<date>2026-11-21T10:00:00Z</date><dict/><true></true></array></plist>"
        #expect(
            try decodeText(xml) == [
                "<é🎵\"'<raw> & x\ny", "", 31, .integer(Int.min), .double(.infinity), -1500.0, .data(Data([1, 2])), .date(sampleDate), [:], true,
            ]
        )
    }

    @Test("damaged binary property lists are refused, never a crash")
    func binaryErrors() throws {
        let magic = Array("bplist00".utf8)
        func trailer(offsetSize: UInt8 = 1, referenceSize: UInt8 = 1, count: UInt64, top: UInt64 = 0, table: UInt64) -> [UInt8] {
            [0, 0, 0, 0, 0, 0, offsetSize, referenceSize]
                + [count, top, table].flatMap { v in (0..<8).reversed().map { UInt8(truncatingIfNeeded: v >> ($0 * 8)) } }
        }
        func decode(_ bytes: [UInt8]) throws -> PropertyListValue { try PropertyListValue.decode(propertyListData: Data(bytes)) }

        expectFormatError(containing: "too few") { try decode(magic) }
        // An array that holds itself.
        expectFormatError(containing: "contains itself") { try decode(magic + [0xA1, 0x00] + [8] + trailer(count: 1, table: 10)) }
        // A dictionary keyed by an integer.
        expectFormatError(containing: "not a string") {
            try decode(magic + [0xD1, 0x01, 0x01, 0x10, 0x05] + [8, 11] + trailer(count: 2, table: 13))
        }
        // A reference to an object that does not exist.
        expectFormatError(containing: "reference to object 7") { try decode(magic + [0xA1, 0x07] + [8] + trailer(count: 1, table: 10)) }
        // An offset past the objects, a count past the end, bad sizes, a top object out of range.
        expectFormatError(containing: "offset outside") { try decode(magic + [0x09] + [200] + trailer(count: 1, table: 9)) }
        expectFormatError(containing: "runs past") { try decode(magic + [0x5E, 0x61] + [8] + trailer(count: 1, table: 10)) }
        expectFormatError(containing: "bad trailer") { try decode(magic + [0x09] + [8] + trailer(offsetSize: 0, count: 1, table: 9)) }
        expectFormatError(containing: "bad trailer") { try decode(magic + [0x09] + [8] + trailer(count: 1, top: 1, table: 9)) }
        expectFormatError(containing: "bad trailer") { try decode(magic + [0x09] + [8] + trailer(count: 1 << 60, table: 9)) }
        // Types that are not property-list values, and unknown markers.
        expectFormatError(containing: "null") { try decode(magic + [0x00] + [8] + trailer(count: 1, table: 9)) }
        expectFormatError(containing: "UID") { try decode(magic + [0x80, 0x01] + [8] + trailer(count: 1, table: 10)) }
        expectFormatError(containing: "set") { try decode(magic + [0xC0] + [8] + trailer(count: 1, table: 9)) }
        expectFormatError(containing: "unknown marker") { try decode(magic + [0xF0] + [8] + trailer(count: 1, table: 9)) }
        // A 16-byte integer beyond Int64 (how Apple writes UInt64.max), a bad ASCII string, a lone surrogate.
        expectFormatError(containing: "64-bit") {
            try decode(magic + [0x14] + [UInt8](repeating: 0, count: 8) + [UInt8](repeating: 0xFF, count: 8) + [8] + trailer(count: 1, table: 25))
        }
        expectFormatError(containing: "ASCII") { try decode(magic + [0x51, 0xE9] + [8] + trailer(count: 1, table: 10)) }
        expectFormatError(containing: "surrogate") { try decode(magic + [0x61, 0xD8, 0x00] + [8] + trailer(count: 1, table: 11)) }
    }

    @Test("binary nesting deeper than a suite allows, and shared objects that expand without bound, are refused")
    func binaryBombs() throws {
        let magic = Array("bplist00".utf8)
        func file(objects: [[UInt8]]) -> [UInt8] {
            var out = magic
            var offsets: [Int] = []
            for object in objects {
                offsets.append(out.count)
                out += object
            }
            let table = out.count
            for offset in offsets {
                out += [UInt8(offset >> 24 & 0xFF), UInt8(offset >> 16 & 0xFF), UInt8(offset >> 8 & 0xFF), UInt8(offset & 0xFF)]
            }
            out += [0, 0, 0, 0, 0, 0, 4, 4]
            for v in [UInt64(objects.count), 0, UInt64(table)] { out += (0..<8).reversed().map { UInt8(truncatingIfNeeded: v >> ($0 * 8)) } }
            return out
        }
        func reference(_ index: Int) -> [UInt8] {
            [UInt8(index >> 24 & 0xFF), UInt8(index >> 16 & 0xFF), UInt8(index >> 8 & 0xFF), UInt8(index & 0xFF)]
        }
        // 100,000 arrays each holding the next: far deeper than any stack allows.
        let chain = (0..<100_000).map { $0 == 99_999 ? [0x09] : [0xA1] + reference($0 + 1) }
        expectFormatError(containing: "deeper than 512") { try PropertyListValue.decode(propertyListData: Data(file(objects: chain))) }
        // 511 levels are fine (the limit counts the innermost value too).
        let fine = (0..<512).map { $0 == 511 ? [0x09] : [0xA1] + reference($0 + 1) }
        #expect(PropertyListValue.fitsDecodingDepth(try PropertyListValue.decode(propertyListData: Data(file(objects: fine)))))
        // 64 arrays each holding the next one twice: 2^64 values from a few hundred bytes.
        let doubling = (0..<65).map { $0 == 64 ? [0x09] : [0xA2] + reference($0 + 1) + reference($0 + 1) }
        expectFormatError(containing: "expand") { try PropertyListValue.decode(propertyListData: Data(file(objects: doubling))) }
        // A shared object read first near the top, then reached again through a chain deep enough
        // to put its innermost value past the limit.
        var late: [[UInt8]] = [[0xA2] + reference(300) + reference(1)]
        for k in 1..<512 { late.append([0xA1] + reference(k + 1)) }
        late.append([0xA0])
        expectFormatError(containing: "deeper than 512") { try PropertyListValue.decode(propertyListData: Data(file(objects: late))) }
    }

    @Test("deep nesting in text formats is refused, never a crash")
    func textBombs() async {
        let depth = 100_000
        expectFormatError(containing: "deeper than 512") { try decodeText(String(repeating: "(", count: depth)) }
        expectFormatError(containing: "deeper than 512") { try PropertyListValue.parseJSON(String(repeating: "[", count: depth)) }
        expectFormatError(containing: "deeper than 512") {
            try decodeText("<plist>" + String(repeating: "<array>", count: depth) + String(repeating: "</array>", count: depth) + "</plist>")
        }
        expectFormatError(containing: "deeper than 512") { try decodeText(#"{"array":"# + String(repeating: "[", count: depth)) }
    }

    @Test("every truncation of every format is refused or read, never a crash", arguments: PropertyListFormat.allCases)
    func truncations(format: PropertyListFormat) throws {
        let data = [UInt8](try nested(depth: 4).propertyListData(format: format))
        for length in 0..<data.count {
            do {
                _ = try PropertyListValue.decode(propertyListData: Data(data.prefix(length)))
            } catch is PropertyListFormatError {
            } catch {
                Issue.record("length \(length): \(type(of: error)) \(error)")
            }
        }
        // Every shorter prefix must be refused, except: any prefix of old-style text may be a whole
        // value ("a" is one), so may "b"…"bplis" (bare old-style strings), and dropping only
        // trailing white space leaves a whole value.
        if format != .openStep {
            for length in (format == .binary ? 6 : 0)..<data.count where !data[length...].allSatisfy(TextScanning.isWhitespace) {
                expectFormatError("\(format) length \(length)") { try PropertyListValue.decode(propertyListData: Data(data.prefix(length))) }
            }
        }
    }

    @Test("random damage to every format is refused or read, never a crash", arguments: PropertyListFormat.allCases)
    func fuzz(format: PropertyListFormat) throws {
        let original = [UInt8](try nested(depth: 4).propertyListData(format: format))
        var rng = SeededGenerator(seed: 0x5EED + UInt64(PropertyListFormat.allCases.firstIndex(of: format)!))
        for round in 0..<3000 {
            var bytes = original
            for _ in 0...Int.random(in: 0...3, using: &rng) {
                switch Int.random(in: 0..<4, using: &rng) {
                case 0: bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 1: bytes.removeSubrange(Int.random(in: 0..<bytes.count, using: &rng)...)
                case 2: bytes.remove(at: Int.random(in: 0..<bytes.count, using: &rng))
                default: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...bytes.count, using: &rng))
                }
                if bytes.isEmpty { bytes = [0] }
            }
            do {
                _ = try PropertyListValue.decode(propertyListData: Data(bytes))
            } catch is PropertyListFormatError {
            } catch {
                Issue.record("round \(round): \(type(of: error)) \(error)")
            }
        }
    }

    // MARK: Python's plistlib

    @Test("plistlib reads our XML and binary and finds the same values")
    func plistlibReadsOurs() async throws {
        try await withTemporaryDirectory { directory in
            for format in [PropertyListFormat.xml, .binary] {
                let file = directory.appendingPathComponent("ours.\(format.rawValue).plist")
                try plistlibSample.propertyListData(format: format).write(to: file)
                let json = try await python(
                    pythonTypedJSON + """
                        with open(sys.argv[1], "rb") as f:
                            value = plistlib.load(f)
                        print(json.dumps(typed(value)))
                        """,
                    [file.path]
                )
                let seen = try JSONDecoder().decode(PropertyListValue.self, from: Data(json.utf8))
                #expect(same(seen, expectedAfterRoundTrip(plistlibSample, format)), "\(format): plistlib saw \(seen)")
            }
        }
    }

    @Test("we read what plistlib writes, XML and binary")
    func oursReadPlistlib() async throws {
        try await withTemporaryDirectory { directory in
            let input = directory.appendingPathComponent("input.json")
            try plistlibSample.propertyListData(format: .json).write(to: input)
            let xml = directory.appendingPathComponent("theirs.xml")
            let binary = directory.appendingPathComponent("theirs.bplist")
            _ = try await python(
                pythonTypedJSON + """
                    with open(sys.argv[1]) as f:
                        value = native(json.load(f))
                    with open(sys.argv[2], "wb") as f:
                        plistlib.dump(value, f, fmt=plistlib.FMT_XML)
                    with open(sys.argv[3], "wb") as f:
                        plistlib.dump(value, f, fmt=plistlib.FMT_BINARY)
                    """,
                [input.path, xml.path, binary.path]
            )
            let fromBinary = try PropertyListValue.decode(propertyListData: Data(contentsOf: binary))
            #expect(same(fromBinary, plistlibSample), "binary: \(fromBinary)")
            // plistlib writes a carriage return as a line feed (XML would read it so anyway).
            var expectedXML = plistlibSample.dictionaryValue!
            expectedXML["carriage"] = "a\nb\nc"
            let fromXML = try PropertyListValue.decode(propertyListData: Data(contentsOf: xml))
            #expect(same(fromXML, .dictionary(expectedXML)), "XML: \(fromXML)")
        }
    }
}
