package import Foundation
import GroupDefaultsLMDB
package import GroupDefaultsWire

// Pairings, in `pairings`: lookup (64 hex digits) → `StoredPairing` JSON; beside them two indexes,
// so that creating one costs a few lookups rather than a decode of every pairing stored:
// - `x/` + expiry (ms, big-endian) + lookup → the creator's token id: the pairings in order of
//   expiry, so the expired ones are found from the front;
// - `t/` + token id + `/` + lookup → expiry (ms, big-endian): a token's pairings, to count them.
// (A pairing stored before the indexes is found by its lookup as ever, and expires unindexed.)
extension LMDBSyncStorage: PairingStore {
    package func createPairing(_ pairing: StoredPairing) async throws {
        let environment = self.environment
        let json = Array(try JSONEncoder().encode(pairing))
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                try Self.purgeExpiredPairings(txn, before: pairing.created)
                let now = PairingIndex.milliseconds(pairing.created)
                var live = 0
                try PairingIndex.forEach(txn, PairingIndex.tokenPrefix(pairing.creatorTokenID)) { _, expiry in
                    if expiry >= now { live += 1 }
                }
                try StoredPairing.checkCount(live)
                guard try Self.get(txn, DB.pairings, Array(pairing.lookup.utf8)) == nil else {
                    throw SyncStorageError(.pairingUsed, "a pairing with this id exists: make a new code")
                }
                try Self.put(txn, DB.pairings, Array(pairing.lookup.utf8), json)
                try PairingIndex.put(txn, pairing)
            }
        }
    }

    /// Drops the pairings (and their index records) that expired before `date`, from the front of
    /// the expiry index.
    private static func purgeExpiredPairings(_ txn: LMDBTransaction, before date: Date) throws {
        let limit = PairingIndex.milliseconds(date)
        var expired: [(key: [UInt8], expiry: UInt64, lookup: String, tokenID: String)] = []
        try PairingIndex.forEach(txn, PairingIndex.expiryPrefix) { key, value in
            let expiry = key.withUnsafeBytes { LMDBKeys.readBigEndian($0, at: PairingIndex.expiryPrefix.count) }
            guard expiry < limit else { return false }
            let lookup = String(decoding: key[(PairingIndex.expiryPrefix.count + 8)...], as: UTF8.self)
            expired.append((key, expiry, lookup, String(decoding: value, as: UTF8.self)))
            return true
        }
        for pairing in expired {
            try delete(txn, DB.pairings, pairing.key)
            try delete(txn, DB.pairings, Array(pairing.lookup.utf8))
            try delete(txn, DB.pairings, PairingIndex.tokenPrefix(pairing.tokenID) + Array(pairing.lookup.utf8))
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
            try PairingIndex.put(txn, pairing)  // it no longer counts against its token
            guard let id = pairing.tokenID, let json = try Self.get(txn, DB.tokens, Array(id.utf8)) else { return }
            var token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
            token.revoked = token.revoked ?? now
            try Self.putToken(txn, token, indexHash: false)
        }
    }

    /// Reads, changes and writes one pairing in one write transaction.
    private func updatePairing(
        _ lookup: String,
        _ change: @escaping @Sendable (inout StoredPairing, LMDBTransaction) throws -> Void
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

/// The keys of the pairing indexes (see the top of this file).
enum PairingIndex {
    static let expiryPrefix = Array("x/".utf8)

    static func tokenPrefix(_ tokenID: String) -> [UInt8] { Array("t/\(tokenID)/".utf8) }

    static func milliseconds(_ date: Date) -> UInt64 { UInt64(max(0, date.timeIntervalSince1970 * 1000)) }

    /// Records `pairing` in both indexes (a cancelled one under its new expiry; its old expiry
    /// record stays until it is purged, harmlessly).
    static func put(_ txn: LMDBTransaction, _ pairing: StoredPairing) throws {
        let expiry = milliseconds(pairing.expires)
        let lookup = Array(pairing.lookup.utf8)
        try LMDBSyncStorage.put(
            txn,
            LMDBSyncStorage.DB.pairings,
            expiryPrefix + LMDBKeys.bigEndian(expiry) + lookup,
            Array(pairing.creatorTokenID.utf8)
        )
        try LMDBSyncStorage.put(txn, LMDBSyncStorage.DB.pairings, tokenPrefix(pairing.creatorTokenID) + lookup, LMDBKeys.bigEndian(expiry))
    }

    /// Calls `body` with each index record under `prefix` (key, and the value read as a big-endian
    /// number for the token index, the raw bytes otherwise), while it returns true.
    static func forEach(_ txn: LMDBTransaction, _ prefix: [UInt8], _ body: ([UInt8], UInt64) throws -> Void) throws {
        try forEach(txn, prefix) { key, value in
            try body(key, value.count == 8 ? value.withUnsafeBytes { LMDBKeys.readBigEndian($0) } : 0)
            return true
        }
    }

    static func forEach(_ txn: LMDBTransaction, _ prefix: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Bool) throws {
        try prefix.withUnsafeBytes { start in
            try txn.forEach(LMDBSyncStorage.DB.pairings, from: start) { key, value in
                guard key.starts(with: prefix) else { return false }
                return try body(Array(key), Array(value))
            }
        }
    }
}
