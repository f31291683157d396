public import Foundation

/// The account export document, once for both exports: `groupdefaults-server accounts export`
/// (every key) and `groupdefaults-sync export` (what a device's token reaches: no `account`,
/// `memberships`, `tokens`, `pairings`, nor a suite's `members`, `invitations` and
/// `rotation_due`). Its schema is docs/account-export.md; `format` and `version` head it.
///
/// `KeyBags` is how an encrypted suite's key bags are given: the server export's as stored, by
/// epoch; the device export's as `GET key-bags` answers them (`KeyBags`).
///
/// Entries are the wire's (`SyncEntry`: typed JSON values, stamps, `deleted`); a sealed entry is
/// exactly as stored and served, its payload opaque. Tokens are described, never their secret or
/// its hash; invitations by their public id, never their code or what a device sealed with them;
/// pairings by suite, state, tokens and times, never what claims them or the keys they carry.
public struct AccountExportDocument<KeyBags: Codable & Sendable>: Codable, Sendable {
    /// The document's kind: always `groupdefaults-account-export`.
    public var format = "groupdefaults-account-export"
    /// The schema's version (`currentVersion`).
    public var version = currentVersion
    /// The schema's version this code writes: 2 (1 gave `history` as an object by key, which a
    /// JSON reader takes two spellings of one key for one: `é` and `e` + U+0301).
    public static var currentVersion: Int { 2 }
    /// The account's name (server export only).
    public var account: String?
    /// When the export was made (typed-JSON date).
    public var exported: String
    /// The suites, by name.
    public var suites: [Suite]
    /// The suites other accounts share with it, by owner and suite in byte order (server export
    /// only).
    public var memberships: [Membership]?
    /// The devices the server has seen, as `GET /v1/devices` lists them.
    public var devices: [DeviceInfo]
    /// The account's tokens (server export only).
    public var tokens: [Token]?
    /// The pairings its devices made that the server still keeps (server export only).
    public var pairings: [Pairing]?

    /// A document of `suites` and `devices`, made at `exported`; the server export's other parts
    /// are set by the server.
    public init(exported: String, suites: [Suite], devices: [DeviceInfo]) {
        self.exported = exported
        self.suites = suites
        self.devices = devices
    }

    /// One suite: its head revision, entries in key order, the history of each key and its key bags.
    public struct Suite: Codable, Sendable {
        /// The suite's name.
        public var name: String
        /// The revision of its newest change.
        public var headRev: UInt64
        /// Its entries (tombstones too), in key order.
        public var entries: [SyncEntry]
        /// Each key's versions the server keeps, newest first, in the order of `entries`: a list,
        /// not an object by key, so that two spellings of a key stay two.
        public var history: [KeyHistory]
        /// Its key bags; nil (absent) for a plain suite.
        public var keyBags: KeyBags?
        /// The accounts it is shared with, in byte order of their names (server export only).
        public var members: [Membership]?
        /// Its invitations the server keeps, newest first (server export only).
        public var invitations: [Invitation]?
        /// The key rotation due since a member holding its keys was removed; nil (absent) when
        /// none is, and in the device export.
        public var rotationDue: KeyRotationDue?

        /// A suite as the device export gives it; the server sets `members`, `invitations` and
        /// `rotationDue` too.
        public init(name: String, headRev: UInt64, entries: [SyncEntry], history: [KeyHistory], keyBags: KeyBags?) {
            self.name = name
            self.headRev = headRev
            self.entries = entries
            self.history = history
            self.keyBags = keyBags
        }

        enum CodingKeys: String, CodingKey {
            case name, entries, history, members, invitations
            case headRev = "head_rev"
            case keyBags = "key_bags"
            case rotationDue = "rotation_due"
        }
    }

    /// One account's membership of one account's suite: in a suite's `members`, who was let in;
    /// in `memberships`, where the exported account was let in.
    public struct Membership: Codable, Sendable {
        /// The suite's owner.
        public var owner: String
        /// The suite's name.
        public var suite: String
        /// The member account.
        public var account: String
        /// What it may do.
        public var role: SuiteRole
        /// When it accepted its invitation (typed-JSON date).
        public var added: String
        /// Who invited it.
        public var invitedBy: String
        /// True while an end-to-end encrypted suite's keys have not been handed to it yet; nil
        /// (absent) otherwise.
        public var awaitingKeys: Bool?

