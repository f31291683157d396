import Foundation
import GroupDefaultsWire

/// One key's state as a backend stores it: the value's typed JSON (nil for a tombstone), the stamp
/// of the write that made it, and its revision. Both backends load and persist these; the push step
/// (`PushStep`) decides what they become.
struct StoredEntry: Sendable, Hashable {
    var key: String
    /// Typed JSON (`PropertyListValue.typedJSON()`); nil for a tombstone.
    var valueJSON: [UInt8]?
    var stamp: Stamp
    var rev: UInt64

    /// What the entry counts against the suite's byte quota (`SyncLimits.quotaBytes`); 0 for a tombstone.
    var quotaBytes: Int {
        valueJSON.map { SyncLimits.quotaBytes(key: key, valueJSONByteCount: $0.count) } ?? 0
    }

    var isLive: Bool { valueJSON != nil }

    /// The entry as the wire carries it (its value decoded).
    ///
    /// - Throws: `SyncStorageError.unavailable` if the stored JSON does not decode (damaged storage).
    func syncEntry() throws(SyncStorageError) -> SyncEntry {
        let value: PropertyListValue?
        do {
            value = try valueJSON.map { try JSONDecoder().decode(PropertyListValue.self, from: Data($0)) }
        } catch {
            throw SyncStorageError(.unavailable, "the stored value of '\(key)' does not decode: \(error)")
        }
        return SyncEntry(key: key, value: value, hlc: stamp.hlc, origin: stamp.origin, rev: rev)
    }
}
