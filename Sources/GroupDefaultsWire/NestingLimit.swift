/// How deeply a value may nest arrays and dictionaries: one limit for the store, the wire and the
/// server.
///
/// Typed JSON spends two JSON levels on each array or dictionary (`{"array":[…]}`), and the answers
/// that carry a value wrap it in a few more (a page, its entries, an entry, an event). JSON readers
/// stop at 512 levels (Foundation's `JSONDecoder` among them), so a value much deeper than 250 would
/// be stored once and then fail every read of its suite. 100 leaves that path a wide margin, and no
/// setting needs more.
extension PropertyListValue {
    /// The deepest nesting a value may have: an array or dictionary of plain values is 1 deep, one
    /// holding such an array 2, and so on. Deeper values are refused where they enter: `set`
    /// (`unsupportedValue`), a sync engine's push (set aside) and a server's push (422
    /// `value_too_deep`). Decoding stays lenient, so that a store reads back what an older version
    /// wrote; a server serves a stored value deeper than this as unavailable (`StoredValueCheck`),
    /// and a device refuses one it receives (`SyncEntry.unavailable`), that key alone.
    public static let maximumNestingDepth = 100

    /// The decoders' guard against the stack (512): nesting deeper than this is refused when bytes
    /// are decoded (a stored value, a property-list file), because recursion that deep would
    /// exhaust the stack. It guards against damaged or hostile bytes and is not the limit of a
    /// value, which is `PropertyListValue.maximumNestingDepth` (100, refused where a value
    /// enters): a value deeper than that which an older version stored still reads back.
    package static let maximumDecodingDepth = 512

    /// Whether `value` (found at `depth`) nests shallowly enough to be decoded again
    /// (`maximumDecodingDepth`).
    package static func fitsDecodingDepth(_ value: PropertyListValue, depth: Int = 0) -> Bool {
        guard depth < maximumDecodingDepth else { return false }
        switch value {
        case .array(let elements): return elements.allSatisfy { fitsDecodingDepth($0, depth: depth + 1) }
        case .dictionary(let elements): return elements.values.allSatisfy { fitsDecodingDepth($0, depth: depth + 1) }
        default: return true
        }
    }

    /// How deeply the value nests arrays and dictionaries: 0 for a plain value, 1 for an array or
    /// dictionary of plain values, and so on. Stops counting past `maximumNestingDepth + 1`, so a
    /// hostile value costs no more than a legal one.
    public var nestingDepth: Int { depth(limit: Self.maximumNestingDepth + 1) }

    /// Whether the value nests no deeper than `maximumNestingDepth`.
    public var fitsNestingLimit: Bool { nestingDepth <= Self.maximumNestingDepth }

    private func depth(limit: Int) -> Int {
        func deepest(_ children: some Sequence<PropertyListValue>) -> Int {
            var deepest = 0
            for child in children where deepest < limit - 1 { deepest = max(deepest, child.depth(limit: limit - 1)) }
            return deepest + 1
        }
        guard limit > 0 else { return 0 }
        switch self {
        case .array(let elements): return deepest(elements)
        case .dictionary(let elements): return deepest(elements.values)
        default: return 0
        }
    }
}
