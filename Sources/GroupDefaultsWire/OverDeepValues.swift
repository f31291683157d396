/// A device's guard against a server that serves a value nested too deeply (an older server, or one
/// that does not check what it stores): before an answer or event is decoded, each entry's `"value"`
/// deeper than a legal value can be is replaced by `"unavailable":"too_deep"`, so that the one key
/// is refused (`UnavailableValue`) and the rest of the page decodes. JSON readers stop at 512
/// levels, and Foundation's decoder fails the whole document at the first value past them.
///
/// A value's typed JSON takes two levels per array or dictionary and one for the innermost value,
/// so one within `PropertyListValue.maximumNestingDepth` takes at most 201: a member `"value"`
/// (the outermost one, an entry's) whose JSON goes deeper is replaced. A document without one is
/// returned as it is.
package enum OverDeepValues {
    /// The JSON levels the typed JSON of a value within the nesting limit may take.
    static let maximumLevels = 2 * PropertyListValue.maximumNestingDepth + 1

    private static let valueName = Array("\"value\"".utf8)
    private static let replacement = Array("\"unavailable\":\"too_deep\"".utf8)

    /// `json` with every over-deep entry value replaced; `json` itself when there is none.
    package static func replaced(in json: [UInt8]) -> [UInt8] {
        json.withUnsafeBufferPointer { bytes in
            var output: [UInt8]? = nil
            var copied = 0
            var depth = 0
            // The level of the outermost container that is a member "value"'s, and where that member's name starts.
            var valueLevel: Int? = nil
            var valueNameStart = 0
            var lastString: Range<Int>? = nil
            var afterValueColon = false
            var nameStart = 0
            var index = 0
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
                    if let name = lastString, bytes[name].elementsEqual(valueName) {
                        afterValueColon = true
                        nameStart = name.lowerBound
                    }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    if afterValueColon, valueLevel == nil {
                        valueLevel = depth
                        valueNameStart = nameStart
                    }
                    afterValueColon = false
                    if let level = valueLevel, depth - level + 1 > maximumLevels {
                        let end = endOfContainer(bytes, from: index + 1, depth: depth - level + 1)
                        output = (output ?? []) + bytes[copied..<valueNameStart] + replacement
                        copied = end
                        index = end
                        depth = level - 1
                        valueLevel = nil
                        continue
                    }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    if depth == valueLevel { valueLevel = nil }
                    depth -= 1
                case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                    break
                default:
                    afterValueColon = false
                }
                index += 1
            }
            guard let output else { return json }
            return output + bytes[copied...]
        }
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
