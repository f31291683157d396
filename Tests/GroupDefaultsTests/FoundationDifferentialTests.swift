import Foundation
import GroupDefaults
import TestSupport
import Testing

/// SharedDefaults' typed getters measured against Foundation's own `UserDefaults`, value by value:
/// the same values, edge cases and a seeded stream of generated ones, set on both, and every
/// scalar getter compared. Foundation's side keeps each value in its registration domain
/// (`register(defaults:)`), in memory, so that nothing is written under `HOME`; its getters read
/// it through the same coercions as a stored one.
///
/// Left out, each a row of the table of docs/guide/differences-from-userdefaults.md: `Int.max` (Foundation
/// on Linux reads it as 0), and, one floating-point type, `double(forKey:)` of a `Float` (a Float is
/// kept as the double of the decimal it prints as, `12.34`), and `integer` and `string` of a Float
/// of 2^24 or more (where Float and Double print differently).
///
/// `GROUPDEFAULTS_DIFF_SEED` and `GROUPDEFAULTS_DIFF_COUNT` run other seeds and longer streams.
// Serialized: Foundation's registration domain is one per process, shared by every instance.
@Suite("Exactly UserDefaults: typed getters against Foundation", .serialized)
struct FoundationDifferentialTests {
    static let environment = ProcessInfo.processInfo.environment
    static let seed = environment["GROUPDEFAULTS_DIFF_SEED"].flatMap(UInt64.init) ?? 20_261_126
    static let count = environment["GROUPDEFAULTS_DIFF_COUNT"].flatMap(Int.init) ?? 3000

    /// Values that have told the two apart, or could: number-like strings of every shape, blanks of
    /// every kind, the edges of Int and Double, Floats.
    static var edges: [Any] {
        [
            "Y", "YES", "yes", "true", "T", "t", "N", "no", "F", ".5", "12abc", "1,5", "1e3", "0X1F", "0x1f", "\u{200B}12", "12\n",
            " 12", " +12", "-12", "nan", "NaN", "inf", "-inf", "infinity", "", "  ", "abc", "1.5e2x", "9223372036854775808",
            "-9223372036854775809", "99999999999999999999", "1.9", "-1.9", "0", "00", "007", "+", "-", "1e400", "0.0000001", "\t7",
            "\n7", "\r7", "\u{0B}7", "\u{0C}7", "\u{85}7", "\u{A0}7", "\u{2028}7", "\u{FEFF}7", "\u{3000}7", "\u{2003}7", "1_000",
            "٣", "１２", "1.", "1.e2", "-.5", "+.5e-1", "e5", ".", "5e", "5e+", "1e-400", "-0", "+-1", "--1", "  -  1", "0y", "0t",
            "-y", "+t", "-0y", "00t", "1 2", "12 ", "0.", "0.5",
            42.0, 12.34, -0.0, Double.nan, Double.infinity, -Double.infinity, 1e300, 1e-300, 0.1, 1.5, -1.5, 1e15, 1e16,
            1.2345678901234568e17, 2.5, 0x1p63, -0x1p63, 0.5,
            Float(12.34), Float(0.1), Float(42), Float.nan, Float(1e30), Float(-2.5),
            0, 1, -1, 42, Int.min, 2, true, false,
        ]
    }

    @Test("every scalar getter answers as Foundation's UserDefaults does, for the edge cases and a seeded stream of values")
    func scalarGetters() throws {
        let foundation = try #require(UserDefaults(suiteName: "groupdefaults.differential"))
        try withTemporaryDirectory { directory in
            let defaults = try SharedDefaults(suiteName: "differential", directory: directory)
            var generator = ValueGenerator(seed: Self.seed)
            var differences: [String] = []
            for value in Self.edges + (0..<Self.count).map({ _ in generator.next() }) {
                foundation.register(defaults: ["k": value])
                defaults.set(value, forKey: "k")
                let ours = Answers(defaults)
                let theirs = Answers(foundation)
                for difference in ours.differences(from: theirs, float: value as? Float) {
                    differences.append("\(String(reflecting: value)) (\(type(of: value))): \(difference)")
                }
            }
            #expect(differences.isEmpty, "seed \(Self.seed): \(differences.count) differences\n\(differences.prefix(40).joined(separator: "\n"))")
        }
    }

