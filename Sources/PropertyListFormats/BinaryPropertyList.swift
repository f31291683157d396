import Foundation
import GroupDefaultsWire

/// Apple's binary property-list format, `bplist00`, written and read here.
///
/// Layout: the 8-byte magic, the objects, a table of each object's offset, and a 32-byte trailer
/// (offset and reference sizes, object count, top object, table offset), all big-endian. Objects
/// start with a marker byte, type in the high nibble: `0x08`/`0x09` false/true, `0x1n` an integer
/// of 2^n bytes (1, 2 and 4 bytes unsigned, 8 signed, 16 for values beyond `Int64`), `0x2n` a
/// real, `0x33` a date (seconds since 2001 as a double), `0x4n` data, `0x5n` ASCII and `0x6n`
/// UTF-16 strings, `0xAn` arrays and `0xDn` dictionaries of object references; a count of 15 or
/// more follows the marker as an integer object.
///
/// The reader checks every offset, count and reference against the data, refuses cycles, nesting
/// deeper than `PropertyListValue.maximumDecodingDepth`, and shared sub-objects that would expand to an
/// unreasonable number of values.
enum BinaryPropertyList {
    static let magic: [UInt8] = Array("bplist00".utf8)

    static func encode(_ value: PropertyListValue) -> [UInt8] {
        var writer = BinaryPlistWriter()
        _ = writer.add(value)
        return writer.finish()
    }

    /// A suite's entries, sorted, as the top object, a dictionary.
    static func encode(entries: [(key: String, value: PropertyListValue)]) -> [UInt8] {
        var writer = BinaryPlistWriter()
        _ = writer.add(entries: entries)
        return writer.finish()
    }

    static func decode(_ bytes: [UInt8], keepingTopLevelEntries: Bool = false) throws -> PropertyListTopLevel {
        var reader = try BinaryPlistReader(bytes, keepingTopLevelEntries: keepingTopLevelEntries)
        let value = try reader.topValue()
        return reader.topLevelEntries.map { .entries($0) } ?? .value(value)
    }

    /// The fewest of 1, 2, 4 or 8 bytes that hold `value`.
    static func byteWidth(_ value: UInt64) -> Int {
        value <= 0xFF ? 1 : value <= 0xFFFF ? 2 : value <= 0xFFFF_FFFF ? 4 : 8
    }
}

private struct BinaryPlistWriter {
    private enum Object {
        case scalar(PropertyListValue)
        case string(String)
        case array([Int])
        case dictionary(keys: [Int], values: [Int])
    }

    private var objects: [Object] = []
    /// Strings written once each (keys repeat); keyed by their UTF-8 bytes, not by `String`
    /// equality, which would merge canonically equivalent but different strings.
    private var strings: [[UInt8]: Int] = [:]

    /// Adds `value` and what it holds; returns its object number (the first is the top object).
    mutating func add(_ value: PropertyListValue) -> Int {
        switch value {
        case .string(let string):
            return add(string)
        case .array(let elements):
            let index = objects.count
            objects.append(.array([]))
            let references = elements.map { add($0) }
            objects[index] = .array(references)
            return index
        case .dictionary(let dictionary):
            return add(entries: dictionary.sortedForPropertyList)
        default:
            objects.append(.scalar(value))
            return objects.count - 1
        }
    }

    /// Adds a dictionary of `entries` (sorted) and what it holds; returns its object number.
    mutating func add(entries: [(key: String, value: PropertyListValue)]) -> Int {
        let index = objects.count
        objects.append(.array([]))
        let keys = entries.map { add($0.key) }
        let values = entries.map { add($0.value) }
        objects[index] = .dictionary(keys: keys, values: values)
        return index
    }

    private mutating func add(_ string: String) -> Int {
        let key = Array(string.utf8)
        if let index = strings[key] { return index }
        objects.append(.string(string))
        strings[key] = objects.count - 1
        return objects.count - 1
    }

