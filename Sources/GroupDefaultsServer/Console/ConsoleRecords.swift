import Crypto
import Dispatch
package import Foundation
import GroupDefaultsWire
import HummingbirdBcrypt

// The console's state, kept by either storage backend as opaque records (`ConsoleRecordStore`'s
// records): operators with their bcrypt password hashes, and sign-in sessions under the SHA-256 of
// their cookie. Operators are not accounts and have no tokens: a sync token never signs in here,
// and a session never reaches `/v1`.

/// An operator of the console: a name and a bcrypt hash of the password, never the password.
package struct StoredOperator: Sendable, Hashable, Codable {
    package var name: String
    package var passwordHash: String
    package var created: Date
}

/// A signed-in console session, stored under the SHA-256 of its cookie's value.
package struct StoredConsoleSession: Sendable, Hashable, Codable {
    /// The operator signed in.
    package var operatorName: String
    package var created: Date
    package var expires: Date
    /// The token every form of this session carries (`csrf`), compared in constant time.
    package var csrf: String
}

/// What the console's records refuse, with a message for the operator.
package struct ConsoleRecordError: Error, Sendable, CustomStringConvertible {
    package var description: String

    init(_ description: String) { self.description = description }
}

/// The operators of the console (`groupdefaults-server admin …`, and sign-in).
package struct Operators: Sendable {
    let storage: any ConsoleRecordStore
    /// bcrypt's cost: 2^cost rounds (12: about a quarter of a second here, per hash and per check).
    let cost: UInt8

    /// The operators kept in `storage`.
    package init(storage: any ConsoleRecordStore, cost: UInt8 = 12) {
        self.storage = storage
        self.cost = cost
    }

    /// Adds an operator, under `name` as a new name is kept (`NewNames`), and returns that name.
    ///
    /// - Throws: `ConsoleRecordError` if the name is not a valid operator name or looks like an
    ///   existing operator's, the password is shorter than 8 characters or longer than bcrypt's 72
    ///   bytes, or the name is taken.
    @discardableResult
    package func create(name given: String, password: String, now: Date = Date()) async throws -> String {
        let existing = try await list().map(\.name)
        if existing.contains(where: given.isSameName(as:)) {
            throw ConsoleRecordError("an operator named \(printable(given)) exists already (remove it first to set a new password)")
        }
        let name: String
        do { name = try NewNames.resolve(given, kind: .operator, existing: existing).name } catch { throw ConsoleRecordError("\(error)") }
        guard password.count >= 8 else { throw ConsoleRecordError("the password must have at least 8 characters") }
        guard password.utf8.count <= 72 else { throw ConsoleRecordError("the password must be at most 72 bytes (bcrypt's limit)") }
        let hash = await Self.offThePool { [cost] in Bcrypt.hash(password, cost: cost) }
        let record = StoredOperator(name: name, passwordHash: hash, created: now)
        guard try await storage.putConsoleRecord(.operator, name: name, value: Array(JSONEncoder().encode(record)), onlyIfNew: true)
        else { throw ConsoleRecordError("an operator named \(printable(name)) exists already (remove it first to set a new password)") }
        return name
    }

    /// Every operator, by name.
    package func list() async throws -> [StoredOperator] {
        try await storage.consoleRecords(.operator).map { try JSONDecoder().decode(StoredOperator.self, from: Data($0.value)) }
    }

    /// Removes an operator and ends their sessions.
    ///
    /// - Throws: `ConsoleRecordError` if there is no operator of that name.
    package func remove(name: String) async throws {
        guard try await storage.deleteConsoleRecord(.operator, name: name) else {
            throw ConsoleRecordError("there is no operator named \(name) (see `groupdefaults-server admin list`)")
        }
        for (hash, value) in try await storage.consoleRecords(.session) {
            if let session = try? JSONDecoder().decode(StoredConsoleSession.self, from: Data(value)), session.operatorName.isSameName(as: name) {
                _ = try await storage.deleteConsoleRecord(.session, name: hash)
            }
        }
    }

    /// The operator if `password` is theirs; nil otherwise. An unknown name costs the same bcrypt
    /// check as a known one, so that timing does not tell which names exist.
    package func verify(name: String, password: String) async throws -> StoredOperator? {
        let stored = try await storage.consoleRecord(.operator, name: name).map {
            try JSONDecoder().decode(StoredOperator.self, from: Data($0))
        }
        let hash = stored?.passwordHash
        let matches = await Self.offThePool { Bcrypt.verify(password, hash: hash ?? Self.unmatchableHash) }
        return matches ? stored : nil
    }

    /// A valid bcrypt hash (cost 12) of a random string nobody knows: what an unknown name is checked against.
    private static let unmatchableHash = Bcrypt.hash(UUID().uuidString + UUID().uuidString, cost: 12)

    /// Why `name` cannot name an operator, or nil: the rule of a new operator's name (`Username`),
    /// without its mapping: 1 to 64 ASCII letters, digits, `.`, `_`, `-` and `@`.
    package static func problem(withName name: String) -> String? {
        Username.problem(withNew: name, kind: .operator) ?? (Username.map(name).isSameName(as: name) ? nil : "not an operator's name as stored")
    }

    /// bcrypt is a quarter of a second of CPU: run it on a dispatch queue, not on the cooperative pool.
    static func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: body()) }
        }
    }
}

