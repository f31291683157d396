internal import GroupDefaultsLMDB
import GroupDefaultsWire

// Pinned keys, on a member's device of a suite shared between accounts: the keys the suite's owner
// (or an admin) pinned, whose values only the owner's devices change. The sync engine keeps the
// list (`replacePinnedKeys`); the server refuses the member's writes of them, and the server's
// entry of a pinned key wins over this device's whatever the stamps (`applyRemote`). Programs see
// them as forced (`objectIsForced(forKey:)`), as managed settings.

extension SharedDefaults {
    /// The keys the suite's owner pinned for its members, when this device is a member's (empty on
    /// the owner's devices, which change them as any key), in byte order.
    public var pinnedKeys: [String] {
        do {
            return try read { tx in try tx.pinnedKeys().sorted().map(\.text) }
        } catch {
            report(error)
            return []
        }
    }

    /// Whether the suite's owner pinned `key` for its members (on a member's device).
    func isPinned(_ key: String) -> Bool {
        (try? read { tx in try tx.pinnedKeys().contains(key.exact) }) ?? false
    }

    /// Makes `keys` the suite's pinned keys (the sync engine, on a member's device), telling the
    /// suite's observers, in every process, of each key whose pin changed and that holds a value
    /// (a change of the key, with its value as it is), unless `announcing` is false.
    package func replacePinnedKeys(_ keys: [String], announcing: Bool = true) throws {
        try write { tx in
            let old = try tx.pinnedKeys()
            let new = Set(keys.map(\.exact))
            guard old != new else { return }
            try tx.perform(key: nil) { try tx.setSyncKeyNames(new, for: MetaKey.syncPinned) }
            guard announcing else { return }
            for key in old.symmetricDifference(new).sorted() { try tx.announce(key.text) }
        }
    }

    /// Adds `keys` to the pinned keys (a push's op refused as pinned, before the engine lists
    /// them), without a change of their own: the owner's value that comes next is the change.
    package func addPinnedKeys(_ keys: [String]) throws {
        let known = try read { tx in try tx.pinnedKeys() }
        let added = Set(keys.map(\.exact)).subtracting(known)
        guard !added.isEmpty else { return }
        try replacePinnedKeys(known.union(added).map(\.text), announcing: false)
    }
}

extension SharedDefaults.Transaction {
    /// Whether `key` is pinned, after this transaction's change: nothing to look up in a suite
    /// that does not sync (the change read whether it does), one lookup in `meta` in one that does.
    func isPinned(_ key: String) throws -> Bool {
        guard isSynced, try perform(key: nil, { try txn.get(.meta, MetaKey.syncPinned) }) != nil else { return false }
        return try pinnedKeys().contains(key.exact)
    }

    /// The pinned keys, by their bytes.
    func pinnedKeys() throws -> Set<ExactName> {
        try perform(key: nil) { try syncKeyNames(MetaKey.syncPinned) }
    }

    /// Logs a change of `key` with its value as it is (for observers: what the key means changed,
    /// not its value); nothing for a key without a value.
    func announce(_ key: String) throws {
        try checkUsable()
        _ = try beginChange()
        try perform(key: key) {
            try withKeyBytes(key) { k in
                guard let raw = try txn.get(.values, k) else { return }
                let record = try StoredRecord.decode(raw)
                try appendLog(.set, key: key, storedRecord: raw, remoteOrigin: record.stamp.origin)
            }
        }
    }
}
