import GroupDefaultsLMDB
package import GroupDefaultsWire

// Key bags, in `key-bags`: account + NUL + suite + NUL + epoch (u32, big-endian) → the row's
// `StoredKeyBag.storedText`.
extension LMDBSyncStorage: KeyBagStore {
    package func putKeyBag(account: String, suite: String, epoch: UInt32, bag: SignedKeyBag) async throws {
        let environment = self.environment
        let suiteKey = LMDBKeys.suiteName(account: account, suite: suite)
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                let found = try Self.suiteRecord(txn, suiteKey)
                let (newEpoch, row) = try KeyBagRule.put(
                    bag,
                    epoch: epoch,
                    suite: suite,
                    suiteEpoch: found?.epoch,
                    stored: try Self.keyBags(txn, suiteKey)
                )
                guard var record = found else { return }  // the rule refused a missing suite already
                record.epoch = newEpoch
                try Self.put(txn, DB.suites, suiteKey, record.bytes)
                try Self.put(txn, DB.keyBags, KeyBagKey.key(suiteKey, epoch), Array(row.storedText.utf8))
                // A rotation after a member's removal, sealed without it, ends the rotation due.
                if let due = try Self.rotationDue(txn, owner: account, suite: suite), due.isEnded(by: bag, epoch: epoch) {
                    try Self.putRotationDue(txn, owner: account, suite: suite, nil)
                }
            }
        }
    }

    package func anchorKeyBags(account: String, suite: String, anchor: KeyAnchor) async throws {
        let environment = self.environment
        let suiteKey = LMDBKeys.suiteName(account: account, suite: suite)
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                let found = try Self.suiteRecord(txn, suiteKey)
                let (rows, newEpoch) = try KeyBagRule.anchor(
                    anchor,
                    suite: suite,
                    suiteEpoch: found?.epoch ?? 0,
                    written: (found?.head ?? 0) > (found?.modeRev ?? 0),
                    reset: (found?.modeRev ?? 0) > 0,
                    stored: try Self.keyBags(txn, suiteKey)
                )
                for (epoch, row) in rows {
                    try Self.put(txn, DB.keyBags, KeyBagKey.key(suiteKey, epoch), Array(row.storedText.utf8))
                }
                if let newEpoch {
                    var record = try found ?? SuiteRecord(id: Self.allocateSuiteID(txn))
                    record.epoch = newEpoch
                    try Self.put(txn, DB.suites, suiteKey, record.bytes)
                }
            }
        }
    }

    package func keyBags(account: String, suite: String) async throws -> [UInt32: StoredKeyBag] {
        let environment = self.environment
        let suiteKey = LMDBKeys.suiteName(account: account, suite: suite)
        return try await onReadQueue {
            var bags: [UInt32: StoredKeyBag] = [:]
            try environment.readTransaction { txn in bags = try Self.keyBags(txn, suiteKey) }
            return bags
        }
    }

    /// The stored key bags of the suite under `suiteKey`, by epoch.
    static func keyBags(_ txn: LMDBTransaction, _ suiteKey: [UInt8]) throws -> [UInt32: StoredKeyBag] {
        let prefix = suiteKey + [0]
        var bags: [UInt32: StoredKeyBag] = [:]
        try prefix.withUnsafeBytes { start in
            try txn.forEach(DB.keyBags, from: start) { key, value in
                guard key.count == prefix.count + 4, key.starts(with: prefix) else { return false }
                bags[UInt32(bigEndian: key.loadUnaligned(fromByteOffset: prefix.count, as: UInt32.self))] =
                    StoredKeyBag(storedText: String(decoding: value, as: UTF8.self))
                return true
            }
        }
        return bags
    }
}

/// The key of a suite's key bag in `key-bags`.
enum KeyBagKey {
    static func key(_ suiteKey: [UInt8], _ epoch: UInt32) -> [UInt8] {
        suiteKey + [0] + withUnsafeBytes(of: epoch.bigEndian) { Array($0) }
    }
}
