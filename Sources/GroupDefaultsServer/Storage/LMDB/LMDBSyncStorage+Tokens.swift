package import Foundation
import GroupDefaultsLMDB
import GroupDefaultsWire

// Tokens: by id, and a hash → id index.
extension LMDBSyncStorage: TokenStore {
    package func createToken(_ token: StoredToken) async throws {
        let environment = self.environment
        let json = Array(try JSONEncoder().encode(token))
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                try Self.putToken(txn, token, json: json, indexHash: true)
            }
        }
    }

    /// Writes a token's record (and, for a new token, its hash's index entry) and moves the token
    /// generation on: every write of a token goes through here, so that no process keeps using a
    /// verification it cached from before (`tokenGeneration`).
    static func putToken(_ txn: LMDBTransaction, _ token: StoredToken, json: [UInt8]? = nil, indexHash: Bool) throws {
        try put(txn, DB.tokens, Array(token.id.utf8), try json ?? Array(JSONEncoder().encode(token)))
        if indexHash {
            try put(txn, DB.tokenHashes, Array(token.hash.utf8), Array(token.id.utf8))
            try makeAccountIncarnationIfNew(txn, token.account)  // a new token: its account exists from now
        }
        try bumpTokenGeneration(txn)
    }

    /// Moves the token generation on (every write of a token, deletions too).
    static func bumpTokenGeneration(_ txn: LMDBTransaction) throws {
        let generation =
            try get(txn, DB.meta, tokenGenerationKey).flatMap { bytes in
                bytes.count == 8 ? bytes.withUnsafeBytes { LMDBKeys.readBigEndian($0) } : nil
            } ?? 0
        try put(txn, DB.meta, tokenGenerationKey, LMDBKeys.bigEndian(generation &+ 1))
    }

    static let tokenGenerationKey = Array("token-generation".utf8)

    /// The count of token writes so far, read in place, on the calling thread: one short read
    /// transaction, cheaper than a hop to the read queue (it reads one key of a page that every
    /// request keeps in memory).
    package func tokenGeneration() throws -> UInt64? {
        var generation: UInt64 = 0
        try whileOpen {
            try environment.readTransaction { txn in
                if let bytes = try Self.get(txn, DB.meta, Self.tokenGenerationKey), bytes.count == 8 {
                    generation = bytes.withUnsafeBytes { LMDBKeys.readBigEndian($0) }
                }
            }
        }
        return generation
    }

    package func token(hash: String) async throws -> StoredToken? {
        let environment = self.environment
        return try await onReadQueue {
            var token: StoredToken?
            try environment.readTransaction { txn in
                guard let id = try Self.get(txn, DB.tokenHashes, Array(hash.utf8)),
                    let json = try Self.get(txn, DB.tokens, id)
                else { return }
                token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
            }
            return token
        }
    }

    package func token(id: String) async throws -> StoredToken? {
        let environment = self.environment
        return try await onReadQueue {
            var token: StoredToken?
            try environment.readTransaction { txn in
                guard let json = try Self.get(txn, DB.tokens, Array(id.utf8)) else { return }
                token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
            }
            return token
        }
    }

    /// One read of the tokens' table (keyed by id: an account's tokens are among every token; an
    /// account has few, and the table is small beside the entries).
    package func tokens(account: String?) async throws -> [StoredToken] {
        let environment = self.environment
        return try await onReadQueue {
            var tokens: [StoredToken] = []
            try environment.readTransaction { txn in
                try txn.forEach(DB.tokens) { _, value in
                    let token = try JSONDecoder().decode(StoredToken.self, from: Data(value))
                    if account.map(token.account.isSameName(as:)) ?? true { tokens.append(token) }
                    return true
                }
            }
            return tokens.sorted { $0.created < $1.created }
        }
    }

    package func revokeToken(id: String, at date: Date) async throws {
        let environment = self.environment
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                guard let json = try Self.get(txn, DB.tokens, Array(id.utf8)) else {
                    throw SyncStorageError(.notFound, "no token has the id \(id)")
                }
                var token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
                if token.revoked == nil { token.revoked = date }
                try Self.putToken(txn, token, indexHash: false)
            }
        }
    }

    package func replaceTokens(with tokens: [StoredToken]) async throws {
        let environment = self.environment
        let encoded = try tokens.map { ($0, Array(try JSONEncoder().encode($0))) }
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                try txn.empty(DB.tokens)
                try txn.empty(DB.tokenHashes)
                for (token, json) in encoded { try Self.putToken(txn, token, json: json, indexHash: true) }
                try Self.bumpTokenGeneration(txn)  // also when there are none
            }
        }
    }
}
