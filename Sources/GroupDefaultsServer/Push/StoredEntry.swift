import Foundation
package import GroupDefaultsWire

/// One key's state as a backend stores it: the value's typed JSON (nil for a tombstone), the stamp
/// of the write that made it, and its revision. Both backends load and persist these; the push step
/// (`PushStep`) decides what they become.
package struct StoredEntry: Sendable, Hashable {
    package var key: String
    /// Typed JSON (`PropertyListValue.typedJSON()`); nil for a tombstone.
    package var valueJSON: [UInt8]?
    package var stamp: Stamp
    package var rev: UInt64

    package init(key: String, valueJSON: [UInt8]?, stamp: Stamp, rev: UInt64) {
        self.key = key
        self.valueJSON = valueJSON
        self.stamp = stamp
        self.rev = rev
    }

    /// What the entry counts against the suite's byte quota (`SyncLimits.quotaBytes`); 0 for a tombstone.
    package var quotaBytes: Int {
        valueJSON.map { SyncLimits.quotaBytes(key: key, valueJSONByteCount: $0.count) } ?? 0
    }

    package var isLive: Bool { valueJSON != nil }

    /// The entry as the wire carries it (its value decoded).
    ///
    /// - Throws: `SyncStorageError.unavailable` if the stored JSON does not decode (damaged storage).
    package func syncEntry() throws(SyncStorageError) -> SyncEntry {
        let value: PropertyListValue?
        do {
            value = try valueJSON.map { try JSONDecoder().decode(PropertyListValue.self, from: Data($0)) }
        } catch {
            throw SyncStorageError(.unavailable, "the stored value of '\(key)' does not decode: \(error)")
        }
        return SyncEntry(key: key, value: value, hlc: stamp.hlc, origin: stamp.origin, rev: rev)
    }
}
