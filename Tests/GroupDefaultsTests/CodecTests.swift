import Foundation
import GroupDefaultsWire
import PropertyBased
import Testing

@testable import GroupDefaults

// MARK: Samples and generators

/// One value of every case, with the edges of each (empty, extremes, non-ASCII), and nested shapes.
private let samples: [PropertyListValue] = [
    .string(""), .string("ring.caf"), .string("é 日本 🎵 \u{0} \u{10FFFF}"), .string(String(repeating: "x", count: 300)),
    .integer(0), .integer(1), .integer(-1), .integer(63), .integer(-64), .integer(64), .integer(Int.max), .integer(Int.min),
    .double(0), .double(0.8), .double(-1e-300), .double(.pi), .double(.greatestFiniteMagnitude),
    .double(.leastNonzeroMagnitude), .double(.infinity), .double(-.infinity),
    .bool(true), .bool(false),
    .date(Date(timeIntervalSinceReferenceDate: 0)), .date(Date(timeIntervalSince1970: 1_795_255_200.123_456)),
    .date(.distantPast), .date(.distantFuture),
    .data(Data()), .data(Data([0, 1, 2, 0xFF])), .data(Data(repeating: 0xAB, count: 1000)),
    .array([]), .dictionary([:]),
    .array([.integer(1), .string("a"), .bool(false), .array([]), .dictionary([:])]),
    .dictionary(["": .string("empty key"), "é": .integer(2), "list": .array([.double(0.5)])]),
    nestedSample(depth: 6),
]

/// Arrays of dictionaries of arrays…, `depth` levels deep, with a leaf of each kind at every level.
private func nestedSample(depth: Int) -> PropertyListValue {
    guard depth > 0 else { return .string("leaf") }
    let inner = nestedSample(depth: depth - 1)
    if depth.isMultiple(of: 2) {
        return .array([inner, .integer(depth), .data(Data([UInt8(depth)])), .date(Date(timeIntervalSince1970: Double(depth)))])
    }
    return .dictionary(["child": inner, "n": .double(Double(depth) / 3), "flag": .bool(depth % 3 == 0), "s\(depth)": .string("x")])
}

/// Random property-list values, nested up to a depth, for property-based round trips.
enum PropertyListGenerator {
    /// - Parameter jsonSafe: only values typed JSON carries exactly (dates in whole milliseconds,
    ///   years 1900–2200).
    static func value(maxDepth: Int, jsonSafe: Bool = false) -> Generator<PropertyListValue, Shrink.None<PropertyListValue>> {
        Generator { rng in make(depth: maxDepth, jsonSafe: jsonSafe, using: &rng) }
    }