        /// The membership of `account` in `owner`'s `suite`.
        public init(owner: String, suite: String, account: String, role: SuiteRole, added: String, invitedBy: String, awaitingKeys: Bool?) {
            self.owner = owner
            self.suite = suite
            self.account = account
            self.role = role
            self.added = added
            self.invitedBy = invitedBy
            self.awaitingKeys = awaitingKeys
        }

        enum CodingKeys: String, CodingKey {
            case owner, suite, account, role, added
            case invitedBy = "invited_by"
            case awaitingKeys = "awaiting_keys"
        }
    }

    /// An invitation as the export tells it: its public id, never its code (what accepts it), the
    /// accepting device's claim or the keys sealed to it.
    public struct Invitation: Codable, Sendable {
        /// The public `inv_…` name.
        public var id: String
        /// The role it gives.
        public var role: SuiteRole
        /// Pending, accepted, revoked or expired, at the export's time.
        public var state: InvitationInfo.State
        /// The account that made it.
        public var createdBy: String
        /// When it was made (typed-JSON date).
        public var created: String
        /// When it expires (typed-JSON date).
        public var expires: String
        /// The account that accepted it, if one did.
        public var acceptedBy: String?
        /// When it was accepted (typed-JSON date), if it was.
        public var accepted: String?
        /// When it was revoked (typed-JSON date), if it was.
        public var revoked: String?

        /// An invitation as the export tells it.
        public init(
            id: String,
            role: SuiteRole,
            state: InvitationInfo.State,
            createdBy: String,
            created: String,
            expires: String,
            acceptedBy: String?,
            accepted: String?,
            revoked: String?
        ) {
            self.id = id
            self.role = role
            self.state = state
            self.createdBy = createdBy
            self.created = created
            self.expires = expires
            self.acceptedBy = acceptedBy
            self.accepted = accepted
            self.revoked = revoked
        }

        enum CodingKeys: String, CodingKey {
            case id, role, state, created, expires, accepted, revoked
            case createdBy = "created_by"
            case acceptedBy = "accepted_by"
        }
    }

    /// A token as the export tells it: what it reaches and when it was made or revoked.
    public struct Token: Codable, Sendable {
        /// The token's public id.
        public var id: String
        /// The device name it is bound to, if any.
        public var device: String?
        /// The suites it reaches.
        public var suitePatterns: [String]
        /// Whether it only reads.
        public var readOnly: Bool
        /// When it was made (typed-JSON date).
        public var created: String
        /// When it expires (typed-JSON date), if it does.
        public var expires: String?
        /// When it was revoked (typed-JSON date), if it was.
        public var revoked: String?

        /// A token as the export tells it.
        public init(id: String, device: String?, suitePatterns: [String], readOnly: Bool, created: String, expires: String?, revoked: String?) {
            self.id = id
            self.device = device
            self.suitePatterns = suitePatterns
            self.readOnly = readOnly
            self.created = created
            self.expires = expires
            self.revoked = revoked
        }

        enum CodingKeys: String, CodingKey {
            case id, device, created, expires, revoked
            case suitePatterns = "suite_patterns"
            case readOnly = "read_only"
        }
    }

    /// A pairing as the export tells it: never its id, the claiming device's public key and
    /// proof, or the keys sealed to it.
    public struct Pairing: Codable, Sendable {
        /// The suite it pairs.
        public var suite: String
        /// Waiting, claimed, handed over or ended.
        public var state: String
        /// The token of the device that made it.
        public var creatorTokenID: String
        /// The token made for the device that claimed it, once one did.
        public var tokenID: String?
        /// Whether that token only reads.
        public var readOnly: Bool
        /// When it was made (typed-JSON date).
        public var created: String
        /// When it expires (typed-JSON date).
        public var expires: String

        /// A pairing as the export tells it.
        public init(suite: String, state: String, creatorTokenID: String, tokenID: String?, readOnly: Bool, created: String, expires: String) {
            self.suite = suite
            self.state = state
            self.creatorTokenID = creatorTokenID
            self.tokenID = tokenID
            self.readOnly = readOnly
            self.created = created
            self.expires = expires
        }

        enum CodingKeys: String, CodingKey {
            case suite, state, created, expires
            case creatorTokenID = "creator_token_id"
            case tokenID = "token_id"
            case readOnly = "read_only"
        }
    }

    /// A date as the document writes it: typed JSON's (one outside years 0…9999 as its seconds
    /// since 1970).
    public static func date(_ date: Date) -> String {
        TypedJSONDate.format(date) ?? String(date.timeIntervalSince1970)
    }

    /// The document as JSON text: keys sorted, indented, slashes as they are.
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self)
    }
}