    func finish() -> [UInt8] {
        let referenceSize = BinaryPropertyList.byteWidth(UInt64(objects.count - 1))
        var out = BinaryPropertyList.magic
        var offsets: [Int] = []
        offsets.reserveCapacity(objects.count)
        for object in objects {
            offsets.append(out.count)
            write(object, referenceSize: referenceSize, into: &out)
        }
        let tableOffset = out.count
        let offsetSize = BinaryPropertyList.byteWidth(UInt64(offsets.last ?? 0))
        for offset in offsets { appendUnsigned(UInt64(offset), width: offsetSize, to: &out) }
        out += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), UInt8(referenceSize)]
        appendUnsigned(UInt64(objects.count), width: 8, to: &out)
        appendUnsigned(0, width: 8, to: &out)
        appendUnsigned(UInt64(tableOffset), width: 8, to: &out)
        return out
    }

    private func write(_ object: Object, referenceSize: Int, into out: inout [UInt8]) {
        switch object {
        case .string(let string):
            if string.utf8.allSatisfy({ $0 < 0x80 }) {
                appendMarker(0x50, count: string.utf8.count, to: &out)
                out += string.utf8
            } else {
                appendMarker(0x60, count: string.utf16.count, to: &out)
                for unit in string.utf16 { appendUnsigned(UInt64(unit), width: 2, to: &out) }
            }
        case .array(let references):
            appendMarker(0xA0, count: references.count, to: &out)
            for reference in references { appendUnsigned(UInt64(reference), width: referenceSize, to: &out) }
        case .dictionary(let keys, let values):
            appendMarker(0xD0, count: keys.count, to: &out)
            for reference in keys + values { appendUnsigned(UInt64(reference), width: referenceSize, to: &out) }
        case .scalar(let value):
            switch value {
            case .integer(let int):
                appendInteger(int, to: &out)
            case .double(let double):
                out.append(0x23)
                appendUnsigned(double.bitPattern, width: 8, to: &out)
            case .bool(let bool):
                out.append(bool ? 0x09 : 0x08)
            case .date(let date):
                out.append(0x33)
                appendUnsigned(date.timeIntervalSinceReferenceDate.bitPattern, width: 8, to: &out)
            case .data(let data):
                appendMarker(0x40, count: data.count, to: &out)
                out += data
            case .string, .array, .dictionary:
                preconditionFailure("containers and strings are objects of their own")
            }
        }
    }

    private func appendMarker(_ type: UInt8, count: Int, to out: inout [UInt8]) {
        if count < 15 {
            out.append(type | UInt8(count))
        } else {
            out.append(type | 0x0F)
            appendInteger(count, to: &out)
        }
    }

    private func appendInteger(_ int: Int, to out: inout [UInt8]) {
        let width = int < 0 ? 8 : BinaryPropertyList.byteWidth(UInt64(int))
        out.append(0x10 | UInt8(width.trailingZeroBitCount))
        appendUnsigned(UInt64(bitPattern: Int64(int)), width: width, to: &out)
    }

    private func appendUnsigned(_ value: UInt64, width: Int, to out: inout [UInt8]) {
        for shift in stride(from: (width - 1) * 8, through: 0, by: -8) {
            out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift)))
        }
    }
}

private struct BinaryPlistReader {
    private let bytes: [UInt8]
    private let offsetSize: Int
    private let referenceSize: Int
    private let objectCount: Int
    private let topObject: Int
    private let tableOffset: Int
    /// Each object, once read: its value, its height (levels of nesting below it) and how many
    /// values it expands to. Shared sub-objects are read once; `inProgress` catches cycles.
    private var done: [Int: (value: PropertyListValue, height: Int, size: Int)] = [:]
    private var inProgress: Set<Int> = []
    /// At most this many values in all, however objects are shared (a 1 KB file could otherwise
    /// describe 2^100 values).
    private let sizeLimit: Int
    /// Whether a top-level dictionary is read as a suite's entries (`topLevelEntries`), whose keys
    /// may be canonically equivalent.
    private let keepingTopLevelEntries: Bool
    private(set) var topLevelEntries: [(key: String, value: PropertyListValue)]?

