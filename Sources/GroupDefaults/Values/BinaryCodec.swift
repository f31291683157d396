import Foundation

/// The compact binary form of a `PropertyListValue`, as stored in a suite.
///
/// Each value is a one-byte tag and a payload: lengths and integers as LEB128 varints (integers
/// zig-zagged), doubles and dates as 8 little-endian bytes, dictionaries with their keys sorted so
/// that equal values encode to equal bytes. The format's version lives in the record header
/// (`StoredRecord.format`), not here.
package enum BinaryCodec {
    enum Tag: UInt8 {
        case string = 1
        case integer
        case double
        case boolFalse
        case boolTrue
        case date
        case data
        case array
        case dictionary
    }

    /// The decoders' guard against the stack (`PropertyListValue.maximumDecodingDepth`).
    package static let maximumDecodingDepth = PropertyListValue.maximumDecodingDepth

    static func encode(_ value: PropertyListValue, into bytes: inout [UInt8]) {
        switch value {
        case .string(let string):
            bytes.append(Tag.string.rawValue)
            appendCounted(string, into: &bytes)
        case .integer(let int):
            bytes.append(Tag.integer.rawValue)
            appendVarint(UInt64(bitPattern: Int64((int << 1) ^ (int >> (Int.bitWidth - 1)))), into: &bytes)
        case .double(let double):
            bytes.append(Tag.double.rawValue)
            appendFixed(double.bitPattern, into: &bytes)
        case .bool(let bool):
            bytes.append(bool ? Tag.boolTrue.rawValue : Tag.boolFalse.rawValue)
        case .date(let date):
            bytes.append(Tag.date.rawValue)
            appendFixed(date.timeIntervalSinceReferenceDate.bitPattern, into: &bytes)
        case .data(let data):
            bytes.append(Tag.data.rawValue)
            appendCounted(data, into: &bytes)
        case .array(let array):
            bytes.append(Tag.array.rawValue)
            appendVarint(UInt64(array.count), into: &bytes)
            for element in array { encode(element, into: &bytes) }
        case .dictionary(let dictionary):
            bytes.append(Tag.dictionary.rawValue)
            appendVarint(UInt64(dictionary.count), into: &bytes)
            for key in dictionary.keys.sorted() {
                appendCounted(key, into: &bytes)
                encode(dictionary[key]!, into: &bytes)
            }
        }
    }

    package static func encode(_ value: PropertyListValue) -> [UInt8] {
        var bytes: [UInt8] = []
        encode(value, into: &bytes)
        return bytes
    }

    /// Decodes exactly one value that fills `buffer`.
    package static func decode(_ buffer: UnsafeRawBufferPointer) throws(CorruptBytes) -> PropertyListValue {
        var reader = ByteReader(buffer)
        let value = try reader.value(depth: 0)
        guard reader.isAtEnd else { throw CorruptBytes("\(reader.remaining) unexpected bytes after the value") }
        return value
    }

    static func decode(_ bytes: [UInt8]) throws(CorruptBytes) -> PropertyListValue {
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(CorruptBytes) in try decode(buffer) }
        }
        return try result.get()
    }

    /// A string's UTF-8, counted: copied from its storage in one piece (appending its `utf8` view
    /// goes through the generic sequence copy, `_copyContents`).
    private static func appendCounted(_ string: String, into out: inout [UInt8]) {
        withKeyBytes(string) { appendCounted($0, into: &out) }
    }

    private static func appendCounted(_ bytes: some Collection<UInt8>, into out: inout [UInt8]) {
        appendVarint(UInt64(bytes.count), into: &out)
        out.append(contentsOf: bytes)
    }

    static func appendVarint(_ value: UInt64, into bytes: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    static func appendFixed(_ value: UInt64, into bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }
}

/// Bytes that do not decode: damaged on disk, or not written by this codec.
package struct CorruptBytes: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}

/// A bounds-checked cursor over raw bytes.
struct ByteReader {
    private let buffer: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }

    var remaining: Int { buffer.count - offset }
    var isAtEnd: Bool { offset == buffer.count }

    mutating func byte() throws(CorruptBytes) -> UInt8 {
        guard offset < buffer.count else { throw CorruptBytes("the value ends early") }
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func fixed64() throws(CorruptBytes) -> UInt64 {
        guard remaining >= 8 else { throw CorruptBytes("the value ends early") }
        defer { offset += 8 }
        return UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    mutating func varint() throws(CorruptBytes) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            guard shift < 64, shift < 63 || b <= 1 else { throw CorruptBytes("a number is longer than 64 bits") }
            result |= UInt64(b & 0x7F) << shift
            if b < 0x80 { return result }
            shift += 7
        }
    }

    /// A length that must fit in what is left (each counted item takes at least `unit` bytes).
    mutating func count(unit: Int = 1) throws(CorruptBytes) -> Int {
        let n = try varint()
        guard n <= UInt64(remaining / unit) else { throw CorruptBytes("a length of \(n) runs past the end") }
        return Int(n)
    }

    mutating func bytes(_ n: Int) -> UnsafeRawBufferPointer {
        defer { offset += n }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + n])
    }

    mutating func string() throws(CorruptBytes) -> String {
        let raw = bytes(try count())
        // Decoding repairs invalid UTF-8; a repaired string differs from its bytes. (Cheaper than
        // `String(validating:as:)`, whose generic path costs a third of a read.)
        var string = String(decoding: raw, as: UTF8.self)
        let intact = string.withUTF8 { decoded in
            decoded.count == raw.count && (raw.isEmpty || memcmp(decoded.baseAddress!, raw.baseAddress!, raw.count) == 0)
        }
        guard intact else { throw CorruptBytes("a string is not valid UTF-8") }
        return string
    }

    mutating func value(depth: Int) throws(CorruptBytes) -> PropertyListValue {
        guard depth < BinaryCodec.maximumDecodingDepth else { throw CorruptBytes("values nest deeper than \(BinaryCodec.maximumDecodingDepth)") }
        let tagByte = try byte()
        guard let tag = BinaryCodec.Tag(rawValue: tagByte) else { throw CorruptBytes("unknown type tag \(tagByte)") }
        switch tag {
        case .string:
            return .string(try string())
        case .integer:
            let zigzag = try varint()
            return .integer(Int(Int64(bitPattern: (zigzag >> 1) ^ (0 &- (zigzag & 1)))))
        case .double:
            return .double(Double(bitPattern: try fixed64()))
        case .boolFalse:
            return .bool(false)
        case .boolTrue:
            return .bool(true)
        case .date:
            return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try fixed64())))
        case .data:
            return .data(Data(bytes(try count())))
        case .array:
            let n = try count()
            var array: [PropertyListValue] = []
            array.reserveCapacity(n)
            for _ in 0..<n { array.append(try value(depth: depth + 1)) }
            return .array(array)
        case .dictionary:
            let n = try count(unit: 2)
            var dictionary: [String: PropertyListValue] = [:]
            dictionary.reserveCapacity(n)
            for _ in 0..<n {
                let key = try string()
                guard dictionary.updateValue(try value(depth: depth + 1), forKey: key) == nil else {
                    throw CorruptBytes("a dictionary repeats the key \(key)")
                }
            }
            return .dictionary(dictionary)
        }
    }
}
