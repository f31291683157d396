package import Foundation
import GroupDefaultsWire

/// What an operator needs to find an account (`groupdefaults-server accounts list`): its written
/// suites, its tokens and devices, and when it was last active.
package struct AccountSummary: Sendable, Hashable, Codable {
    package var account: String
    /// The account's written suites, by name.
    package var suites: [String]
    /// How many tokens it has, and how many of them work now.
    package var tokens: Int
    package var activeTokens: Int
    /// How many devices (token and device id) it has been seen with.
    package var devices: Int
    /// The latest of its devices' last sightings and its tokens' creation, if any.
    package var lastActivity: Date?

    package init(account: String, suites: [String], tokens: Int, activeTokens: Int, devices: Int, lastActivity: Date?) {
        self.account = account
        self.suites = suites
        self.tokens = tokens
        self.activeTokens = activeTokens
        self.devices = devices
        self.lastActivity = lastActivity
    }
}

/// An account's own rows that no other protocol lists by account (its pairings, its incarnation),
/// and deleting an account: everything stored under its name goes, in one transaction.
///
/// An account's incarnation is its identity beyond its name: a random id (`IncarnationID`) made
/// in the transaction that stores its first token (`TokenStore.createToken`), dropped by
/// `deleteAccount`, so that a name used again after a delete is a new account with a new
/// incarnation. Devices remember the incarnation of the account whose suite they sync
/// (`AccountIncarnationCheck`) and stop, rather than upload a deleted account's data into a new
/// one. It is authority: a restore keeps the present's.
package protocol AccountStore: Sendable {
    /// The pairings the account's tokens made (expired or not, until a new pairing drops them), by
    /// creation time.
    func pairings(account: String) async throws -> [StoredPairing]

    /// The account's incarnation; made (and kept) now if it has none: an account of a store from
    /// before incarnations. Call it only for an account that exists (a token's, or a suite's
    /// owner the token may use).
    func accountIncarnation(_ account: String) async throws -> String

    /// Deletes every row of `account`: its suites (entries, tombstones, history, batch records,
    /// counters), key bags, devices, tokens (a running server learns it as it learns a revocation,
    /// `TokenStore.tokenGeneration`), pairings and incarnation, in one transaction, with `audit`
    /// (the record of the act) appended in that same transaction, and wakes the waits on its
    /// suites so that open event streams re-check their token at once. Returns false, having
    /// changed nothing (no record appended), when nothing is stored under the name. (The embedded
    /// store's file keeps the rows' bytes in its free space until an erase rebuilds it: `LMDBErase`.)
    func deleteAccount(_ account: String, audit: AuditRecord?) async throws -> Bool
}

extension AccountStore {
    /// Deletes every row of `account`, recording nothing in the audit log (`deleteAccount(_:audit:)`).
    package func deleteAccount(_ account: String) async throws -> Bool {
        try await deleteAccount(account, audit: nil)
    }
}

extension SuiteAdmin where Self: TokenStore & DeviceStore {
    /// Every account that has a written suite, a token or a device, by name (`AccountSummary`).
    package func accountSummaries(now: Date = Date()) async throws -> [AccountSummary] {
        var summaries: [ExactName: AccountSummary] = [:]
        func touch(_ account: String, _ change: (inout AccountSummary) -> Void) {
            var summary =
                summaries[account.exact] ?? AccountSummary(account: account, suites: [], tokens: 0, activeTokens: 0, devices: 0, lastActivity: nil)
            change(&summary)
            summaries[account.exact] = summary
        }
        func later(_ a: Date?, _ b: Date) -> Date { max(a ?? b, b) }
        for suite in try await suiteSummaries(account: nil) { touch(suite.account) { $0.suites.append(suite.name) } }
        for token in try await tokens(account: nil) {
            touch(token.account) {
                $0.tokens += 1
                if token.isActive(at: now) { $0.activeTokens += 1 }
                $0.lastActivity = later($0.lastActivity, token.created)
            }
        }
        for device in try await devices(account: nil) {
            touch(device.account) {
                $0.devices += 1
                $0.lastActivity = later($0.lastActivity, Date(timeIntervalSince1970: Double(device.lastSeen) / 1000))
            }
        }
        return summaries.values.sorted { $0.account.utf8.lexicographicallyPrecedes($1.account.utf8) }
    }
}
