/// Two keys of one dictionary inside a value that Swift's `String ==` takes for one (the same key
/// twice, or canonically equivalent: `"é"` and `"e\u{301}"`). A `[String: PropertyListValue]` can
/// hold only one of them, so a value holding both is refused where it enters (`set`, a server's
/// push, a device's pull), never merged.
package enum EquivalentKeys {
    /// Why a dictionary cannot hold both `first` and `second`, in words: "holds a dictionary with
    /// the keys "é" (U+00E9) and "é" (U+0065 U+0301), one key to Swift (canonically equivalent): a
    /// dictionary inside a value cannot hold both".
    package static func words(_ first: String, _ second: String) -> String {
        let how = first.utf8.elementsEqual(second.utf8) ? "twice" : "canonically equivalent"
        return "holds a dictionary with the keys \(shown(first)) and \(shown(second)), one key to Swift (\(how)): "
            + "a dictionary inside a value cannot hold both"
    }

    /// `"é" (U+00E9)`: the key (its first 64 characters, printable) and its first 12 scalars.
    private static func shown(_ key: String) -> String {
        var scalars = key.unicodeScalars.prefix(12).map {
            let hex = String($0.value, radix: 16, uppercase: true)
            return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        }
        if key.unicodeScalars.count > 12 { scalars.append("…") }
        return "\"\(printable(String(key.prefix(64))))\" (\(scalars.joined(separator: " ")))"
    }
}
