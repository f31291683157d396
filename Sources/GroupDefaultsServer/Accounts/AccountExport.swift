package import Foundation
package import GroupDefaultsWire

/// One account's data as one JSON document (`groupdefaults-server accounts export`): its suites
/// with every entry (tombstones too), each key's history, its key bags, members and invitations;
/// the suites other accounts share with it; its devices, tokens and pairings.
/// The schema is docs/account-export.md; `format` and `version` head it.
///
/// Entries are the wire's (`SyncEntry`: typed JSON values, stamps, `deleted`); a sealed entry is
/// exactly as stored and served, its payload opaque. Tokens are described, never their secret or
/// its hash; invitations by their public id, never their code or what a device sealed with them. Pairings are described (suite, state, tokens, times), without what claims them or the
/// keys they carry.
package struct AccountExport: Sendable, Encodable {
    /// The document's kind: always `groupdefaults-account-export`.
    package var format = "groupdefaults-account-export"
    /// The schema's version: 2 (1 gave `history` as an object by key, which a JSON reader takes
    /// two spellings of one key for one: `é` and `e` + U+0301).
    package var version = AccountExport.version
    /// The schema's version this code writes (`version`).
    package static let version = 2
    package var account: String
    /// When the export was made (typed-JSON date).
    package var exported: String
    package var suites: [Suite]
    /// The suites other accounts share with it, by owner and suite (UTF-8 byte order).
    package var memberships: [Membership]
    package var devices: [DeviceInfo]
    package var tokens: [Token]
    package var pairings: [Pairing]

    /// One suite: its head revision, entries in key order, the history of each key and its key bags.
    package struct Suite: Sendable, Encodable {
        package var name: String
        package var headRev: UInt64
        package var entries: [SyncEntry]
        /// Each key's versions the server keeps, newest first, in the order of `entries`: a list, not
        /// an object by key, so that two spellings of a key stay two.
        package var history: [KeyHistory]
        /// The suite's key bags by epoch, as stored (sealed); nil (absent) for a plain suite.
        package var keyBags: [String: StoredKeyBag]?
        /// The accounts it is shared with (UTF-8 byte order of their names).
        package var members: [Membership]
        /// Its invitations the server keeps, newest first.
        package var invitations: [Invitation]
        /// The key rotation due since a member holding its keys was removed; nil (absent) when none is.
        package var rotationDue: KeyRotationDue?

        enum CodingKeys: String, CodingKey {
            case name, entries, history, members, invitations
            case headRev = "head_rev"
            case keyBags = "key_bags"
            case rotationDue = "rotation_due"
        }
    }

    /// One account's membership of one account's suite: in a suite's `members`, who was let in;
    /// in `memberships`, where the exported account was let in.
    package struct Membership: Sendable, Encodable {
        package var owner: String
        package var suite: String
        package var account: String
        package var role: SuiteRole
        package var added: String
        package var invitedBy: String
        /// True while an end-to-end encrypted suite's keys have not been handed to it yet; nil
        /// (absent) otherwise.
        package var awaitingKeys: Bool?

        init(_ member: StoredMember) {
            owner = member.owner
            suite = member.suite
            account = member.account
            role = member.role
            added = AccountExport.date(member.added)
            invitedBy = member.invitedBy
            awaitingKeys = member.awaitingKeys == true ? true : nil
        }

        enum CodingKeys: String, CodingKey {
            case owner, suite, account, role, added
            case invitedBy = "invited_by"
            case awaitingKeys = "awaiting_keys"
        }
    }

    /// An invitation as the export tells it: its public id, never its code (what accepts it), the
    /// accepting device's claim or the keys sealed to it.
    package struct Invitation: Sendable, Encodable {
        package var id: String
        package var role: SuiteRole
        package var state: InvitationInfo.State
        package var createdBy: String
        package var created: String
        package var expires: String
        package var acceptedBy: String?
        package var accepted: String?
        package var revoked: String?

        init(_ invitation: StoredInvitation, now: Date) {
            id = invitation.id
            role = invitation.role
            state = invitation.state(at: now)
            createdBy = invitation.createdBy
            created = AccountExport.date(invitation.created)
            expires = AccountExport.date(invitation.expires)
            acceptedBy = invitation.acceptedBy
            accepted = invitation.accepted.map(AccountExport.date)
            revoked = invitation.revoked.map(AccountExport.date)
        }

        enum CodingKeys: String, CodingKey {
            case id, role, state, created, expires, accepted, revoked
            case createdBy = "created_by"
            case acceptedBy = "accepted_by"
        }
    }

    /// A token as the export tells it: what it reaches and when it was made or revoked.
    package struct Token: Sendable, Encodable {
        package var id: String
        package var device: String?
        package var suitePatterns: [String]
        package var readOnly: Bool
        package var created: String
        package var expires: String?
        package var revoked: String?

        enum CodingKeys: String, CodingKey {
            case id, device, created, expires, revoked
            case suitePatterns = "suite_patterns"
            case readOnly = "read_only"
        }
    }

    /// A pairing as the export tells it: never its id, the claiming device's public key and
    /// proof, or the keys sealed to it.
    package struct Pairing: Sendable, Encodable {
        package var suite: String
        package var state: String
        package var creatorTokenID: String
        package var tokenID: String?
        package var readOnly: Bool
        package var created: String
        package var expires: String

        enum CodingKeys: String, CodingKey {
            case suite, state, created, expires
            case creatorTokenID = "creator_token_id"
            case tokenID = "token_id"
            case readOnly = "read_only"
        }
    }

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
            suites.append(
                Suite(
                    name: summary.name,
                    headRev: head,
                    entries: entries,
                    history: history,
                    keyBags: bags.isEmpty ? nil : bags,
                    members: try await storage.members(owner: account, suite: summary.name)
                        .sorted { Array($0.account.utf8).lexicographicallyPrecedes($1.account.utf8) }.map(Membership.init),
                    invitations: try await storage.invitations(owner: account, suite: summary.name).map { Invitation($0, now: now) },
                    rotationDue: try await storage.rotationDue(owner: account, suite: summary.name)
                )
            )
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
        return AccountExport(
            account: account,
            exported: Self.date(now),
            suites: suites,
            memberships: memberships,
            devices: devices,
            tokens: tokens,
            pairings: pairings
        )
    }

    /// A date as typed JSON writes it (one outside years 0…9999 as its seconds since 1970).
    fileprivate static func date(_ date: Date) -> String {
        TypedJSONDate.format(date) ?? String(date.timeIntervalSince1970)
    }

    /// The document as JSON text: keys sorted, indented, slashes as they are.
    package func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }
}