    static func make(depth: Int, jsonSafe: Bool, using rng: inout any SeededRandomNumberGenerator) -> PropertyListValue {
        switch Int.random(in: 0..<(depth > 0 ? 9 : 7), using: &rng) {
        case 0: return .string(string(using: &rng))
        case 1: return .integer(Gen.int().run(using: &rng))
        case 2: return .integer(Gen.int(in: -200...200).run(using: &rng))
        case 3: return .double(double(using: &rng))
        case 4: return .bool(Gen.bool.run(using: &rng))
        case 5:
            if jsonSafe {
                // 1900-01-01 … 2200-01-01, whole milliseconds since 1970.
                let milliseconds = Int64.random(in: -2_208_988_800_000...7_258_118_400_000, using: &rng)
                return .date(Date(timeIntervalSince1970: Double(milliseconds) / 1000))
            }
            return .date(Date(timeIntervalSinceReferenceDate: double(using: &rng)))
        case 6:
            let count = Int.random(in: 0...40, using: &rng)
            return .data(Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }))
        case 7:
            let count = Int.random(in: 0...4, using: &rng)
            return .array((0..<count).map { _ in make(depth: depth - 1, jsonSafe: jsonSafe, using: &rng) })
        default:
            let count = Int.random(in: 0...4, using: &rng)
            var dictionary: [String: PropertyListValue] = [:]
            for _ in 0..<count {
                dictionary[string(using: &rng)] = make(depth: depth - 1, jsonSafe: jsonSafe, using: &rng)
            }
            return .dictionary(dictionary)
        }
    }

    /// Any finite or infinite double (NaN is tested on its own: it is not equal to itself).
    static func double(using rng: inout any SeededRandomNumberGenerator) -> Double {
        switch Int.random(in: 0..<3, using: &rng) {
        case 0: return Gen.double(in: -1000...1000).run(using: &rng)
        case 1: return Double(Int.random(in: -1_000_000...1_000_000, using: &rng))
        default:
            let bits = Double(bitPattern: UInt64.random(in: .min ... .max, using: &rng))
            return bits.isNaN ? .infinity : bits
        }
    }

    /// Strings of 0–12 scalars from every UTF-8 length class, NUL included.
    static func string(using rng: inout any SeededRandomNumberGenerator) -> String {
        let ranges: [ClosedRange<UInt32>] = [0...0x7F, 0x80...0x7FF, 0x800...0xD7FF, 0xE000...0xFFFF, 0x1_0000...0x10_FFFF]
        var scalars = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...12, using: &rng) {
            let range = ranges[Int.random(in: 0..<ranges.count, using: &rng)]
            scalars.append(Unicode.Scalar(UInt32.random(in: range, using: &rng))!)
        }
        return String(scalars)
    }

    static func stamp(using rng: inout any SeededRandomNumberGenerator) -> Stamp {
        Stamp(hlc: HLC(rawValue: UInt64.random(in: .min ... .max, using: &rng)), origin: UInt64.random(in: .min ... .max, using: &rng))
    }
}

// MARK: Helpers

private func roundTrip(_ value: PropertyListValue) throws -> PropertyListValue {
    try BinaryCodec.decode(BinaryCodec.encode(value))
}

private func decodeRecord(_ bytes: [UInt8]) throws -> (value: PropertyListValue, stamp: Stamp) {
    try bytes.withUnsafeBytes { try StoredRecord.decode($0) }
}

/// A value record around `body` (raw codec bytes, valid or not) with a correct checksum, so that
/// only the codec stands between the bytes and a value.
private func sealedRecord(body: [UInt8], stamp: Stamp = Stamp(hlc: HLC(rawValue: 42), origin: 7)) -> [UInt8] {
    var record = StoredRecord.encode(.bool(true), stamp: stamp)
    record.removeSubrange(StoredRecord.headerSize...)
    record.append(contentsOf: body)
    let sum = record.withUnsafeBytes(StoredRecord.checksum)
    withUnsafeBytes(of: sum.littleEndian) { for i in 0..<4 { record[18 + i] = $0[i] } }
    return record
}

private func varint(_ value: UInt64) -> [UInt8] {
    var bytes: [UInt8] = []
    BinaryCodec.appendVarint(value, into: &bytes)
    return bytes
}

/// `depth` arrays of one element each, around an integer (the integer sits at nesting level `depth`).
private func nestedArrayBytes(depth: Int) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(2 * depth + 2)
    for _ in 0..<depth { bytes += [BinaryCodec.Tag.array.rawValue, 1] }
    return bytes + [BinaryCodec.Tag.integer.rawValue, 0]
}

private func typedJSON(_ value: PropertyListValue) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

private func fromTypedJSON(_ json: String) throws -> PropertyListValue {
    try JSONDecoder().decode(PropertyListValue.self, from: Data(json.utf8))
}

private func isoDate(_ text: String) throws -> Date {
    try Date(text, strategy: .iso8601)
}

// MARK: Binary codec and stored records

@Suite("Binary codec and stored records")
struct CodecTests {
    @Test("every case round-trips through BinaryCodec", arguments: samples)
    func binaryRoundTrip(_ value: PropertyListValue) throws {
        #expect(try roundTrip(value) == value)
    }

