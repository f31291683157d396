import Foundation
package import GroupDefaultsWire

/// One key's state as a backend stores it: the value's typed JSON (nil for a tombstone) or, in an
/// end-to-end encrypted suite, the sealed payload (a deletion's too); the stamp of the write that
/// made it, and its revision. Both backends load and persist these; the push step (`PushStep`)
/// decides what they become.
package struct StoredEntry: Sendable, Hashable {
    package var key: String
    /// Typed JSON (`PropertyListValue.typedJSON()`); nil for a tombstone or a sealed entry.
    package var valueJSON: [UInt8]?
    /// The sealed payload of an encrypted suite's entry; nil in a plain suite.
    package var sealed: SealedPayload?
    /// Whether the entry is a deletion.
    package var isDeleted: Bool
    package var stamp: Stamp
    package var rev: UInt64
    /// The member account whose device pushed the entry (`SyncEntry.account`); nil for the owner's.
    package var account: String?

    /// A plain entry: a value's typed JSON, or nil for a tombstone.
    package init(key: String, valueJSON: [UInt8]?, stamp: Stamp, rev: UInt64) {
        self.key = key
        self.valueJSON = valueJSON
        self.sealed = nil
        self.isDeleted = valueJSON == nil
        self.stamp = stamp
        self.rev = rev
    }

    /// A sealed entry: the key's opaque id, its payload, and whether it is a deletion.
    package init(key: String, sealed: SealedPayload, deleted: Bool, stamp: Stamp, rev: UInt64) {
        self.key = key
        self.valueJSON = nil
        self.sealed = sealed
        self.isDeleted = deleted
        self.stamp = stamp
        self.rev = rev
    }

    /// What the entry counts against the suite's byte quota (`SyncLimits.quotaBytes`): its key and
    /// what the server stores of its value (the typed JSON, or the sealed bytes); 0 for a deletion.
    package var quotaBytes: Int {
        guard isLive else { return 0 }
        return SyncLimits.quotaBytes(key: key, valueJSONByteCount: sealed?.box.count ?? valueJSON?.count ?? 0)
    }

    package var isLive: Bool { !isDeleted }

    /// Writes the entry as the wire carries it (pages, history, events), its typed JSON copied as
    /// stored: the server wrote it from a value it had checked, so it is not decoded again, only
    /// checked to be copyable (`isCopyable`).
    ///
    /// - Throws: `SyncStorageError.unavailable` if the stored value is not (damaged storage).
    package func write(into json: inout WireJSON, received: String? = nil) throws(SyncStorageError) {
        if let valueJSON, !Self.isCopyable(valueJSON) {
            throw SyncStorageError(.unavailable, "the stored value of a key is damaged: it is not one line of UTF-8 JSON")
        }
        json.sortedEntry(
            key: key,
            typedJSON: valueJSON,
            sealed: sealed,
            deleted: isDeleted,
            stamp: stamp,
            rev: rev,
            account: account,
            received: received
        )
    }

    /// Whether stored typed JSON can be copied into an answer: an object in valid UTF-8 with no
    /// control character (a raw line break would split an event's `data:` line). What a damaged
    /// record would break; the rest of its shape is what the server's own writer made.
    static func isCopyable(_ json: [UInt8]) -> Bool {
        guard json.count >= 2, json.first == UInt8(ascii: "{"), json.last == UInt8(ascii: "}"), !json.contains(where: { $0 < 0x20 }) else {
            return false
        }
        return String(validating: json, as: UTF8.self) != nil
    }

    /// The entry as the wire carries it (its value decoded).
    ///
    /// - Throws: `SyncStorageError.unavailable` if the stored JSON does not decode (damaged storage).
    package func syncEntry() throws(SyncStorageError) -> SyncEntry {
        if let sealed {
            var entry = SyncEntry(keyID: key, sealed: sealed, deleted: isDeleted, hlc: stamp.hlc, origin: stamp.origin, rev: rev)
            entry.account = account
            return entry
        }
        let value: PropertyListValue?
        do {
            value = try valueJSON.map { try JSONDecoder().decode(PropertyListValue.self, from: Data($0)) }
        } catch {
            // Not the decoder's words: they may quote the stored value.
            throw SyncStorageError(.unavailable, "the stored value of a key does not decode as typed JSON (\(type(of: error)))")
        }
        var entry = SyncEntry(key: key, value: value, hlc: stamp.hlc, origin: stamp.origin, rev: rev)
        entry.account = account
        return entry
    }
}
