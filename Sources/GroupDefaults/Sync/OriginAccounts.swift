internal import GroupDefaultsLMDB

/// Which account writes as each device of another account, in a suite shared between accounts: the
/// sync engine records it from the entries it pulls (`SharedDefaults.applyRemote(…, accounts:)`),
/// and the change feed names it (`SharedDefaults.Change.Source.anotherAccount`). Kept in `meta`,
/// one record per origin (`sync.account.` and the origin in decimal), its value the account's name
/// in UTF-8; a device id belongs to one store, so the record never changes once written.
enum OriginAccounts {
    private static func key(_ origin: UInt64) -> String { "sync.account.\(origin)" }

    /// The account recorded for `origin`, nil when none is (a device of this account, or a suite
    /// never shared).
    static func account(of origin: UInt64, in txn: LMDBTransaction) throws -> String? {
        try withKeyBytes(key(origin)) { key in try txn.get(.meta, key).map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Records `accounts` (origin → account), writing only what is new.
    static func record(_ accounts: [UInt64: String], in txn: LMDBTransaction) throws {
        for (origin, account) in accounts where try !self.account(of: origin, in: txn).isSameName(as: account) {
            try withKeyBytes(key(origin)) { key in try withKeyBytes(account) { try txn.put(.meta, key, $0) } }
        }
    }
}

extension SharedDefaults.Transaction {
    /// Records which account writes as each of `accounts`' origins (`OriginAccounts`).
    func recordOriginAccounts(_ accounts: [UInt64: String]) throws {
        try OriginAccounts.record(accounts, in: txn)
    }

    /// The source of a remote change by the device `origin`: another account's device when sync
    /// recorded its account (`OriginAccounts`), otherwise another device.
    static func remoteSource(origin: UInt64, in txn: LMDBTransaction) throws -> SharedDefaults.Change.Source {
        if let account = try OriginAccounts.account(of: origin, in: txn) { return .anotherAccount(account: account, deviceID: origin) }
        return .anotherDevice(deviceID: origin)
    }
}