    init(_ bytes: [UInt8], keepingTopLevelEntries: Bool) throws {
        self.bytes = bytes
        self.keepingTopLevelEntries = keepingTopLevelEntries
        guard bytes.count >= BinaryPropertyList.magic.count + 1 + 1 + 32 else {
            throw PropertyListFormatError("binary property list: \(bytes.count) bytes are too few for the header, an object and the trailer")
        }
        let trailer = bytes.count - 32
        func field(_ at: Int) -> UInt64 {
            bytes[at..<(at + 8)].reduce(0) { $0 << 8 | UInt64($1) }
        }
        offsetSize = Int(bytes[trailer + 6])
        referenceSize = Int(bytes[trailer + 7])
        let count = field(trailer + 8)
        let top = field(trailer + 16)
        let table = field(trailer + 24)
        guard (1...8).contains(offsetSize), (1...8).contains(referenceSize) else {
            throw PropertyListFormatError("binary property list: bad trailer (offset size \(offsetSize), reference size \(referenceSize))")
        }
        guard table >= UInt64(BinaryPropertyList.magic.count + 1), table <= UInt64(trailer),
            count >= 1, count <= (UInt64(trailer) - table) / UInt64(offsetSize), top < count
        else {
            throw PropertyListFormatError(
                "binary property list: bad trailer (\(count) objects, top object \(top), offset table at \(table) in \(bytes.count) bytes)"
            )
        }
        objectCount = Int(count)
        topObject = Int(top)
        tableOffset = Int(table)
        sizeLimit = max(1 << 20, bytes.count * 16)
    }

    mutating func topValue() throws -> PropertyListValue {
        try value(topObject, depth: 0).value
    }

    private func failure(_ message: String, object: Int, offset: Int) -> PropertyListFormatError {
        PropertyListFormatError("binary property list: \(message) (object \(object) at byte \(offset))")
    }

    /// Checks that `length` bytes from `offset` lie before the offset table.
    private func checkRange(_ offset: Int, _ length: Int, object: Int) throws {
        guard offset >= 0, length >= 0, length <= tableOffset, offset <= tableOffset - length else {
            throw failure("runs past the end of the objects", object: object, offset: offset)
        }
    }

    /// `width` (at most 8) bytes at `offset` as a big-endian unsigned number.
    private func unsigned(at offset: Int, width: Int, object: Int) throws -> UInt64 {
        try checkRange(offset, width, object: object)
        return bytes[offset..<(offset + width)].reduce(0) { $0 << 8 | UInt64($1) }
    }