    @Test("every case round-trips through StoredRecord with its stamp", arguments: samples)
    func recordRoundTrip(_ value: PropertyListValue) throws {
        let stamp = Stamp(hlc: HLC(milliseconds: 1_795_255_200_000, counter: 7), origin: 0xDEAD_BEEF_0123_4567)
        let record = StoredRecord.encode(value, stamp: stamp)
        #expect(record.count == StoredRecord.headerSize + BinaryCodec.encode(value).count)
        let decoded = try decodeRecord(record)
        #expect(decoded.value == value)
        #expect(decoded.stamp == stamp)
    }

    @Test("NaN, -0.0 and every double bit pattern survive exactly")
    func doubleBitPatterns() throws {
        for double in [Double.nan, -Double.nan, Double.signalingNaN, -0.0, 0.0, .infinity, -.infinity, .ulpOfOne] {
            let decoded = try #require(try roundTrip(.double(double)).doubleValue)
            #expect(decoded.bitPattern == double.bitPattern)
            let date = try #require(try roundTrip(.date(Date(timeIntervalSinceReferenceDate: double))).dateValue)
            #expect(date.timeIntervalSinceReferenceDate.bitPattern == double.bitPattern)
        }
    }

    @Test("equal dictionaries encode to equal bytes, whatever their insertion order")
    func canonicalDictionaries() {
        var a: [String: PropertyListValue] = [:]
        var b: [String: PropertyListValue] = [:]
        let keys = (0..<50).map { "key-\($0)" }
        for key in keys { a[key] = .string(key) }
        for key in keys.reversed() { b[key] = .string(key) }
        #expect(BinaryCodec.encode(.dictionary(a)) == BinaryCodec.encode(.dictionary(b)))
    }

    @Test("tombstones round-trip their stamp and refuse other sizes")
    func tombstones() throws {
        let stamp = Stamp(hlc: HLC(rawValue: .max), origin: 1)
        let bytes = StoredRecord.encodeTombstone(stamp)
        #expect(bytes.count == StoredRecord.tombstoneSize)
        #expect(try bytes.withUnsafeBytes { try StoredRecord.decodeTombstone($0) } == stamp)
        for bad in [Array(bytes.dropLast()), bytes + [0], []] {
            #expect(throws: CorruptBytes.self) { try bad.withUnsafeBytes { try StoredRecord.decodeTombstone($0) } }
        }
        var wrongFormat = bytes
        wrongFormat[0] &+= 1
        #expect(throws: CorruptBytes.self) { try wrongFormat.withUnsafeBytes { try StoredRecord.decodeTombstone($0) } }
    }

    // MARK: Property-based

    @Test("random nested values round-trip through BinaryCodec")
    func propertyBinaryRoundTrip() async {
        await propertyCheck(count: 200, input: PropertyListGenerator.value(maxDepth: 4)) { value throws in
            #expect(try roundTrip(value) == value)
        }
    }

    @Test("random nested values round-trip through StoredRecord with random stamps")
    func propertyRecordRoundTrip() async {
        let input = Generator { rng in
            (PropertyListGenerator.make(depth: 4, jsonSafe: false, using: &rng), PropertyListGenerator.stamp(using: &rng))
        }
        await propertyCheck(count: 200, input: input) { pair throws in
            let (value, stamp) = pair
            let decoded = try decodeRecord(StoredRecord.encode(value, stamp: stamp))
            #expect(decoded.value == value)
            #expect(decoded.stamp == stamp)
        }
    }

    @Test("any integer survives zig-zag varints")
    func propertyIntegers() async {
        await propertyCheck(count: 200, input: Gen.int()) { n throws in
            #expect(try roundTrip(.integer(n)) == .integer(n))
        }
    }

