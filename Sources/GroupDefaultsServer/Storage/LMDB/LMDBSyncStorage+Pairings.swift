package import Foundation
import GroupDefaultsLMDB
package import GroupDefaultsWire

// Pairings: lookup → `StoredPairing` JSON, in `pairings`.
extension LMDBSyncStorage {
    package func createPairing(_ pairing: StoredPairing) async throws {
        let environment = self.environment
        let json = Array(try JSONEncoder().encode(pairing))
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                var expired: [[UInt8]] = []
                var live = 0
                try txn.forEach(DB.pairings) { key, value in
                    guard let old = try? JSONDecoder().decode(StoredPairing.self, from: Data(value)) else { return true }
                    if old.expires < pairing.created {
                        expired.append(Array(key))
                    } else if old.creatorTokenID == pairing.creatorTokenID {
                        live += 1
                    }
                    return true
                }
                for key in expired { try Self.delete(txn, DB.pairings, key) }
                try StoredPairing.checkCount(live)
                guard try Self.get(txn, DB.pairings, Array(pairing.lookup.utf8)) == nil else {
                    throw SyncStorageError(.pairingUsed, "a pairing with this id exists: make a new code")
                }
                try Self.put(txn, DB.pairings, Array(pairing.lookup.utf8), json)
            }
        }
    }

    package func pairing(lookup: String) async throws -> StoredPairing? {
        let environment = self.environment
        return try await onReadQueue {
            var pairing: StoredPairing?
            try environment.readTransaction { txn in
                guard let json = try Self.get(txn, DB.pairings, Array(lookup.utf8)) else { return }
                pairing = try JSONDecoder().decode(StoredPairing.self, from: Data(json))
            }
            return pairing
        }
    }

    package func claimPairing(lookup: String, claim: PairingClaim, token: StoredToken, now: Date) async throws -> StoredPairing {
        let tokenJSON = Array(try JSONEncoder().encode(token))
        return try await updatePairing(lookup) { pairing, txn in
            try pairing.claim(claim, tokenID: token.id, now: now)
            try Self.putToken(txn, token, json: tokenJSON, indexHash: true)
        }
    }

    package func completePairing(lookup: String, bundle: String, now: Date, tokenExpires: Date?) async throws -> StoredPairing {
        try await updatePairing(lookup) { pairing, txn in
            try pairing.complete(bundle: bundle, now: now)
            guard let id = pairing.tokenID, let json = try Self.get(txn, DB.tokens, Array(id.utf8)) else { return }
            var token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
            token.expires = tokenExpires
            try Self.putToken(txn, token, indexHash: false)
        }
    }

    package func cancelPairing(lookup: String, now: Date) async throws -> StoredPairing {
        try await updatePairing(lookup) { pairing, txn in
            try pairing.cancel(now: now)
            guard let id = pairing.tokenID, let json = try Self.get(txn, DB.tokens, Array(id.utf8)) else { return }
            var token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
            token.revoked = token.revoked ?? now
            try Self.putToken(txn, token, indexHash: false)
        }
    }

    /// Reads, changes and writes one pairing in one write transaction.
    private func updatePairing(
        _ lookup: String, _ change: @escaping @Sendable (inout StoredPairing, LMDBTransaction) throws -> Void
    ) async throws -> StoredPairing {
        let environment = self.environment
        return try await onWriteQueue {
            var result: StoredPairing?
            try environment.writeTransaction(sync: true) { txn in
                guard let json = try Self.get(txn, DB.pairings, Array(lookup.utf8)) else {
                    throw SyncStorageError(.pairingNotFound, "no pairing has this code: check it, or make a new one")
                }
                var pairing = try JSONDecoder().decode(StoredPairing.self, from: Data(json))
                try change(&pairing, txn)
                try Self.put(txn, DB.pairings, Array(lookup.utf8), Array(try JSONEncoder().encode(pairing)))
                result = pairing
            }
            return result!
        }
    }
}

// Key bags: account + NUL + suite + NUL + epoch (u32, big-endian) → the sealed key, in `key-bags`.
extension LMDBSyncStorage {
    package func putKeyBag(account: String, suite: String, epoch: UInt32, bundle: String) async throws {
        let environment = self.environment
        let suiteKey = LMDBKeys.suiteName(account: account, suite: suite)
        let key = suiteKey + [0] + withUnsafeBytes(of: epoch.bigEndian) { Array($0) }
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                let found = try Self.suiteRecord(txn, suiteKey)
                let newEpoch = try PushStep.checkKeyBag(suite: suite, suiteEpoch: found?.epoch, epoch: epoch)
                guard var record = found else { return }  // checkKeyBag refused a missing suite already
                record.epoch = newEpoch
                try Self.put(txn, DB.suites, suiteKey, record.bytes)
                try Self.put(txn, DB.keyBags, key, Array(bundle.utf8))
            }
        }
    }

    package func keyBags(account: String, suite: String) async throws -> [UInt32: String] {
        let environment = self.environment
        let prefix = LMDBKeys.suiteName(account: account, suite: suite) + [0]
        return try await onReadQueue {
            var bags: [UInt32: String] = [:]
            try environment.readTransaction { txn in
                try prefix.withUnsafeBytes { start in
                    try txn.forEach(DB.keyBags, from: start) { key, value in
                        guard key.count == prefix.count + 4, key.starts(with: prefix) else { return false }
                        bags[UInt32(bigEndian: key.loadUnaligned(fromByteOffset: prefix.count, as: UInt32.self))] =
                            String(decoding: value, as: UTF8.self)
                        return true
                    }
                }
            }
            return bags
        }
    }
}
