import CommandLineSupport
import Foundation
import TestSupport
import Testing

/// Export → import round trips through every format, and Python's `plistlib` (a reader and writer
/// no one here wrote) reading our XML and binary output and writing what `import` reads.
@Suite struct FormatTests {
    /// Writes one value of every type, with the edge cases a format could lose: non-ASCII and XML
    /// specials, an integer beyond 2⁵³, empty containers and strings.
    static func seed(_ sandbox: Sandbox, suite: String = "s") async throws {
        try await sandbox.ok("write", suite, "sound", "ring.caf")
        try await sandbox.ok("write", suite, "text", "-string", "héllo “quoted” <&> \\ 🔔 end")
        try await sandbox.ok("write", suite, "count", "-int", "42")
        try await sandbox.ok("write", suite, "big", "-integer", "-9007199254740993")
        try await sandbox.ok("write", suite, "volume", "-float", "0.8")
        try await sandbox.ok("write", suite, "on", "-bool", "true")
        try await sandbox.ok("write", suite, "off", "-boolean", "no")
        try await sandbox.ok("write", suite, "when", "-date", "2026-11-21 10:00:00 +0000")
        try await sandbox.ok("write", suite, "blob", "-data", "00ff10")
        try await sandbox.ok("write", suite, "list", "--json", #"["a", 2, [true]]"#)
        try await sandbox.ok("write", suite, "nested", "--json", #"{"k": {"deep": 1.5}}"#)
        try await sandbox.ok("write", suite, "empty", "-string", "")
        try await sandbox.ok("write", suite, "nothing", "-array")
        try await sandbox.ok("write", suite, "none", "-dict")
    }

    /// The seed in the design's typed JSON, written out by hand.
    static let expected = """
        {"dictionary": {
          "sound": {"string": "ring.caf"},
          "text": {"string": "héllo “quoted” <&> \\\\ 🔔 end"},
          "count": {"integer": 42},
          "big": {"integer": -9007199254740993},
          "volume": {"double": 0.8},
          "on": {"bool": true},
          "off": {"bool": false},
          "when": {"date": "2026-11-21T10:00:00.000Z"},
          "blob": {"data": "AP8Q"},
          "list": {"array": [{"string": "a"}, {"integer": 2}, {"array": [{"bool": true}]}]},
          "nested": {"dictionary": {"k": {"dictionary": {"deep": {"double": 1.5}}}}},
          "empty": {"string": ""},
          "nothing": {"array": []},
          "none": {"dictionary": {}}
        }}
        """

    /// Loads a property list with plistlib and prints it as the design's typed JSON.
    static let plistlibToTypedJSON = #"""
        import base64, datetime, json, plistlib, sys
        def typed(v):
            if isinstance(v, bool): return {"bool": v}
            if isinstance(v, int): return {"integer": v}
            if isinstance(v, float): return {"double": v}
            if isinstance(v, str): return {"string": v}
            if isinstance(v, bytes): return {"data": base64.b64encode(v).decode("ascii")}
            if isinstance(v, datetime.datetime):
                if v.tzinfo is not None: v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
                return {"date": v.strftime("%Y-%m-%dT%H:%M:%S") + ".%03dZ" % (v.microsecond // 1000)}
            if isinstance(v, list): return {"array": [typed(x) for x in v]}
            if isinstance(v, dict): return {"dictionary": {k: typed(x) for k, x in v.items()}}
            raise TypeError(type(v))
        fmt = {"xml": plistlib.FMT_XML, "binary": plistlib.FMT_BINARY}[sys.argv[2]]
        with open(sys.argv[1], "rb") as f:
            print(json.dumps(typed(plistlib.load(f, fmt=fmt))))
        """#

    @Test(arguments: ["xml", "binary", "json"])
    func roundTripThroughAFile(format: String) async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            #expect(try await sandbox.typedContents("s") == JSONValue.parse(Self.expected))
            let file = sandbox.path("export.\(format)")
            try await sandbox.ok("export", "s", file, "--format", format)
            try await sandbox.ok("write", "t", "stray", "gone after the import")
            try await sandbox.ok("import", "t", file)
            #expect(try await sandbox.typedContents("t") == JSONValue.parse(Self.expected))
        }
    }

    @Test(arguments: ["xml", "binary", "json"])
    func roundTripThroughStdout(format: String) async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            let exported = try await sandbox.run("export", "s", "-", "--format", format)
            #expect(exported.succeeded, "\(exported)")
            try await sandbox.ok("import", "t", "-", stdin: exported.stdoutData)
            #expect(try await sandbox.typedContents("t") == JSONValue.parse(Self.expected))
        }
    }

    /// Binary and typed JSON keep milliseconds; XML's `<date>` holds whole seconds.
    @Test func fractionalDates() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "when", "--json", #"{"date":"2026-11-21T10:00:00.250Z"}"#)
            for (format, date) in [("binary", "2026-11-21T10:00:00.250Z"), ("json", "2026-11-21T10:00:00.250Z"), ("xml", "2026-11-21T10:00:00.000Z")]
            {
                let file = sandbox.path("d.\(format)")
                try await sandbox.ok("export", "s", file, "--format", format)
                try await sandbox.ok("import", "t-\(format)", file)
                #expect(
                    try await sandbox.typedContents("t-\(format)")
                        == .object(["dictionary": .object(["when": .object(["date": .string(date)])])]),
                    "\(format)"
                )
            }
        }
    }

    /// Issue 48, item 10: `write -date` kept milliseconds (`.123456` exported as `.123000`) and
    /// read dates before 1582-10-15 in the Julian calendar (1582-10-14 exported as 1582-10-24,
    /// 0001-01-01 shown as 0000-12-30). Each form `-date` takes, checked by what `read`, typed
    /// JSON, XML and plistlib (reading the binary export) make of it.
    @Test func datesKeepMicrosecondsInTheGregorianCalendar() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "fine", "-date", "2020-11-21T10:00:00.123456Z")
            try await sandbox.ok("write", "s", "reform", "-date", "1582-10-14T00:00:00Z")
            try await sandbox.ok("write", "s", "first", "-date", "0001-01-01")
            try await sandbox.ok("write", "s", "offset", "-date", "2020-11-21 12:00:00.5 +0200")
            try await sandbox.ok("write", "s", "leap", "-date", "1700-02-28 23:59:59")
            #expect(try await sandbox.ok("read", "s", "reform") == "1582-10-14 00:00:00 +0000\n")
            #expect(try await sandbox.ok("read", "s", "first") == "0001-01-01 00:00:00 +0000\n")
            #expect(try await sandbox.ok("read", "--json", "s", "fine") == "\"2020-11-21T10:00:00.123456Z\"\n")
            #expect(
                try await sandbox.typedContents("s")
                    == JSONValue.parse(
                        """
                        {"dictionary": {"fine": {"date": "2020-11-21T10:00:00.123456Z"}, "reform": {"date": "1582-10-14T00:00:00.000Z"},
                        "first": {"date": "0001-01-01T00:00:00.000Z"}, "offset": {"date": "2020-11-21T10:00:00.500Z"},
                        "leap": {"date": "1700-02-28T23:59:59.000Z"}}}
                        """
                    )
            )
            let xml = try await sandbox.ok("export", "s", "-")
            for date in ["2020-11-21T10:00:00Z", "1582-10-14T00:00:00Z", "0001-01-01T00:00:00Z", "1700-02-28T23:59:59Z"] {
                #expect(xml.contains("<date>\(date)</date>"), "\(xml)")
            }
            let binary = sandbox.path("dates.plist")
            try await sandbox.ok("export", "s", binary)
            let seen = try await sandbox.python(
                """
                import plistlib, sys
                with open(sys.argv[1], "rb") as f:
                    for key, value in plistlib.load(f).items(): print(key, value.isoformat())
                """,
                [binary]
            )
            #expect(
                seen == """
                    fine 2020-11-21T10:00:00.123456
                    first 0001-01-01T00:00:00
                    leap 1700-02-28T23:59:59
                    offset 2020-11-21T10:00:00.500000
                    reform 1582-10-14T00:00:00

                    """
            )
        }
    }

    /// A date's text holds years 0000 to 9999: any other is refused in one line, and no suite is made.
    @Test(arguments: ["10000-01-01", "-0001-01-01", "0000-01-01T00:00:00+00:01", "1700-02-29", "2026-11-21T10:00:00.123456"])
    func datesOutsideTheirTextAreRefused(date: String) async throws {
        try await withSandbox { (sandbox) throws in
            expectOneLineFailure(try await sandbox.run("write", "s", "when", "-date", date), mentioning: [date, "0000 to 9999"], date)
            #expect(sandbox.suiteDirectoryListing.isEmpty)
        }
    }

    /// Issue 48, item 9: XML export wrote control characters raw, a file every XML parser but ours
    /// refuses. It is refused, naming the key, the character and the formats that hold it; nothing
    /// is written; binary and typed JSON keep the value.
    @Test func xmlExportRefusesWhatXMLCannotHold() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "sound", "ring.caf")
            try await sandbox.ok("write", "s", "bell", "-string", "ding\u{1}")
            let path = sandbox.path("s.xml")
            expectOneLineFailure(
                try await sandbox.run("export", "s", path, "--format", "xml"),
                mentioning: [#"the value of "bell" holds U+0001"#, "--format binary or --format json"]
            )
            #expect(!FileManager.default.fileExists(atPath: path))
            let toStdout = try await sandbox.run("export", "s", "-")
            expectOneLineFailure(toStdout, mentioning: ["U+0001"])
            #expect(toStdout.stdout.isEmpty)
            for format in ["binary", "json"] {
                let file = sandbox.path("s.\(format)")
                try await sandbox.ok("export", "s", file, "--format", format)
                try await sandbox.ok("import", "t-\(format)", file)
                #expect(try await sandbox.contents("t-\(format)") == sandbox.contents("s"), "\(format)")
            }
            try await sandbox.ok("delete", "s", "bell")
            try await sandbox.ok("write", "s", "key\u{FFFE}", "x")
            expectOneLineFailure(try await sandbox.run("export", "s", "-"), mentioning: [#"the key "key"#, "U+FFFE"])
        }
    }

    /// Old-style text has no numbers, booleans or dates: strings, data, arrays and dictionaries
    /// survive; the rest come back as strings, as with `defaults`.
    @Test func roundTripThroughOpenStep() async throws {
        try await withSandbox { (sandbox) throws in
            try await sandbox.ok("write", "s", "sound", "ring.caf")
            try await sandbox.ok("write", "s", "text", "-string", "héllo \"quoted\" \\ (x) {y}; 🔔")
            try await sandbox.ok("write", "s", "blob", "-data", "00ff1020304050")
            try await sandbox.ok("write", "s", "list", "-array", "a", "b c", "")
            try await sandbox.ok("write", "s", "nested", "--json", #"{"k": {"deep": ["x"]}, "e": {}}"#)
            let file = sandbox.path("s.txt")
            try await sandbox.ok("export", "s", file, "--format", "openStep")
            try await sandbox.ok("import", "t", file)
            #expect(try await sandbox.contents("t") == sandbox.contents("s"))

            try await sandbox.ok("write", "s", "n", "-int", "3")
            try await sandbox.ok("write", "s", "on", "-bool", "yes")
            let exported = try await sandbox.run("export", "s", "-", "--format", "openStep")
            try await sandbox.ok("import", "u", "-", stdin: exported.stdoutData)
            #expect(try await sandbox.ok("read-type", "u", "n") == "Type is string\n")
            #expect(try await sandbox.ok("read", "u", "n") == "3\n")
            #expect(try await sandbox.ok("read", "u", "on") == "1\n")
            #expect(try await sandbox.ok("read", "u", "blob") == "{length = 7, bytes = 0x00ff1020304050}\n")
        }
    }

    /// plistlib loads what `export` writes: to a path binary, to - XML, and each with --format.
    @Test func plistlibReadsOurOutput() async throws {
        try await withSandbox { (sandbox) throws in
            try await Self.seed(sandbox)
            let expected = try JSONValue.parse(Self.expected)

            let binaryPath = sandbox.path("default.plist")
            try await sandbox.ok("export", "s", binaryPath)
            #expect(try JSONValue.parse(await sandbox.python(Self.plistlibToTypedJSON, [binaryPath, "binary"])) == expected)

            let xmlPath = sandbox.path("stdout.plist")
            let xml = try await sandbox.run("export", "s", "-")
            #expect(xml.succeeded, "\(xml)")
            try xml.stdoutData.write(to: URL(fileURLWithPath: xmlPath))
            #expect(try JSONValue.parse(await sandbox.python(Self.plistlibToTypedJSON, [xmlPath, "xml"])) == expected)

            for format in ["xml", "binary"] {
                let path = sandbox.path("explicit.\(format)")
                try await sandbox.ok("export", "s", path, "--format", format)
                #expect(try JSONValue.parse(await sandbox.python(Self.plistlibToTypedJSON, [path, format])) == expected, "\(format)")
            }
        }
    }

    /// `import` reads what plistlib writes, XML and binary, from a path and from stdin.
    @Test(arguments: ["xml", "binary"])
    func importReadsPlistlibOutput(format: String) async throws {
        try await withSandbox { (sandbox) throws in
            let path = sandbox.path("python.plist")
            _ = try await sandbox.python(
                #"""
                import datetime, plistlib, sys
                value = {
                    "sound": "ring.caf", "text": "h\u00e9llo \u201cquoted\u201d <&> \\ \U0001F514 end", "count": 42,
                    "big": -9007199254740993, "volume": 0.8, "on": True, "off": False,
                    "when": datetime.datetime(2026, 11, 21, 10, 0, 0), "blob": bytes([0, 255, 16]),
                    "list": ["a", 2, [True]], "nested": {"k": {"deep": 1.5}}, "empty": "", "nothing": [], "none": {},
                }
                fmt = {"xml": plistlib.FMT_XML, "binary": plistlib.FMT_BINARY}[sys.argv[2]]
                with open(sys.argv[1], "wb") as f:
                    plistlib.dump(value, f, fmt=fmt)
                """#,
                [path, format]
            )
            let expected = try JSONValue.parse(Self.expected)
            try await sandbox.ok("import", "fromfile", path)
            #expect(try await sandbox.typedContents("fromfile") == expected)
            try await sandbox.ok("import", "fromstdin", "-", stdin: try Data(contentsOf: URL(fileURLWithPath: path)))
            #expect(try await sandbox.typedContents("fromstdin") == expected)
            #expect(try await sandbox.ok("read-type", "fromfile", "when") == "Type is date\n")
            #expect(try await sandbox.ok("read", "fromfile", "when") == "2026-11-21 10:00:00 +0000\n")
        }
    }
}
