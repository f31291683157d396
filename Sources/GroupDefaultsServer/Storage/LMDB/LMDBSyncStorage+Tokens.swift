import GroupDefaultsWire
package import Foundation
import GroupDefaultsLMDB

// Tokens: by id, and a hash → id index.
extension LMDBSyncStorage {
    package func createToken(_ token: StoredToken) async throws {
        let environment = self.environment
        let json = Array(try JSONEncoder().encode(token))
        try await onWriteQueue {
            try environment.writeTransaction(sync: true) { txn in
                try Self.put(txn, DB.tokens, Array(token.id.utf8), json)
                try Self.put(txn, DB.tokenHashes, Array(token.hash.utf8), Array(token.id.utf8))
            }
        }
    }

    package func token(hash: String) async throws -> StoredToken? {
        let environment = self.environment
        return try await onReadQueue {
            var token: StoredToken?
            try environment.readTransaction { txn in
                guard let id = try Self.get(txn, DB.tokenHashes, Array(hash.utf8)),
                      let json = try Self.get(txn, DB.tokens, id) else { return }
                token = try JSONDecoder().decode(StoredToken.self, from: Data(json))
            }
            return token
        }
    }

    package func tokens() async throws -> [StoredToken] {
        let environment = self.environment
        return try await onReadQueue {
            var tokens: [StoredToken] = []
            try environment.readTransaction { txn in
                try txn.forEach(DB.tokens) { _, value in
                    tokens.append(try JSONDecoder().decode(StoredToken.self, from: Data(value)))
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
                try Self.put(txn, DB.tokens, Array(id.utf8), Array(try JSONEncoder().encode(token)))
            }
        }
    }

    /// Refuses new work, waits for running reads and writes, then closes the environment.
}