    private func offset(of object: Int) -> Int {
        let start = tableOffset + object * offsetSize
        return Int(truncatingIfNeeded: bytes[start..<(start + offsetSize)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }

    /// The count in a marker's low nibble, or the integer object after it when the nibble is 15;
    /// returns the count and where the object's contents start.
    private func count(marker: UInt8, at offset: Int, object: Int) throws -> (count: Int, start: Int) {
        let nibble = Int(marker & 0x0F)
        guard nibble == 0x0F else { return (nibble, offset + 1) }
        let intMarker = try unsigned(at: offset + 1, width: 1, object: object)
        guard intMarker & 0xF0 == 0x10, intMarker & 0x0F <= 3 else {
            throw failure("a count must be an integer object", object: object, offset: offset)
        }
        let width = 1 << Int(intMarker & 0x0F)
        let value = try unsigned(at: offset + 2, width: width, object: object)
        guard value <= UInt64(tableOffset) else { throw failure("count \(value) exceeds the data", object: object, offset: offset) }
        return (Int(value), offset + 2 + width)
    }

    private mutating func value(_ object: Int, depth: Int) throws -> (value: PropertyListValue, height: Int, size: Int) {
        guard object >= 0, object < objectCount else {
            throw PropertyListFormatError("binary property list: reference to object \(object) of \(objectCount)")
        }
        let offset = offset(of: object)
        guard depth < PropertyListValue.maximumDecodingDepth else {
            throw failure("values nest deeper than \(PropertyListValue.maximumDecodingDepth) levels", object: object, offset: offset)
        }
        if let known = done[object] {
            guard depth + known.height < PropertyListValue.maximumDecodingDepth else {
                throw failure("values nest deeper than \(PropertyListValue.maximumDecodingDepth) levels", object: object, offset: offset)
            }
            return known
        }
        guard !inProgress.contains(object) else { throw failure("the object contains itself", object: object, offset: offset) }
        guard offset >= BinaryPropertyList.magic.count, offset < tableOffset else {
            throw failure("offset outside the object area", object: object, offset: offset)
        }
        inProgress.insert(object)
        defer { inProgress.remove(object) }

        let result = try readObject(object, at: offset, depth: depth)
        done[object] = result
        return result
    }

    /// A value read from the objects, with its height and size (see `done`).
    private typealias Read = (value: PropertyListValue, height: Int, size: Int)

    /// Reads the object `object` at `offset`, by its marker's type.
    private mutating func readObject(_ object: Int, at offset: Int, depth: Int) throws -> Read {
        let marker = bytes[offset]
        switch marker >> 4 {
        case 0x0: return try boolean(marker, object: object, offset: offset)
        case 0x1: return try integer(marker, object: object, offset: offset)
        case 0x2: return try real(marker, object: object, offset: offset)
        case 0x3: return try date(marker, object: object, offset: offset)
        case 0x4: return try data(marker, object: object, offset: offset)
        case 0x5, 0x7: return try string(marker, object: object, offset: offset)
        case 0x6: return try utf16String(marker, object: object, offset: offset)
        case 0xA: return try array(marker, object: object, offset: offset, depth: depth)
        case 0xD: return try dictionary(marker, object: object, offset: offset, depth: depth)
        case 0x8:
            throw failure("a UID (keyed-archiver reference) is not a property-list value", object: object, offset: offset)
        case 0xB, 0xC:
            throw failure("a set is not a property-list value", object: object, offset: offset)
        default:
            throw failure("unknown marker 0x\(String(marker, radix: 16))", object: object, offset: offset)
        }
    }

    /// `0x08`, `0x09`: false, true (`0x00`, null, is no property-list value).
    private func boolean(_ marker: UInt8, object: Int, offset: Int) throws -> Read {
        switch marker {
        case 0x08: return (.bool(false), 0, 1)
        case 0x09: return (.bool(true), 0, 1)
        case 0x00: throw failure("null is not a property-list value", object: object, offset: offset)
        default: throw failure("unknown marker 0x\(String(marker, radix: 16))", object: object, offset: offset)
        }
    }

    /// `0x1n`: an integer of 2^n bytes, within 64 bits signed.
    private func integer(_ marker: UInt8, object: Int, offset: Int) throws -> Read {
        let exponent = Int(marker & 0x0F)
        guard exponent <= 4 else { throw failure("bad integer size", object: object, offset: offset) }
        let width = 1 << exponent
        let int: Int?
        if width == 16 {
            let high = try unsigned(at: offset + 1, width: 8, object: object)
            let low = try unsigned(at: offset + 9, width: 8, object: object)
            let fitsPositive = high == 0 && low <= UInt64(Int64.max)
            let fitsNegative = high == UInt64.max && low > UInt64(Int64.max)
            int = fitsPositive || fitsNegative ? Int(truncatingIfNeeded: Int64(bitPattern: low)) : nil
        } else {
            let raw = try unsigned(at: offset + 1, width: width, object: object)
            int = width == 8 ? Int(truncatingIfNeeded: Int64(bitPattern: raw)) : Int(raw)
        }
        guard let int else { throw failure("integer outside the 64-bit signed range", object: object, offset: offset) }
        return (.integer(int), 0, 1)
    }

    /// `0x22`, `0x23`: a 4- or 8-byte real.
    private func real(_ marker: UInt8, object: Int, offset: Int) throws -> Read {
        switch marker & 0x0F {
        case 2: return (.double(Double(Float(bitPattern: UInt32(try unsigned(at: offset + 1, width: 4, object: object))))), 0, 1)
        case 3: return (.double(Double(bitPattern: try unsigned(at: offset + 1, width: 8, object: object))), 0, 1)
        default: throw failure("bad real size", object: object, offset: offset)
        }
    }

    /// `0x33`: a date, seconds since 2001 as a double.
    private func date(_ marker: UInt8, object: Int, offset: Int) throws -> Read {
        guard marker == 0x33 else { throw failure("bad date marker", object: object, offset: offset) }
        let seconds = Double(bitPattern: try unsigned(at: offset + 1, width: 8, object: object))
        return (.date(Date(timeIntervalSinceReferenceDate: seconds)), 0, 1)
    }

    /// `0x4n`: data.
    private func data(_ marker: UInt8, object: Int, offset: Int) throws -> Read {
        let (count, start) = try count(marker: marker, at: offset, object: object)
        try checkRange(start, count, object: object)
        return (.data(Data(bytes[start..<(start + count)])), 0, 1)
    }

    /// `0x5n` (ASCII) and `0x7n` (UTF-8): a string of bytes.
    private func string(_ marker: UInt8, object: Int, offset: Int) throws -> Read {
        let (count, start) = try count(marker: marker, at: offset, object: object)
        try checkRange(start, count, object: object)
        let slice = bytes[start..<(start + count)]
        if marker >> 4 == 0x5, let bad = slice.firstIndex(where: { $0 >= 0x80 }) {
            throw failure("ASCII string holds the byte 0x\(String(bytes[bad], radix: 16))", object: object, offset: offset)
        }
        guard let string = String(validating: slice, as: UTF8.self) else {
            throw failure("string is not valid UTF-8", object: object, offset: offset)
        }
        return (.string(string), 0, 1)
    }

    /// `0x6n`: a UTF-16 string, big-endian.
    private func utf16String(_ marker: UInt8, object: Int, offset: Int) throws -> Read {
        let (count, start) = try count(marker: marker, at: offset, object: object)
        guard count <= tableOffset / 2 else { throw failure("string runs past the end of the objects", object: object, offset: offset) }
        try checkRange(start, count * 2, object: object)
        let units = (0..<count).map { UInt16(bytes[start + 2 * $0]) << 8 | UInt16(bytes[start + 2 * $0 + 1]) }
        guard let string = String(validating: units, as: UTF16.self) else {
            throw failure("UTF-16 string holds an unpaired surrogate", object: object, offset: offset)
        }
        return (.string(string), 0, 1)
    }

    /// `0xAn`: an array of object references.
    private mutating func array(_ marker: UInt8, object: Int, offset: Int, depth: Int) throws -> Read {
        let (count, start) = try count(marker: marker, at: offset, object: object)
        let references = try self.references(count, at: start, object: object)
        var elements: [PropertyListValue] = []
        elements.reserveCapacity(count)
        var height = 0
        var size = 1
        for reference in references {
            let element = try value(reference, depth: depth + 1)
            elements.append(element.value)
            height = max(height, element.height + 1)
            size += element.size
            guard size <= sizeLimit else {
                throw failure("shared objects expand to more than \(sizeLimit) values", object: object, offset: offset)
            }
        }
        return (.array(elements), height, size)
    }

    /// `0xDn`: a dictionary, its keys' references then its values'.
    private mutating func dictionary(_ marker: UInt8, object: Int, offset: Int, depth: Int) throws -> Read {
        let (count, start) = try count(marker: marker, at: offset, object: object)
        let references = try self.references(count * 2, at: start, object: object)
        var dictionary = DictionaryEntries()
        var height = 0
        var size = 1
        for index in 0..<count {
            guard case .string(let key) = try value(references[index], depth: depth + 1).value else {
                throw failure("dictionary key \(index) is not a string", object: object, offset: offset)
            }
            let element = try value(references[count + index], depth: depth + 1)
            guard dictionary.append(key, element.value) else {
                throw failure("duplicate key \"\(key)\"", object: object, offset: offset)
            }
            height = max(height, element.height + 1)
            size += element.size
            guard size <= sizeLimit else {
                throw failure("shared objects expand to more than \(sizeLimit) values", object: object, offset: offset)
            }
        }
        if depth == 0, object == topObject, keepingTopLevelEntries {
            // A suite's keys: every one kept, canonically equivalent or not.
            topLevelEntries = dictionary.entries
            return (.dictionary([:]), height, size)
        }
        return (.dictionary(try dictionary.dictionary { failure($0, object: object, offset: offset) }), height, size)
    }

    private func references(_ count: Int, at start: Int, object: Int) throws -> [Int] {
        guard count <= tableOffset / referenceSize else {
            throw failure("\(count) references run past the end of the objects", object: object, offset: start)
        }
        try checkRange(start, count * referenceSize, object: object)
        return (0..<count).map { index in
            let at = start + index * referenceSize
            return Int(truncatingIfNeeded: bytes[at..<(at + referenceSize)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        }
    }
}
