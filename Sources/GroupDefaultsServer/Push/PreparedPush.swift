import Crypto
import Foundation
package import GroupDefaultsWire

/// A push as storage takes it: the request, each op's value encoded once as typed JSON (the bytes
/// that are measured against the limits, stored and counted against the quota), and the digest
/// that makes a retried batch "the same ops".
package struct PreparedPush: Sendable {
    /// The request as it arrived.
    package let request: PushRequest
    /// Per op, in order: the value's typed JSON, or nil for a deletion.
    package let valueJSON: [[UInt8]?]
    /// SHA-256 over every op's key, HLC, deletion flag and typed JSON (or epoch and sealed bytes),
    /// length-prefixed.
    package let digest: [UInt8]
    /// The key epochs of a sealed push (every op sealed), lowest and highest; nil for a plain push.
    package let epochs: ClosedRange<UInt32>?
    /// Per op, in order: why it is refused on its own (`PushValidation`), or nil. A refused op is
    /// answered `refused` and the others are applied as if it were not there: one bad op never
    /// stops a batch.
    package var refusals: [OpRefusal?]
    /// The server's clock when the push was checked, and how far ahead of it a stamp may be
    /// (`SyncLimits.maxClockSkewMilliseconds`): a held entry stamped further ahead came from a
    /// wrong clock (`PushStep`).
    package var clock = Clock(now: HLC.wallClockMilliseconds(), maximumSkew: HLC.maximumDrift)
    /// The member account pushing to a suite it shares (`SyncEntry.account`); nil for the owner.
    package var account: String?
    /// Who the push was authorized as, checked again inside its write transaction; nil for a push
    /// the server makes itself (`ClockRepair`).
    package var authority: PushAuthority?
    /// The server's value limit (`SyncLimits.maxValueBytes`), against which a held entry that wins
    /// over an op is checked before the answer carries it (`StoredEntry.servedEntry(valueLimit:)`).
    package var valueLimit = SyncLimits().maxValueBytes

    /// A clock reading and the skew allowed around it.
    package struct Clock: Sendable, Hashable {
        package var now: UInt64
        package var maximumSkew: UInt64

        package init(now: UInt64, maximumSkew: UInt64) {
            self.now = now
            self.maximumSkew = maximumSkew
        }
    }

    /// Encodes each value once and computes the digest.
    ///
    /// - Throws: `SyncStorageError` `malformed` if a value cannot be written as typed JSON (a date
    ///   outside years 0 to 9999), or if the batch mixes sealed and plain ops.
    package init(_ request: PushRequest) throws(SyncStorageError) {
        self.request = request
        var values: [[UInt8]?] = []
        values.reserveCapacity(request.ops.count)
        var hash = SHA256()
        func add(_ bytes: some Collection<UInt8>) {
            hash.update(data: withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { Data($0) })
            hash.update(data: Data(bytes))
        }
        var epochs: ClosedRange<UInt32>?
        let sealedCount = request.ops.count { $0.sealed != nil }
        guard sealedCount == 0 || sealedCount == request.ops.count else {
            throw SyncStorageError(.malformed, "a batch is all sealed ops or all plain ops")
        }
        for op in request.ops {
            add(op.key.utf8)
            add(withUnsafeBytes(of: op.hlc.rawValue.bigEndian) { Array($0) })
            if let sealed = op.sealed {
                values.append(nil)
                epochs = min(epochs?.lowerBound ?? sealed.epoch, sealed.epoch)...max(epochs?.upperBound ?? sealed.epoch, sealed.epoch)
                add([op.isDeleted ? 3 : 2] + withUnsafeBytes(of: sealed.epoch.bigEndian) { Array($0) } + sealed.box)
                if let origin = op.origin { add(withUnsafeBytes(of: origin.bigEndian) { Array($0) }) }
                continue
            }
            let json: [UInt8]?
            do { json = try op.value?.typedJSON() } catch {
                throw SyncStorageError(.malformed, "the value of '\(op.key)' cannot be written as typed JSON: \(error)")
            }
            values.append(json)
            add(json.map { [1] + $0 } ?? [0])
        }
        valueJSON = values
        refusals = Array(repeating: nil, count: request.ops.count)
        self.epochs = epochs
        digest = Array(hash.finalize())
    }
}

/// Why the server refuses one op of a push while it applies the others: the op's own value or
/// stamp breaks a limit (`value_too_large`, `clock_skew`).
package struct OpRefusal: Sendable, Hashable {
    package var code: SyncErrorCode
    package var detail: String

    package init(_ code: SyncErrorCode, _ detail: String) {
        self.code = code
        self.detail = detail
    }
}
