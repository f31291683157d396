import Foundation
import GroupDefaultsWire
import Hummingbird

/// Every limit a push must meet before storage sees it, checked in this one place (storage checks
/// the quotas, which depend on what it holds). Throws the `APIError` the client gets.
enum PushValidation {
    static let maximumBatchIDBytes = 255

    /// A key of a push or of a history request: 1 to `maxKeyBytes` bytes of UTF-8.
    static func checkKey(_ key: String, limits: SyncLimits) throws {
        let keyBytes = key.utf8.count
        if keyBytes == 0 { throw APIError.malformed("a key must not be empty") }
        if keyBytes > limits.maxKeyBytes {
            throw APIError(.keyTooLong, "a key takes at most \(limits.maxKeyBytes) bytes, this one \(keyBytes)",
                           key: String(key.prefix(64)), limit: limits.maxKeyBytes)
        }
    }

    /// Checks `request` and prepares it for storage (each value encoded once, as typed JSON: the
    /// bytes measured here are the bytes stored).
    static func prepare(_ request: PushRequest, limits: SyncLimits, now milliseconds: UInt64 = HLC.wallClockMilliseconds()) throws -> PreparedPush {
        if request.ops.count > limits.maxOpsPerBatch {
            throw APIError(.batchTooLarge,
                           "a batch holds at most \(limits.maxOpsPerBatch) ops, this one \(request.ops.count)", limit: limits.maxOpsPerBatch)
        }
        let batchBytes = request.batchID.utf8.count
        if batchBytes == 0 || batchBytes > maximumBatchIDBytes {
            throw APIError.malformed("batch_id must take 1 to \(maximumBatchIDBytes) bytes")
        }
        for op in request.ops { try checkKey(op.key, limits: limits) }
        let prepared = try PreparedPush(request)
        for (op, json) in zip(request.ops, prepared.valueJSON) {
            if let sealed = op.sealed, sealed.box.count > limits.maxValueBytes {
                throw APIError(.valueTooLarge,
                               "the sealed value of '\(op.key)' takes \(sealed.box.count) bytes, more than \(limits.maxValueBytes)",
                               key: op.key, limit: limits.maxValueBytes)
            }
            if let json, json.count > limits.maxValueBytes {
                throw APIError(.valueTooLarge,
                               "the value of '\(op.key)' takes \(json.count) bytes as typed JSON, more than \(limits.maxValueBytes)",
                               key: op.key, limit: limits.maxValueBytes)
            }
            if op.hlc.milliseconds > milliseconds &+ limits.maxClockSkewMilliseconds {
                throw APIError(.clockSkew,
                               "the HLC of '\(op.key)' is more than \(limits.maxClockSkewMilliseconds) ms ahead of the server's clock",
                               key: op.key, serverTime: TypedJSONDate.format(milliseconds: milliseconds))
            }
        }
        return prepared
    }
}
