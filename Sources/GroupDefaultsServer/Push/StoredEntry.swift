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

    /// Why the stored value is not served, or nil if it is: its typed JSON checked by
    /// `StoredValueCheck` against `valueLimit` (the server's `SyncLimits.maxValueBytes`), a sealed
    /// payload by its size alone (only devices can open it). What an older version stored, a dump
    /// put back or a row changed behind the server's back is checked here, where it is served.
    package func unavailability(valueLimit: Int) -> UnavailableValue? {
        if let sealed { return sealed.box.count > valueLimit ? .tooLarge : nil }
        guard let valueJSON else { return nil }
        return StoredValueCheck.problem(typedJSON: valueJSON, maximumBytes: valueLimit)
    }

    /// Writes the entry as the wire carries it (pages, history, events), its typed JSON copied as
    /// stored once checked (`unavailability(valueLimit:)`), never decoded: a value that fails the
    /// check is written as unavailable, that key alone (`SyncEntry.unavailable`).
    package func write(into json: inout WireJSON, valueLimit: Int, received: String? = nil) {
        let unavailable = unavailability(valueLimit: valueLimit)
        json.sortedEntry(
            key: key,
            typedJSON: valueJSON,
            sealed: sealed,
            deleted: isDeleted,
            stamp: stamp,
            rev: rev,
            account: account,
            received: received,
            unavailable: unavailable
        )
    }

    /// The entry as a push's answer carries it (the winner of a key the push lost): decoded once
    /// checked as `write(into:valueLimit:received:)` checks it, or unavailable.
    package func servedEntry(valueLimit: Int) -> SyncEntry {
        if let reason = unavailability(valueLimit: valueLimit) {
            var entry = SyncEntry(key: key, unavailable: reason, hlc: stamp.hlc, origin: stamp.origin, rev: rev)
            entry.account = account
            return entry
        }
        do throws(SyncStorageError) {
            return try syncEntry()
        } catch {
            var entry = SyncEntry(key: key, unavailable: .damaged, hlc: stamp.hlc, origin: stamp.origin, rev: rev)
            entry.account = account
            return entry
        }
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