    @Test("a random single-bit flip of a random record is always caught")
    func propertyBitFlips() async {
        let input = Generator { rng in
            let record = StoredRecord.encode(
                PropertyListGenerator.make(depth: 3, jsonSafe: false, using: &rng),
                stamp: PropertyListGenerator.stamp(using: &rng)
            )
            return (record, Int.random(in: 0..<(record.count * 8), using: &rng))
        }
        await propertyCheck(count: 200, input: input) { pair in
            var (record, bit) = pair
            record[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(throws: CorruptBytes.self) { try decodeRecord(record) }
        }
    }

    // MARK: Corrupt bytes

    @Test("every truncation of a valid record is refused")
    func truncations() throws {
        let record = StoredRecord.encode(nestedSample(depth: 4), stamp: Stamp(hlc: HLC(rawValue: 99), origin: 5))
        for length in 0..<record.count {
            #expect(throws: CorruptBytes.self, "length \(length)") { try decodeRecord(Array(record.prefix(length))) }
        }
        // And every truncation of the bare codec bytes, where no checksum helps.
        let body = BinaryCodec.encode(nestedSample(depth: 4))
        for length in 0..<body.count {
            #expect(throws: CorruptBytes.self, "length \(length)") { try BinaryCodec.decode(Array(body.prefix(length))) }
        }
    }

    @Test(
        "every single-bit flip of a record is caught",
        arguments: [
            PropertyListValue.integer(3), .string("ring.caf"), .bool(false), .array([]), nestedSample(depth: 3),
            .data(Data((0..<200).map { UInt8($0) })),
        ]
    )
    func everyBitFlip(_ value: PropertyListValue) throws {
        let record = StoredRecord.encode(value, stamp: Stamp(hlc: HLC(milliseconds: 1_795_255_200_000, counter: 1), origin: 0x0123_4567))
        #expect(try decodeRecord(record).value == value)
        for bit in 0..<(record.count * 8) {
            var damaged = record
            damaged[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(throws: CorruptBytes.self, "bit \(bit)") { try decodeRecord(damaged) }
        }
    }

    @Test("a record with an unknown format or flags is refused even with a correct checksum")
    func unknownFormatAndFlags() throws {
        for (offset, byte) in [(0, UInt8(2)), (0, UInt8(0)), (17, UInt8(2)), (17, UInt8(0x80)), (17, UInt8(0x81))] {
            var record = sealedRecord(body: BinaryCodec.encode(.integer(1)))
            record[offset] = byte
            let sum = record.withUnsafeBytes(StoredRecord.checksum)
            withUnsafeBytes(of: sum.littleEndian) { for i in 0..<4 { record[18 + i] = $0[i] } }
            #expect(throws: CorruptBytes.self, "byte \(byte) at \(offset)") { try decodeRecord(record) }
        }
        // Bit 0 is the pending flag of a synced suite's local change: known, and kept apart from the value.
        var pending = sealedRecord(body: BinaryCodec.encode(.integer(1)))
        pending[17] = StoredRecord.pendingFlag
        let sum = pending.withUnsafeBytes(StoredRecord.checksum)
        withUnsafeBytes(of: sum.littleEndian) { for i in 0..<4 { pending[18 + i] = $0[i] } }
        #expect(try decodeRecord(pending).value == .integer(1))
        #expect(pending.withUnsafeBytes(StoredRecord.isPending))
    }

    @Test("unknown type tags are refused", arguments: [UInt8(0)] + Array(UInt8(10)...UInt8(255)))
    func unknownTag(_ tag: UInt8) {
        #expect(throws: CorruptBytes.self) { try BinaryCodec.decode([tag]) }
        #expect(throws: CorruptBytes.self) { try BinaryCodec.decode([BinaryCodec.Tag.array.rawValue, 1, tag, 0]) }
        #expect(throws: CorruptBytes.self) { try decodeRecord(sealedRecord(body: [tag, 0, 0])) }
    }

    @Test(
        "strings and dictionary keys that are not UTF-8 are refused",
        arguments: [
            [UInt8(0xFF)], [0xC3, 0x28], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0x80],
        ]
    )
    func badUTF8(_ bad: [UInt8]) {
        let string = [BinaryCodec.Tag.string.rawValue] + varint(UInt64(bad.count)) + bad
        #expect(throws: CorruptBytes.self) { try BinaryCodec.decode(string) }
        let key = [BinaryCodec.Tag.dictionary.rawValue, 1] + varint(UInt64(bad.count)) + bad + [BinaryCodec.Tag.boolTrue.rawValue]
        #expect(throws: CorruptBytes.self) { try BinaryCodec.decode(key) }
        #expect(throws: CorruptBytes.self) { try decodeRecord(sealedRecord(body: string)) }
    }

    @Test("nesting up to the limit decodes; one level more, or far more, is refused without exhausting the stack")
    func nestingLimit() throws {
        let deepest = BinaryCodec.maximumDecodingDepth - 1
        var value = try BinaryCodec.decode(nestedArrayBytes(depth: deepest))
        var levels = 0
        while case .array(let inner) = value {
            value = inner[0]
            levels += 1
        }
        #expect(levels == deepest)
        #expect(value == .integer(0))
        #expect(throws: CorruptBytes.self) { try BinaryCodec.decode(nestedArrayBytes(depth: BinaryCodec.maximumDecodingDepth)) }
        #expect(throws: CorruptBytes.self) { try BinaryCodec.decode(nestedArrayBytes(depth: 200_000)) }
        var dictionaries: [UInt8] = []
        for _ in 0..<100_000 { dictionaries += [BinaryCodec.Tag.dictionary.rawValue, 1, 1, 0x6B] }
        #expect(throws: CorruptBytes.self) { try BinaryCodec.decode(dictionaries + [BinaryCodec.Tag.boolTrue.rawValue]) }
    }

    @Test("lengths and counts that run past the end are refused")
    func lengthsPastTheEnd() throws {
        let tags = BinaryCodec.Tag.self
        let cases: [(String, [UInt8])] = [
            ("string length 5, 2 bytes", [tags.string.rawValue, 5, 0x61, 0x62]),
            ("data length 2^63", [tags.data.rawValue] + varint(1 << 63) + [1, 2, 3]),
            ("data length UInt64.max", [tags.data.rawValue] + varint(.max)),
            ("array of 3, 2 elements", [tags.array.rawValue, 3, tags.boolTrue.rawValue, tags.boolFalse.rawValue]),
            ("array count 2^62", [tags.array.rawValue] + varint(1 << 62) + [tags.boolTrue.rawValue]),
            ("dictionary count larger than its bytes", [tags.dictionary.rawValue, 2, 1, 0x6B, tags.boolTrue.rawValue]),
            ("dictionary count 2^40", [tags.dictionary.rawValue] + varint(1 << 40) + [1, 0x6B, tags.boolTrue.rawValue]),
            ("dictionary key length past the end", [tags.dictionary.rawValue, 1, 9, 0x6B, tags.boolTrue.rawValue]),
            ("double of 7 bytes", [tags.double.rawValue, 0, 0, 0, 0, 0, 0, 0]),
            ("date of 3 bytes", [tags.date.rawValue, 0, 0, 0]),
            ("varint that never ends", [tags.integer.rawValue] + Array(repeating: 0x80, count: 9)),
            ("varint of 11 bytes", [tags.integer.rawValue] + Array(repeating: 0x80, count: 10) + [0]),
            ("varint over 64 bits", [tags.integer.rawValue] + Array(repeating: 0xFF, count: 9) + [0x02]),
            ("trailing bytes", [tags.integer.rawValue, 0, 0]),
            ("repeated dictionary key", [tags.dictionary.rawValue, 2, 1, 0x6B, tags.boolTrue.rawValue, 1, 0x6B, tags.boolFalse.rawValue]),
            ("nothing at all", []),
        ]
        for (name, bytes) in cases {
            #expect(throws: CorruptBytes.self, "\(name)") { try BinaryCodec.decode(bytes) }
            #expect(throws: CorruptBytes.self, "\(name), in a sealed record") { try decodeRecord(sealedRecord(body: bytes)) }
        }
        // The largest varint that fits decodes.
        #expect(try BinaryCodec.decode([tags.integer.rawValue] + varint(.max)) == .integer(Int.min))
    }
}

// MARK: Typed JSON

@Suite("Typed JSON")
struct TypedJSONTests {
    @Test("each case has the design's exact JSON form")
    func exactForms() throws {
        let date = try isoDate("2026-11-21T10:00:00Z")
        let forms: [(PropertyListValue, String)] = [
            (.string("ring.caf"), #"{"string":"ring.caf"}"#),
            (.integer(3), #"{"integer":3}"#),
            (.integer(-9_223_372_036_854_775_808), #"{"integer":-9223372036854775808}"#),
            (.double(0.8), #"{"double":0.8}"#),
            (.bool(true), #"{"bool":true}"#),
            (.bool(false), #"{"bool":false}"#),
            (.date(date), #"{"date":"2026-11-21T10:00:00.000Z"}"#),
            (.date(date.addingTimeInterval(0.25)), #"{"date":"2026-11-21T10:00:00.250Z"}"#),
            (.data(Data([0, 1, 2, 0xFF])), #"{"data":"AAEC/w=="}"#),
            (.data(Data()), #"{"data":""}"#),
            (.array([]), #"{"array":[]}"#),
            (.array([.integer(1), .string("a")]), #"{"array":[{"integer":1},{"string":"a"}]}"#),
            (.dictionary([:]), #"{"dictionary":{}}"#),
            (
                .dictionary(["a": .bool(false), "b": .array([.double(0.5)])]),
                #"{"dictionary":{"a":{"bool":false},"b":{"array":[{"double":0.5}]}}}"#
            ),
            (.double(.nan), #"{"double":"nan"}"#),
            (.double(.infinity), #"{"double":"inf"}"#),
            (.double(-.infinity), #"{"double":"-inf"}"#),
        ]
        for (value, json) in forms {
            #expect(try typedJSON(value) == json)
            let decoded = try fromTypedJSON(json)
            if case .double(let d) = value, d.isNaN {
                #expect(decoded.doubleValue?.isNaN == true)
            } else {
                #expect(decoded == value, "\(json)")
            }
        }
    }

    @Test("every sample round-trips, dates to the nearest microsecond", arguments: samples)
    func roundTripSamples(_ value: PropertyListValue) throws {
        let decoded = try fromTypedJSON(try typedJSON(value))
        #expect(microsecondDates(decoded) == microsecondDates(value))
        // A second trip changes nothing.
        #expect(try typedJSON(decoded) == typedJSON(value))
    }

    @Test(
        "a date in whole milliseconds keeps them",
        arguments: [
            (Int64(1_795_255_200_123), "2026-11-21T10:00:00.123Z"), (1_795_255_200_999, "2026-11-21T10:00:00.999Z"),
            (1_795_255_200_001, "2026-11-21T10:00:00.001Z"), (-1, "1969-12-31T23:59:59.999Z"),
            (978_307_199_999, "2000-12-31T23:59:59.999Z"),
        ]
    )
    func wholeMilliseconds(_ milliseconds: Int64, _ text: String) throws {
        let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
        let json = try typedJSON(.date(date))
        #expect(json == #"{"date":"\#(text)"}"#)
        let decoded = try #require(try fromTypedJSON(json).dateValue)
        #expect((decoded.timeIntervalSince1970 * 1000).rounded() == Double(milliseconds))
    }

    /// Issue 48, item 10: dates were read to the millisecond, and before 1582-10-15 in the Julian
    /// calendar. The microseconds since 2001 expected are Python's `datetime` arithmetic.
    @Test(
        "a date keeps its microseconds, in the proleptic Gregorian calendar in every year",
        arguments: [
            ("2020-11-21T10:00:00.123456Z", Int64(627_645_600_123_456), "2020-11-21T10:00:00.123456Z"),
            ("1582-10-14T00:00:00Z", -13_197_686_400_000_000, "1582-10-14T00:00:00.000Z"),
            ("1582-10-04T23:59:59.5Z", -13_198_464_000_500_000, "1582-10-04T23:59:59.500Z"),
            ("0001-01-01T00:00:00Z", -63_113_904_000_000_000, "0001-01-01T00:00:00.000Z"),
            ("1700-03-01T00:00:00Z", -9_493_545_600_000_000, "1700-03-01T00:00:00.000Z"),
            // A Double's step is 31 µs here: the one nearest .999 is .998993 to the microsecond (as plistlib reads it).
            ("9999-12-31T23:59:59.999Z", 252_423_993_599_999_000, "9999-12-31T23:59:59.998993Z"),
            ("2026-11-21T12:00:00.1234564+02:00", 816_948_000_123_456, "2026-11-21T10:00:00.123456Z"),
            ("2026-11-21T10:00:00.12345650Z", 816_948_000_123_457, "2026-11-21T10:00:00.123457Z"),
            ("2026-11-21T10:00:00.12Z", 816_948_000_120_000, "2026-11-21T10:00:00.120Z"),
        ]
    )
    func microsecondsAndGregorian(_ text: String, _ microsecondsSince2001: Int64, _ written: String) throws {
        let date = try #require(TypedJSONDate.parse(text))
        let expected = Date(timeIntervalSinceReferenceDate: Double(microsecondsSince2001) / 1_000_000)
        #expect(date.timeIntervalSinceReferenceDate == expected.timeIntervalSinceReferenceDate, "\(text)")
        #expect(TypedJSONDate.valueText(date) == written)
        #expect(try typedJSON(.date(date)) == #"{"date":"\#(written)"}"#)
    }

    @Test("years 0000 to 9999, and a Double coarser than a microsecond read back as itself")
    func dateRange() throws {
        #expect(TypedJSONDate.valueText(.distantPast) == "0000-12-30T00:00:00.000Z")
        #expect(TypedJSONDate.valueText(Date(timeIntervalSinceReferenceDate: -63_145_526_400)) == "0000-01-01T00:00:00.000Z")
        #expect(TypedJSONDate.valueText(Date(timeIntervalSinceReferenceDate: -63_145_526_400.5)) == nil)
        #expect(TypedJSONDate.valueText(Date(timeIntervalSinceReferenceDate: 252_423_993_600)) == nil)  // 10000-01-01
        #expect(TypedJSONDate.parse("0000-01-01T00:00:00+00:01") == nil)  // 1 BC's last minute
        #expect(TypedJSONDate.parse("9999-12-31T23:59:59.9999995Z") == nil)  // rounds to 10000-01-01
        #expect(TypedJSONDate.parse("1700-02-29T00:00:00Z") == nil)  // not a leap year in the Gregorian calendar
        // In year 9999 a Double's step is 2^-15 s: one step after 9999-01-01 is 30.517578125 µs.
        let step = Date(timeIntervalSinceReferenceDate: 252_392_457_600.000_030_517_578_125)
        #expect(TypedJSONDate.valueText(step) == "9999-01-01T00:00:00.000031Z")
        // A moment (a clock's time, in the API and the tools' output) stays to the millisecond.
        let moment = try #require(TypedJSONDate.parse("2020-11-21T10:00:00.123456Z"))
        #expect(TypedJSONDate.format(moment) == "2020-11-21T10:00:00.123Z")
        #expect(TypedJSONDate.format(moment.addingTimeInterval(0.000_6)) == "2020-11-21T10:00:00.124Z")
        #expect(TypedJSONDate.parse("9999-01-01T00:00:00.000031Z") == step)
    }

    @Test(
        "a date typed JSON cannot carry is refused when encoded, not changed",
        arguments: [
            1e15, -1e15, 1e12, -1e12, Double.infinity, -Double.infinity, Double.nan,
        ]
    )
    func unrepresentableDates(_ interval: Double) throws {
        let value = PropertyListValue.date(Date(timeIntervalSinceReferenceDate: interval))
        do {
            let json = try typedJSON(value)
            let decoded = try #require(try? fromTypedJSON(json), "\(json) does not decode")
            #expect(microsecondDates(decoded) == microsecondDates(value), "\(json)")
        } catch is EncodingError {
            // Refused: fine.
        }
    }

    @Test("-0.0 keeps its sign; a whole-number double stays a double")
    func doubleEdges() throws {
        #expect(try fromTypedJSON(typedJSON(.double(-0.0))).doubleValue?.sign == .minus)
        #expect(try fromTypedJSON(#"{"double":3}"#) == .double(3))
        #expect(try fromTypedJSON(typedJSON(.double(3))) == .double(3))
        #expect(try fromTypedJSON(typedJSON(.double(.greatestFiniteMagnitude))) == .double(.greatestFiniteMagnitude))
        #expect(try fromTypedJSON(typedJSON(.double(.leastNonzeroMagnitude))) == .double(.leastNonzeroMagnitude))
    }

    @Test("random nested values round-trip through typed JSON")
    func propertyRoundTrip() async {
        await propertyCheck(count: 200, input: PropertyListGenerator.value(maxDepth: 4, jsonSafe: true)) { value throws in
            #expect(try microsecondDates(fromTypedJSON(typedJSON(value))) == microsecondDates(value))
        }
    }

    @Test(
        "malformed typed JSON is refused",
        arguments: [
            #"{}"#, #"{"string":"a","integer":1}"#, #"{"unknown":1}"#, #"[]"#, #""ring.caf""#, #"3"#, #"null"#,
            #"{"string":3}"#, #"{"string":null}"#, #"{"integer":3.5}"#, #"{"integer":"3"}"#, #"{"integer":1e30}"#,
            #"{"double":"NaN"}"#, #"{"double":"infinity"}"#, #"{"double":"0.8"}"#, #"{"double":true}"#,
            #"{"bool":"true"}"#, #"{"bool":1}"#, #"{"date":"yesterday"}"#, #"{"date":"2026-13-45T10:00:00.000Z"}"#,
            #"{"date":1795255200}"#, #"{"data":"!!!"}"#, #"{"data":[1,2]}"#, #"{"array":{"integer":1}}"#,
            #"{"array":[1]}"#, #"{"array":[{}]}"#, #"{"dictionary":[]}"#, #"{"dictionary":{"a":1}}"#,
            #"{"dictionary":{"a":{"string":"x","bool":true}}}"#, #"{"string":"unterminated}"#,
        ]
    )
    func malformed(_ json: String) {
        #expect(throws: DecodingError.self) { try fromTypedJSON(json) }
    }
}

/// The date nearest to `date`'s nearest microsecond, what typed JSON carries: whole seconds and
/// the fraction apart (`seconds * 10^6` alone is inexact beyond 2^53 µs, 285 years from 2001), the
/// microseconds read back as decimal text (which Swift reads correctly rounded).
func nearestMicrosecond(_ date: Date) -> Date {
    let seconds = date.timeIntervalSinceReferenceDate.rounded(.down)
    let microseconds = Int64(seconds) * 1_000_000 + Int64(((date.timeIntervalSinceReferenceDate - seconds) * 1_000_000).rounded())
    return Date(timeIntervalSinceReferenceDate: Double("\(microseconds)e-6")!)
}

/// `value` with every date rounded to the nearest microsecond, the precision typed JSON carries.
private func microsecondDates(_ value: PropertyListValue) -> PropertyListValue {
    switch value {
    case .date(let date):
        return .date(nearestMicrosecond(date))
    case .array(let array): return .array(array.map(microsecondDates))
    case .dictionary(let dictionary): return .dictionary(dictionary.mapValues(microsecondDates))
    default: return value
    }
}
