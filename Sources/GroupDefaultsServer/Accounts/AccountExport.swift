package import Foundation
package import GroupDefaultsWire

/// One account's data as one JSON document (`groupdefaults-server accounts export`): its suites
/// with every entry (tombstones too), each key's history, its key bags (by epoch, as stored),
/// members and invitations; the suites other accounts share with it; its devices, tokens and
/// pairings. The document is `AccountExportDocument` (GroupDefaultsWire), which the device export
/// writes too; its schema is docs/account-export.md.
package typealias AccountExport = AccountExportDocument<[String: StoredKeyBag]>

extension AccountExportDocument.Membership {
    init(_ member: StoredMember) {
        self.init(
            owner: member.owner,
            suite: member.suite,
            account: member.account,
            role: member.role,
            added: AccountExport.date(member.added),
            invitedBy: member.invitedBy,
            awaitingKeys: member.awaitingKeys == true ? true : nil
        )
    }
}

extension AccountExportDocument.Invitation {
    init(_ invitation: StoredInvitation, now: Date) {
        self.init(
            id: invitation.id,
            role: invitation.role,
            state: invitation.state(at: now),
            createdBy: invitation.createdBy,
            created: AccountExport.date(invitation.created),
            expires: AccountExport.date(invitation.expires),
            acceptedBy: invitation.acceptedBy,
            accepted: invitation.accepted.map(AccountExport.date),
            revoked: invitation.revoked.map(AccountExport.date)
        )
    }
}

extension AccountExportDocument where KeyBags == [String: StoredKeyBag] {
    /// Reads the account's data through the storage protocols' own queries; `suiteFilter` keeps
    /// only the suites it accepts (a device's export: those its token reaches).
    package static func read(
        account: String,
        from storage: some SuiteAdmin & SyncStore & KeyBagStore & DeviceStore & TokenStore & AccountStore & SharingStore,
        suiteFilter: (String) -> Bool = { _ in true },
        includeTokens: Bool = true,
        now: Date = Date()
    ) async throws -> AccountExport {
        var suites: [Suite] = []
        for summary in try await storage.suiteSummaries(account: account) where suiteFilter(summary.name) {
            var entries: [SyncEntry] = []
            var after: String?
            var head: UInt64 = 0
            repeat {
                let page = try await storage.snapshot(account: account, suite: summary.name, after: after, limit: 1000).page()
                entries += page.entries
                head = page.headRev
                after = page.next
            } while after != nil
            var history: [KeyHistory] = []
            after = nil
            repeat {
                let page = try await storage.history(account: account, suite: summary.name, after: after, limit: 1000).page()
                history += page.history
                after = page.next
            } while after != nil
            var bags: [String: StoredKeyBag] = [:]
            for (epoch, bag) in try await storage.keyBags(account: account, suite: summary.name) { bags[String(epoch)] = bag }
            var suite = Suite(name: summary.name, headRev: head, entries: entries, history: history, keyBags: bags.isEmpty ? nil : bags)
            suite.members = try await storage.members(owner: account, suite: summary.name)
                .sorted { Array($0.account.utf8).lexicographicallyPrecedes($1.account.utf8) }.map(Membership.init)
            suite.invitations = try await storage.invitations(owner: account, suite: summary.name).map { Invitation($0, now: now) }
            suite.rotationDue = try await storage.rotationDue(owner: account, suite: summary.name)
            suites.append(suite)
        }
        let memberships = try await storage.memberships(account: account)
            .sorted { ($0.owner + "\u{0}" + $0.suite).utf8.lexicographicallyPrecedes(($1.owner + "\u{0}" + $1.suite).utf8) }
            .map(Membership.init)
        // Each device as `GET /v1/devices` lists it, its `unverified` mark included; none is `current`.
        let seen = try await storage.devices(account: account)
        let unverified = StoredDevice.unverified(among: seen, activeTokens: try await storage.activeTokenIDs(account: account, at: now))
        let devices = seen.map { $0.info(current: false, unverified: unverified[$0.identity] != nil) { suiteFilter($0) } }
        let tokens =
            includeTokens
            ? try await storage.tokens(account: account).map { token in
                Token(
                    id: token.id,
                    device: token.device,
                    suitePatterns: token.suitePatterns,
                    readOnly: token.readOnly,
                    created: Self.date(token.created),
                    expires: token.expires.map(Self.date),
                    revoked: token.revoked.map(Self.date)
                )
            } : []
        let pairings = try await storage.pairings(account: account).filter { suiteFilter($0.suite) }.map { pairing in
            Pairing(
                suite: pairing.suite,
                state: pairing.state.state.rawValue,
                creatorTokenID: pairing.creatorTokenID,
                tokenID: pairing.tokenID,
                readOnly: pairing.readOnly,
                created: Self.date(pairing.created),
                expires: Self.date(pairing.expires)
            )
        }
        var document = AccountExport(exported: Self.date(now), suites: suites, devices: devices)
        document.account = account
        document.memberships = memberships
        document.tokens = tokens
        document.pairings = pairings
        return document
    }
}