    @Test(
        "a seeded sequence of sets (every overload, containers, NS bridges), removals and registrations: every getter of every key, after every step, as Foundation's"
    )
    func operationSequences() async throws {
        try await withTemporaryDirectory { directory in
            // Foundation reads HOME and XDG_CONFIG_HOME at start-up: its files go to a private
            // home only in a process started with it.
            let environment = Self.helperEnvironment(directory)
            let count = Self.environment["GROUPDEFAULTS_DIFF_COUNT"].flatMap(Int.init) ?? 2000
            let helper = try HelperProcess(
                "differential",
                directory: directory,
                suite: "unused",
                [String(Self.seed), String(count)],
                environment: environment
            )
            let result = await helper.finish()
            #expect(result.status == 0 && result.stdout.hasSuffix("done \(count)"), "seed \(Self.seed): \(result.stderr)")
            let differences = result.stdout.split(separator: "\n").filter { $0.hasPrefix("difference") }
            #expect(differences.isEmpty, "seed \(Self.seed):\n\(differences.joined(separator: "\n"))")
        }
    }

    /// The `-key value` pairs the search-list helper is started with: a string, property-list text
    /// of three kinds, text that does not parse (a string), and a number (a string to both).
    static let searchArguments = [
        "-sound", "arg.caf", "-k", "{ a = 1; b = (x, y); }", "-a.b.c", "<plist version=\"1.0\"><integer>3</integer></plist>",
        "-ключ", "{x", "-🙂 emoji", "42", "- ", "(1, <0a0b>)",
    ]

    @Test(
        "the search list: arguments, added suites, the global domain, volatile and persistent domains, every getter after every step as Foundation's"
    )
    func searchListSequences() async throws {
        try await withTemporaryDirectory { directory in
            let environment = Self.helperEnvironment(directory)
            let count = Self.environment["GROUPDEFAULTS_DIFF_COUNT"].flatMap(Int.init) ?? 1500
            let helper = try HelperProcess(
                "differential-search",
                directory: directory,
                suite: "unused",
                [String(Self.seed), String(count)] + Self.searchArguments,
                environment: environment
            )
            let result = await helper.finish()
            #expect(result.status == 0 && result.stdout.hasSuffix("done \(count)"), "seed \(Self.seed): \(result.stderr)")
            let differences = result.stdout.split(separator: "\n").filter { $0.hasPrefix("difference") }
            #expect(differences.isEmpty, "seed \(Self.seed):\n\(differences.joined(separator: "\n"))")
        }
    }

