import Foundation

/// What a JSON reader would get wrong in an entry's or op's `"value"`, found in the bytes before
/// they are decoded: a value nested deeper than a legal value can be (JSON readers stop at 512
/// levels, and Foundation's decoder fails the whole document at the first value past them), and a
/// dictionary holding two keys Swift's `String ==` takes for one (the same key twice, or two
/// canonically equivalent ones, `"é"` and `"e\u{301}"`), which Foundation's decoder silently merges
/// into one. A device reads such an entry as unavailable (`replaced(in:)`: that key alone is
/// refused, `UnavailableValue`, and the rest of the page decodes); the server refuses such an op
/// of a push on its own (`found(in:)`, `PushValidation`).
///
/// A value's typed JSON takes two levels per array or dictionary and one for the innermost value,
/// so one within `PropertyListValue.maximumNestingDepth` takes at most 201: a member `"value"`
/// (the outermost one, an entry's or an op's) whose JSON goes deeper is too deep. A document
/// without either is returned as it is.
package enum OverDeepValues {
    /// The JSON levels the typed JSON of a value within the nesting limit may take.
    static let maximumLevels = 2 * PropertyListValue.maximumNestingDepth + 1

    private static let valueName = Array("\"value\"".utf8)

    /// A `"value"` member a JSON reader would get wrong.
    package struct Found: Sendable, Hashable {
        /// The member's bytes, from its name to the end of its value.
        package var range: Range<Int>
        /// Where the member's object stands in the innermost array around it (an op's index in a
        /// push's `ops`, an entry's in a page's `entries`); nil outside any array (an event's entry).
        package var index: Int?
        /// `tooDeep`, or `damaged` for two keys that are one to Swift.
        package var reason: UnavailableValue
        /// What is wrong, for a person: "holds a dictionary with the keys "é" (U+00E9) and "é"
        /// (U+0065 U+0301), one key to Swift (canonically equivalent)".
        package var detail: String
    }

    /// `json` with every `"value"` member found (`found(in:)`) replaced by
    /// `"unavailable":"REASON"`; `json` itself when there is none.
    package static func replaced(in json: [UInt8]) -> [UInt8] {
        let found = found(in: json)
        guard !found.isEmpty else { return json }
        var output: [UInt8] = []
        output.reserveCapacity(json.count)
        var copied = 0
        for member in found {
            output += json[copied..<member.range.lowerBound]
            output += Array("\"unavailable\":\"\(member.reason.rawValue)\"".utf8)
            copied = member.range.upperBound
        }
        return output + json[copied...]
    }

    /// One open array or object of the document.
    private enum Container {
        /// An array, with the index of the element being read.
        case array(Int)
        /// An object; inside a value, the keys read so far.
        case object(Set<String>?)
    }

    /// Every `"value"` member (the outermost ones: an entry's, an op's) too deep or holding a
    /// dictionary with two keys that are one to Swift, in document order.
    package static func found(in json: [UInt8]) -> [Found] {
        json.withUnsafeBufferPointer { bytes in
            var found: [Found] = []
            var containers: [Container] = []
            // The level of the outermost container that is a member "value"'s, where that member's
            // name starts, and its object's index in the array around it.
            var valueLevel: Int? = nil
            var valueNameStart = 0
            var valueIndex: Int? = nil
            var lastString: Range<Int>? = nil
            var afterValueColon = false
            var nameStart = 0
            var index = 0
            /// Ends the value being read at `index` (inside it, `open` levels deep) as `reason`.
            func skipValue(_ reason: UnavailableValue, _ detail: String, open: Int) {
                let end = endOfContainer(bytes, from: index + 1, depth: open)
                found.append(Found(range: valueNameStart..<end, index: valueIndex, reason: reason, detail: detail))
                index = end
                containers.removeLast(open)
                valueLevel = nil
            }
            while index < bytes.count {
                let byte = bytes[index]
                switch byte {
                case UInt8(ascii: "\""):
                    let start = index
                    index = endOfString(bytes, from: index + 1)
                    lastString = start..<index
                    afterValueColon = false
                    continue
                case UInt8(ascii: ":"):
                    if let name = lastString, valueLevel != nil, case .object(var keys?) = containers.last {
                        // A key of an object inside a value: once per object, as Swift compares.
                        if let key = text(bytes[name]) {
                            let (inserted, earlier) = keys.insert(key)
                            guard inserted else {
                                skipValue(.damaged, EquivalentKeys.words(earlier, key), open: containers.count - valueLevel! + 1)
                                continue
                            }
                            containers[containers.count - 1] = .object(keys)
                        }
                    } else if let name = lastString, bytes[name].elementsEqual(valueName) {
                        afterValueColon = true
                        nameStart = name.lowerBound
                    }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    if afterValueColon, valueLevel == nil {
                        valueLevel = containers.count + 1
                        valueNameStart = nameStart
                        valueIndex = nil
                        for case .array(let at) in containers.reversed() {
                            valueIndex = at
                            break
                        }
                    }
                    afterValueColon = false
                    containers.append(byte == UInt8(ascii: "[") ? .array(0) : .object(valueLevel == nil ? nil : []))
                    if let level = valueLevel, containers.count - level + 1 > maximumLevels {
                        skipValue(
                            .tooDeep,
                            "nests arrays and dictionaries more than \(PropertyListValue.maximumNestingDepth) levels deep",
                            open: containers.count - level + 1
                        )
                        continue
                    }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if containers.count == valueLevel { valueLevel = nil }
                    if !containers.isEmpty { containers.removeLast() }
                case UInt8(ascii: ","):
                    if case .array(let at) = containers.last { containers[containers.count - 1] = .array(at + 1) }
                    afterValueColon = false
                case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                    break
                default:
                    afterValueColon = false
                }
                index += 1
            }
            return found
        }
    }

    /// The text of the JSON string `json` (quotes included), its escapes resolved; nil if it has
    /// none a reader takes (a lone surrogate: the value is refused when it is decoded).
    private static func text(_ json: Slice<UnsafeBufferPointer<UInt8>>) -> String? {
        let inner = json.dropFirst().dropLast()
        guard inner.contains(UInt8(ascii: "\\")) else { return String(decoding: inner, as: UTF8.self) }
        return try? JSONDecoder().decode(String.self, from: Data(json))
    }

    /// The index after the string whose text starts at `start` (after its opening quote).
    private static func endOfString(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        var index = start
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\\"): index += 2
            case UInt8(ascii: "\""): return index + 1
            default: index += 1
            }
        }
        return bytes.count
    }

    /// The index after the bracket that closes the `open` containers open at `start`.
    private static func endOfContainer(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int, depth open: Int) -> Int {
        var open = open
        var index = start
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "\""):
                index = endOfString(bytes, from: index + 1)
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["): open += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                open -= 1
                if open == 0 { return index + 1 }
            default: break
            }
            index += 1
        }
        return bytes.count
    }
}
