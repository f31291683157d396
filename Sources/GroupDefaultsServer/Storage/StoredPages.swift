package import GroupDefaultsWire

/// A page of `changes` as storage reads it: the entries as stored, written to the wire by copying
/// their typed JSON (`json()`), or decoded into the wire's `ChangesPage` for whoever reads them
/// (`page()`).
package struct StoredChanges: Sendable, Hashable {
    /// The latest entry of each key changed after `since`, in revision order.
    package var entries: [StoredEntry]
    /// The `since` to pass next: the last entry's revision, or the suite's head when none.
    package var lastRev: UInt64
    /// Whether the page was cut at its limit.
    package var hasMore: Bool

    package init(entries: [StoredEntry], lastRev: UInt64, hasMore: Bool) {
        self.entries = entries
        self.lastRev = lastRev
        self.hasMore = hasMore
    }

    /// The answer's body: the bytes `JSONEncoder` with sorted keys writes for `page()` (for a
    /// dictionary value stored by a server older than sorted typed JSON, its keys in stored order),
    /// a value that fails the check against `valueLimit` written as unavailable, that key alone
    /// (`StoredEntry.write(into:valueLimit:received:)`).
    package func json(valueLimit: Int) -> [UInt8] {
        var json = StoredEntry.pageStart(entries, valueLimit: valueLimit)
        json.raw(",\"has_more\":")
        json.raw(hasMore ? "true" : "false")
        json.raw(",\"last_rev\":")
        json.integer(lastRev)
        json.raw("}")
        return json.bytes
    }

    /// The page with its values decoded.
    ///
    /// - Throws: `SyncStorageError.unavailable` if a stored value does not decode.
    package func page() throws(SyncStorageError) -> ChangesPage {
        ChangesPage(entries: try entries.map { entry throws(SyncStorageError) in try entry.syncEntry() }, lastRev: lastRev, hasMore: hasMore)
    }
}

/// A page of `snapshot` as storage reads it (see `StoredChanges`).
package struct StoredSnapshot: Sendable, Hashable {
    /// Entries in key order, unexpired tombstones included.
    package var entries: [StoredEntry]
    /// The suite's head revision when the page was read.
    package var headRev: UInt64
    /// The key to continue after, or nil on the last page.
    package var next: String?

    package init(entries: [StoredEntry], headRev: UInt64, next: String?) {
        self.entries = entries
        self.headRev = headRev
        self.next = next
    }

    /// The answer's body: the bytes `JSONEncoder` with sorted keys writes for `page()` (for a
    /// dictionary value stored by a server older than sorted typed JSON, its keys in stored order),
    /// a value that fails the check against `valueLimit` written as unavailable, that key alone
    /// (`StoredEntry.write(into:valueLimit:received:)`).
    package func json(valueLimit: Int) -> [UInt8] {
        var json = StoredEntry.pageStart(entries, valueLimit: valueLimit)
        json.raw(",\"head_rev\":")
        json.integer(headRev)
        json.raw(",\"next\":")
        if let next { json.string(next) } else { json.raw("null") }
        json.raw("}")
        return json.bytes
    }

    /// The page with its values decoded.
    ///
    /// - Throws: `SyncStorageError.unavailable` if a stored value does not decode.
    package func page() throws(SyncStorageError) -> SnapshotPage {
        SnapshotPage(entries: try entries.map { entry throws(SyncStorageError) in try entry.syncEntry() }, headRev: headRev, next: next)
    }
}

extension StoredEntry {
    /// A page's JSON up to its entries: `{"entries":[…]`, each entry as `write` writes it.
    static func pageStart(_ entries: [StoredEntry], valueLimit: Int) -> WireJSON {
        var json = WireJSON(capacity: 64 + entries.count * 160)
        json.raw("{\"entries\":[")
        for (index, entry) in entries.enumerated() {
            if index > 0 { json.raw(",") }
            entry.write(into: &json, valueLimit: valueLimit)
        }
        json.raw("]")
        return json
    }
}

extension StoredVersion {
    /// Writes the version as `KeyHistory` carries it (the entry and when it was received), its
    /// value checked as a page's (`StoredEntry.write(into:valueLimit:received:)`).
    package func write(into json: inout WireJSON, valueLimit: Int) {
        entry.write(into: &json, valueLimit: valueLimit, received: TypedJSONDate.format(milliseconds: receivedMilliseconds))
    }
}

/// A page of a suite's history as storage reads it (`SyncStore.history(account:suite:after:limit:)`):
/// keys in key order, each with its versions newest first, never split between pages.
package struct StoredHistoryPage: Sendable, Equatable {
    /// Each key with the versions the history keeps of it, newest first.
    package var keys: [(key: String, versions: [StoredVersion])]
    /// The key to continue after, or nil when no key follows.
    package var next: String?

    package init(keys: [(key: String, versions: [StoredVersion])], next: String?) {
        self.keys = keys
        self.next = next
    }

    /// How many versions the page holds.
    package var versionCount: Int { keys.reduce(0) { $0 + $1.versions.count } }

    /// Keys compared by their bytes (`isSameName`).
    package static func == (a: StoredHistoryPage, b: StoredHistoryPage) -> Bool {
        a.next == b.next && a.keys.count == b.keys.count
            && zip(a.keys, b.keys).allSatisfy { $0.key.isSameName(as: $1.key) && $0.versions == $1.versions }
    }

    /// The answer's body: the bytes `JSONEncoder` with sorted keys writes for `page()`, each
    /// version's value copied as stored once checked against `valueLimit`, or written as
    /// unavailable (as `keyHistoryJSON` writes one key's).
    package func json(valueLimit: Int) -> [UInt8] {
        var json = WireJSON(capacity: 64 + versionCount * 190)
        json.raw("{\"history\":[")
        for (index, (key, versions)) in keys.enumerated() {
            if index > 0 { json.raw(",") }
            writeKeyHistory(into: &json, key: key, versions: versions, valueLimit: valueLimit)
        }
        json.raw("],\"next\":")
        if let next { json.string(next) } else { json.raw("null") }
        json.raw("}")
        return json.bytes
    }

    /// The page with its values decoded.
    ///
    /// - Throws: `SyncStorageError.unavailable` if a stored value does not decode.
    package func page() throws(SyncStorageError) -> SuiteHistoryPage {
        var history: [KeyHistory] = []
        for (key, versions) in keys {
            history.append(KeyHistory(key: key, versions: try versions.map { version throws(SyncStorageError) in try version.keyVersion() }))
        }
        return SuiteHistoryPage(history: history, next: next)
    }
}

/// `GET …/keys/{key}/history`'s body: the bytes `JSONEncoder` with sorted keys writes for a
/// `KeyHistory` of `versions` (newest first), their values copied as stored once checked against
/// `valueLimit`, or written as unavailable.
package func keyHistoryJSON(key: String, versions: [StoredVersion], valueLimit: Int) -> [UInt8] {
    var json = WireJSON(capacity: 64 + versions.count * 190)
    writeKeyHistory(into: &json, key: key, versions: versions, valueLimit: valueLimit)
    return json.bytes
}

/// One `KeyHistory` object, as `keyHistoryJSON` answers it and a history page holds it.
private func writeKeyHistory(into json: inout WireJSON, key: String, versions: [StoredVersion], valueLimit: Int) {
    json.raw("{\"key\":")
    json.string(key)
    json.raw(",\"versions\":[")
    for (index, version) in versions.enumerated() {
        if index > 0 { json.raw(",") }
        version.write(into: &json, valueLimit: valueLimit)
    }
    json.raw("]}")
}