    @Test("each row of the differences table (docs/guide) holds, on both sides, as it says")
    func statedDifferences() throws {
        let foundation = try #require(UserDefaults(suiteName: "groupdefaults.differential.stated"))
        try withTemporaryDirectory { directory in
            let defaults = try SharedDefaults(suiteName: "stated", directory: directory)
            func both(_ value: Any) {
                foundation.register(defaults: ["k": value])
                defaults.set(value, forKey: "k")
            }
            both(Int.max)
            #expect(foundation.integer(forKey: "k") == 0 && foundation.string(forKey: "k") == nil)
            #expect(defaults.integer(forKey: "k") == .max && defaults.string(forKey: "k") == "9223372036854775807")
            both(Float(12.34))
            #expect(foundation.double(forKey: "k") == Double(Float(12.34)) && defaults.double(forKey: "k") == 12.34)
            #expect(foundation.string(forKey: "k") == "12.34" && defaults.string(forKey: "k") == "12.34")
            both(Float(1.479438e8))
            #expect(foundation.integer(forKey: "k") == 147_943_808 && foundation.string(forKey: "k") == "1.479438e+08")
            #expect(defaults.integer(forKey: "k") == 147_943_800 && defaults.string(forKey: "k") == "147943800.0")
            both("https://example.com/x")
            #expect(foundation.url(forKey: "k")?.absoluteString != "https://example.com/x")
            #expect(defaults.url(forKey: "k")?.absoluteString == "https://example.com/x")
            both("")
            #expect(foundation.url(forKey: "k") != nil && defaults.url(forKey: "k") == nil)
            // A string with a colon but no scheme before it is a path, as Foundation reads it.
            for path in [":", ":x", "a b:c"] {
                both(path)
                #expect(defaults.url(forKey: "k") == foundation.url(forKey: "k"), "\(path)")
                #expect(defaults.url(forKey: "k")?.isFileURL == true, "\(path)")
            }
            both(try #require(URL(string: "https://example.com/x")))
            #expect(foundation.string(forKey: "k") == nil && defaults.string(forKey: "k") == "https://example.com/x")
            both(URL(fileURLWithPath: "/tmp/x"))
            #expect(foundation.string(forKey: "k") == nil && defaults.string(forKey: "k") == "/tmp/x")
            #expect(foundation.url(forKey: "k") == URL(fileURLWithPath: "/tmp/x") && defaults.url(forKey: "k") == URL(fileURLWithPath: "/tmp/x"))
            both(Data("/tmp/x".utf8))
            #expect(defaults.url(forKey: "k") == URL(fileURLWithPath: "/tmp/x"))  // Foundation unarchives it (and may crash): not asked
            both(NSNumber(value: UInt8(7)))
            let number = try #require(foundation.object(forKey: "k"))
            #expect(number is NSNumber && (number as? NSNumber)?.intValue == 7, "\(type(of: number))")
            #expect(defaults.object(forKey: "k") as? Int == 7 && defaults.object(forKey: "k") as? Double == nil)
            both(Float(0.5))
            #expect(foundation.object(forKey: "k") as? Float == 0.5 && defaults.object(forKey: "k") as? Double == 0.5)

            // The empty key: Foundation keeps a value under it; here it is refused.
            defaults.set("v", forKey: "")
            #expect(defaults.object(forKey: "") == nil && defaults.lastError?.code == .invalidKey)

            // Above Int.max: Foundation keeps it and reads 0; here it is refused, saying why and
            // what to store instead, and the key keeps its value.
            defaults.set("kept", forKey: "u")
            foundation.register(defaults: ["u": NSNumber(value: UInt64.max)])
            defaults.set(NSNumber(value: UInt64.max), forKey: "u")
            #expect(foundation.integer(forKey: "u") == 0 && foundation.object(forKey: "u") != nil)
            #expect(defaults.string(forKey: "u") == "kept")
            let error = try #require(defaults.lastError)
            #expect(error.code == .unsupportedValue && "\(error)".contains("above Int.max") && "\(error)".contains("String or a Double"), "\(error)")
            defaults.set(UInt64.max, forKey: "u")
            #expect(defaults.string(forKey: "u") == "kept" && "\(defaults.lastError!)".contains("above Int.max"))
        }
    }

    @Test("the rows that need Foundation's persistent domain (set, not register) hold as docs/guide says")
    func statedDifferencesOfStoredValues() async throws {
        try await withTemporaryDirectory { directory in
            let environment = Self.helperEnvironment(directory)
            let result = try await HelperProcess("differential-stated", directory: directory, suite: "unused", environment: environment).finish()
            #expect(result.status == 0, "\(result.stderr)")
            #expect(
                result.stdout.split(separator: "\n") == [
                    "foundation set(1.0) over 1: string 1, https URL: string /x",
                    "shared set(1.0) over 1: string 1.0, https URL: string https://example.com/x",
                ],
                "\(result.stdout)"
            )
        }
    }

