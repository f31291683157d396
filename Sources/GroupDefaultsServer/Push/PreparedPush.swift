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
    /// SHA-256 over every op's key, HLC, deletion flag and typed JSON, length-prefixed.
    package let digest: [UInt8]

    /// Encodes each value once and computes the digest.
    ///
    /// - Throws: `SyncStorageError` `malformed` if a value cannot be written as typed JSON (a date
    ///   outside years 0 to 9999).
    package init(_ request: PushRequest) throws(SyncStorageError) {
        self.request = request
        var values: [[UInt8]?] = []
        values.reserveCapacity(request.ops.count)
        var hash = SHA256()
        func add(_ bytes: some Collection<UInt8>) {
            hash.update(data: withUnsafeBytes(of: UInt64(bytes.count).bigEndian) { Data($0) })
            hash.update(data: Data(bytes))
        }
        for op in request.ops {
            let json: [UInt8]?
            do { json = try op.value?.typedJSON() } catch {
                throw SyncStorageError(.malformed, "the value of '\(op.key)' cannot be written as typed JSON: \(error)")
            }
            values.append(json)
            add(op.key.utf8)
            add(withUnsafeBytes(of: op.hlc.rawValue.bigEndian) { Array($0) })
            add(json.map { [1] + $0 } ?? [0])
        }
        valueJSON = values
        digest = Array(hash.finalize())
    }
}
