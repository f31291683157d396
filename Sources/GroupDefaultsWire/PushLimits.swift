/// A change that a push may not carry under a server's `SyncLimits`: the code a server answers
/// it with, a sentence for a person (it names no key: the caller adds it), the limit, and
/// whether the server refuses the whole push for it or that op alone.
public struct PushLimitBreach: Sendable, Hashable {
    /// The error code (`key_too_long`, `value_too_deep`, `value_too_large`, `malformed`).
    public let code: SyncErrorCode
    /// What is wrong, for a person.
    public let message: String
    /// The limit it broke, where there is one.
    public let limit: Int?
    /// True when a server refuses the whole push for it (the key, the nesting); false when it
    /// refuses that op alone (the value's size) and applies the others.
    public let refusesBatch: Bool
}

extension SyncLimits {
    /// What a push may carry, once for the server's validation and a device's batches: the op's
    /// key takes 1 to `maxKeyBytes` bytes of UTF-8; its value nests no deeper than
    /// `PropertyListValue.maximumNestingDepth` (checked on the value itself: a sealed op carries
    /// it opaque, and every device must read it); a sealed box, or the value's typed JSON
    /// (`valueJSONBytes`, when the caller has measured it), takes at most `maxValueBytes`. Nil
    /// when the op keeps every limit. What the server checks besides (a key's characters, the
    /// stamp against its clock, the batch's count and body) depends on the server, not the op.
    public func breach(key: String, value: PropertyListValue?, sealedBytes: Int?, valueJSONBytes: Int?) -> PushLimitBreach? {
        let keyBytes = key.utf8.count
        if keyBytes == 0 {
            return PushLimitBreach(code: .malformed, message: "a key must not be empty", limit: nil, refusesBatch: true)
        }
        if keyBytes > maxKeyBytes {
            return PushLimitBreach(
                code: .keyTooLong,
                message: "the key takes \(keyBytes) bytes, more than \(maxKeyBytes)",
                limit: maxKeyBytes,
                refusesBatch: true
            )
        }
        if let value, !value.fitsNestingLimit {
            return PushLimitBreach(
                code: .valueTooDeep,
                message: "the value nests arrays and dictionaries more than \(PropertyListValue.maximumNestingDepth) levels deep",
                limit: PropertyListValue.maximumNestingDepth,
                refusesBatch: true
            )
        }
        if let sealedBytes, sealedBytes > maxValueBytes {
            return PushLimitBreach(
                code: .valueTooLarge,
                message: "the sealed value takes \(sealedBytes) bytes, more than \(maxValueBytes)",
                limit: maxValueBytes,
                refusesBatch: false
            )
        }
        if let valueJSONBytes, valueJSONBytes > maxValueBytes {
            return PushLimitBreach(
                code: .valueTooLarge,
                message: "the value takes \(valueJSONBytes) bytes as typed JSON, more than \(maxValueBytes)",
                limit: maxValueBytes,
                refusesBatch: false
            )
        }
        return nil
    }
}