    @Test("the rows of the search list in the differences table (docs/guide) hold, on both sides, as they say")
    func statedDifferencesOfTheSearchList() async throws {
        try await withTemporaryDirectory { directory in
            let environment = Self.helperEnvironment(directory)
            let result = try await HelperProcess("differential-stated-search", directory: directory, suite: "unused", environment: environment)
                .finish()
            #expect(result.status == 0, "\(result.stderr)")
            #expect(
                result.stdout.split(separator: "\n") == [
                    "global domain by name: foundation nil, shared g",
                    "addSuite of a suite: foundation nil, shared a",
                    "added again: shared a, then o, removed once a",
                    "added suite changed elsewhere: foundation a, after synchronize b, shared b",
                    #"registration domain set: foundation 0 ["NSArgumentDomain", "NSRegistrationDomain"], shared 1 ["NSArgumentDomain", "NSRegistrationDomain"]"#,
                ],
                "\(result.stdout)"
            )
        }
    }

    /// The environment of a helper that runs Foundation: `HOME` and `XDG_CONFIG_HOME` inside
    /// `directory` (Foundation reads them once, at start-up: its files go there).
    static func helperEnvironment(_ directory: URL) -> [String: String] {
        let home = directory.appendingPathComponent("home").path
        var environment = Self.environment
        environment["HOME"] = home
        environment["XDG_CONFIG_HOME"] = home + "/.config"
        return environment
    }

    /// What the scalar getters answer for key `k`.
    struct Answers {
        var integer: Int, double: Double, float: Float, bool: Bool, string: String?

        init(_ defaults: SharedDefaults) {
            (integer, double, float, bool, string) = (
                defaults.integer(forKey: "k"), defaults.double(forKey: "k"),
                defaults.float(forKey: "k"), defaults.bool(forKey: "k"), defaults.string(forKey: "k")
            )
        }

        init(_ defaults: UserDefaults) {
            (integer, double, float, bool, string) = (
                defaults.integer(forKey: "k"), defaults.double(forKey: "k"),
                defaults.float(forKey: "k"), defaults.bool(forKey: "k"), defaults.string(forKey: "k")
            )
        }

        func differences(from foundation: Answers, float: Float?) -> [String] {
            func same(_ a: Double, _ b: Double) -> Bool { a.bitPattern == b.bitPattern || (a.isNaN && b.isNaN) }
            let largeFloat = float.map { abs($0) >= 0x1p24 } ?? false
            var found: [String] = []
            if !largeFloat, integer != foundation.integer { found.append("integer \(integer), Foundation \(foundation.integer)") }
            if float == nil, !same(double, foundation.double) { found.append("double \(double), Foundation \(foundation.double)") }
            if !same(Double(self.float), Double(foundation.float)) { found.append("float \(self.float), Foundation \(foundation.float)") }
            if bool != foundation.bool { found.append("bool \(bool), Foundation \(foundation.bool)") }
            if !largeFloat, string != foundation.string {
                found.append("string \(String(reflecting: string)), Foundation \(String(reflecting: foundation.string))")
            }
            return found
        }
    }

    /// A seeded stream of values: strings built from the characters numbers and booleans are read
    /// from (and blanks, and look-alikes), doubles of every magnitude, floats, integers, booleans.
    struct ValueGenerator {
        var state: UInt64

        init(seed: UInt64) { state = seed }

        /// SplitMix64.
        mutating func random() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }

        mutating func below(_ n: Int) -> Int { Int(random() % UInt64(n)) }

        static let alphabet: [String] =
            Array("0123456789012345678900000+-..eE").map(String.init)
            + [" ", "\t", "\n", "\u{200B}", "\u{A0}", "\u{3000}", "x", "y", "Y", "t", "T", "n", "N", "f", "a", ",", "_", "１", "٣"]

        mutating func next() -> Any {
            switch below(6) {
            case 0, 1:
                return String((0..<below(9)).map { _ in Self.alphabet[below(Self.alphabet.count)] }.joined())
            case 2:
                let mantissa = Double(Int64(bitPattern: random() >> UInt64(below(60))))
                return mantissa * pow(10, Double(below(40) - 20))
            case 3:
                return Float(Double(Int32(truncatingIfNeeded: random())) / Double(1 + below(1000)))
            case 4:
                return Int(Int64(bitPattern: random()) >> Int64(2 + below(61)))  // never Int.max: a stated difference
            default:
                return below(2) == 0
            }
        }
    }
}