/// Signed-in sessions: a random cookie value, stored only as its SHA-256, ending after `lifetime`,
/// at sign-out, or when the operator is removed.
package struct ConsoleSessions: Sendable {
    let storage: any ConsoleRecordStore
    /// How long a session lasts from sign-in.
    package let lifetime: Duration

    /// Sessions kept in `storage`, each lasting `lifetime`.
    package init(storage: any ConsoleRecordStore, lifetime: Duration = .seconds(12 * 3600)) {
        self.storage = storage
        self.lifetime = lifetime
    }

    /// Starts a session for `operatorName`; returns the cookie's value. Expired sessions are dropped.
    package func start(operatorName: String, now: Date = Date()) async throws -> (cookie: String, session: StoredConsoleSession) {
        let cookie = Self.randomToken()
        let session = StoredConsoleSession(
            operatorName: operatorName,
            created: now,
            expires: now.addingTimeInterval(TimeInterval(lifetime.components.seconds)),
            csrf: Self.randomToken()
        )
        for (hash, value) in try await storage.consoleRecords(.session) {
            let old = try? JSONDecoder().decode(StoredConsoleSession.self, from: Data(value))
            if old.map({ $0.expires <= now }) ?? true { _ = try await storage.deleteConsoleRecord(.session, name: hash) }
        }
        _ = try await storage.putConsoleRecord(
            .session,
            name: Self.hash(cookie),
            value: Array(JSONEncoder().encode(session)),
            onlyIfNew: false
        )
        return (cookie, session)
    }

    /// The session of `cookie`, if it exists, has not expired and its operator still exists.
    package func session(cookie: String, now: Date = Date()) async throws -> StoredConsoleSession? {
        guard let bytes = try await storage.consoleRecord(.session, name: Self.hash(cookie)),
            let session = try? JSONDecoder().decode(StoredConsoleSession.self, from: Data(bytes)),
            session.expires > now,
            try await storage.consoleRecord(.operator, name: session.operatorName) != nil
        else { return nil }
        return session
    }

    /// Ends the session of `cookie` (sign-out).
    package func end(cookie: String) async throws {
        _ = try await storage.deleteConsoleRecord(.session, name: Self.hash(cookie))
    }

    static func hash(_ cookie: String) -> String { Hex.string(SHA256.hash(data: Array(cookie.utf8))) }

    /// 32 random bytes, base64url without padding (a cookie value and a form field as they are).
    static func randomToken() -> String {
        Tokens.base64URL(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    /// Whether two secrets are equal, in time that does not depend on where they differ.
    static func same(_ a: String, _ b: String) -> Bool {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}
