/// A written suite and its counters, as the console shows it.
package struct SuiteSummary: Sendable, Hashable {
    package var account: String
    package var name: String
    package var headRev: UInt64
    /// Live keys (tombstones not counted) and the bytes they hold, as the quotas count them.
    package var keys: Int
    package var bytes: Int

    package init(account: String, name: String, headRev: UInt64, keys: Int, bytes: Int) {
        self.account = account
        self.name = name
        self.headRev = headRev
        self.keys = keys
        self.bytes = bytes
    }
}

/// The operator's view of every account's suites, and the operator's reset (`SuiteReset`).
package protocol SuiteAdmin: Sendable {
    /// The written suites of `account` (of every account, for nil) with their counters, by account
    /// then name.
    func suiteSummaries(account: String?) async throws -> [SuiteSummary]
    /// Clears the suite: its entries, history and batch records are deleted (with `keys`, its key
    /// bags and anchor too, and its key epoch forgotten), in one transaction; its revisions go on
    /// from one taken by the reset (`SuiteReset.revision(after:)`), which it remembers, so that a
    /// cursor from before is answered `suiteReset` (`changes`). Returns how many live keys it held;
    /// nil if there is no such suite. `audit`, if given, is recorded in the same transaction: a
    /// reset is never without its record, nor a record without its reset.
    func resetSuite(account: String, suite: String, keys: Bool, audit: AuditRecord?) async throws -> Int?
}

extension SuiteAdmin {
    /// `resetSuite(account:suite:keys:audit:)` without an audit record.
    package func resetSuite(account: String, suite: String, keys: Bool) async throws -> Int? {
        try await resetSuite(account: account, suite: suite, keys: keys, audit: nil)
    }
}
