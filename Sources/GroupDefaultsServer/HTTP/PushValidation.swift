import Foundation
import GroupDefaultsWire
import Hummingbird

/// Every limit a push must meet before storage sees it, checked in this one place (storage checks
/// the quotas, which depend on what it holds). Throws the `APIError` the client gets.
enum PushValidation {
    static let maximumBatchIDBytes = 255

    /// A key of a push or of a history request: 1 to `maxKeyBytes` bytes of UTF-8
    /// (`SyncLimits.breach`, the rule devices follow too).
    static func checkKey(_ key: String, limits: SyncLimits) throws {
        if let breach = limits.breach(key: key, value: nil, sealedBytes: nil, valueJSONBytes: nil) { throw APIError(breach, key: key) }
    }

    /// Checks `request` and prepares it for storage (each value encoded once, as typed JSON: the
    /// bytes measured here are the bytes stored).
    ///
    /// What breaks a rule of the batch (its size, its id, a key that cannot be stored, a value nested
    /// too deeply) refuses the whole push. What breaks a rule of one op's own value or stamp (`value_too_large`,
    /// `clock_skew`; `malformed` for a value holding a dictionary with two keys that are one to
    /// Swift, which decoding merged: found in the body's bytes `json`, `OverDeepValues`) refuses that
    /// op alone (`PreparedPush.refusals`): the others are applied.
    static func prepare(
        _ request: PushRequest,
        json: [UInt8],
        limits: SyncLimits,
        now milliseconds: UInt64 = HLC.wallClockMilliseconds()
    ) throws -> PreparedPush {
        if request.ops.count > limits.maxOpsPerBatch {
            throw APIError(
                .batchTooLarge,
                "a batch holds at most \(limits.maxOpsPerBatch) ops, this one \(request.ops.count)",
                limit: limits.maxOpsPerBatch
            )
        }
        let batchBytes = request.batchID.utf8.count
        if batchBytes == 0 || batchBytes > maximumBatchIDBytes {
            throw APIError.malformed("batch_id must take 1 to \(maximumBatchIDBytes) bytes")
        }
        // What breaks a rule of the batch (`SyncLimits.breach`: the key, the nesting) refuses it all.
        for op in request.ops {
            if let breach = limits.breach(key: op.key, value: op.value, sealedBytes: nil, valueJSONBytes: nil), breach.refusesBatch {
                throw APIError(breach, key: op.key)
            }
        }
        var prepared = try PreparedPush(request)
        prepared.clock = PreparedPush.Clock(now: milliseconds, maximumSkew: limits.maxClockSkewMilliseconds)
        prepared.valueLimit = limits.maxValueBytes
        for (index, (op, json)) in zip(request.ops, prepared.valueJSON).enumerated() {
            prepared.refusals[index] = refusal(of: op, json: json, limits: limits, now: milliseconds)
        }
        // Two keys decoding merged into one: that op is refused, never stored with one of them.
        for merged in OverDeepValues.found(in: json) where merged.reason == .damaged {
            guard let index = merged.index, request.ops.indices.contains(index), request.ops[index].value != nil else {
                throw APIError.malformed("a value \(merged.detail)")
            }
            prepared.refusals[index] = OpRefusal(.malformed, "the value of '\(request.ops[index].key.prefix(64))' \(merged.detail)")
        }
        return prepared
    }

    /// Why `op` is refused on its own, if it is.
    private static func refusal(of op: PushOp, json: [UInt8]?, limits: SyncLimits, now milliseconds: UInt64) -> OpRefusal? {
        // A new key holds no control character (`NameKind.key`); one stored before that rule is
        // still read, and refused here alone so that the device's other changes go through.
        if op.sealed == nil, let problem = NameKind.key.problem(with: op.key) { return OpRefusal(.malformed, problem) }
        if let breach = limits.breach(key: op.key, value: op.value, sealedBytes: op.sealed?.box.count, valueJSONBytes: json?.count) {
            return OpRefusal(breach.code, breach.message)
        }
        if op.hlc.isAhead(of: milliseconds, by: limits.maxClockSkewMilliseconds) {
            let ahead = (op.hlc.milliseconds - milliseconds) / 1000
            return OpRefusal(
                .clockSkew,
                """
                the HLC is \(ahead) s ahead of the server's clock (\(TypedJSONDate.format(milliseconds: milliseconds))); \
                at most \(limits.maxClockSkewMilliseconds / 1000) s are accepted: the writing device's clock is wrong
                """
            )
        }
        return nil
    }
}

extension APIError {
    /// The answer to a push that breaks `breach`, naming the key (its first 64 characters).
    init(_ breach: PushLimitBreach, key: String) {
        if key.isEmpty {
            self.init(breach.code, breach.message, limit: breach.limit)
        } else {
            self.init(breach.code, "'\(key.prefix(64))': \(breach.message)", key: String(key.prefix(64)), limit: breach.limit)
        }
    }
}
