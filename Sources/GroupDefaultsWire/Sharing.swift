// Shared suites: an owner account's suite that other accounts use too, each as a member with a
// role. The owner (or an admin member) makes a one-time invitation, registered under an id derived
// from its code (the code never reaches the server); a device of another account accepts it with
// its own token and becomes a member. A member's requests name the owner's account with the query
// parameter `owner` on the suite's routes (`/v1/suites/{suite}/…?owner=ACCOUNT`).

/// What an account may do with a suite: its `owner` everything; an `admin` member reads, writes,
/// invites `read` and `write` members and removes them; a `write` member reads and writes; a
/// `read` member only reads.
public enum SuiteRole: String, Codable, Sendable, Hashable, CaseIterable, Comparable {
    /// Reads the suite: pulls, its history, its members.
    case read
    /// Reads and writes (pushes).
    case write
    /// Reads, writes, and invites and removes `read` and `write` members.
    case admin
    /// The account the suite belongs to: everything, its quotas included.
    case owner

    /// Whether the role may push.
    public var mayWrite: Bool { self != .read }

    /// Whether the role may invite and remove members.
    public var mayAdminister: Bool { self == .admin || self == .owner }

    /// The roles an invitation may give: every one but `owner`.
    public static let invitable: [SuiteRole] = [.read, .write, .admin]

    /// Roles in order of what they allow: `read` < `write` < `admin` < `owner`.
    public static func < (lhs: SuiteRole, rhs: SuiteRole) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// `POST /v1/suites/{suite}/invitations`: an invitation for the suite, filed under the id derived
/// from its code (`invitation_id`, 32 lowercase hex digits), giving `role`, working for
/// `expires_in` seconds (24 hours if absent; at most 30 days).
public struct InvitationRequest: Codable, Sendable, Hashable {
    /// The id derived from the invitation's code (lowercase hex).
    public var invitationID: String
    /// The role the invitation gives (`read`, `write` or `admin`).
    public var role: SuiteRole
    /// How long it works, in seconds (`expires_in`); nil for the server's default, 24 hours.
    public var expiresIn: UInt64?
    /// What the invitation offers (the suite, the role, whether it is end-to-end encrypted),
    /// authenticated with a key derived from the code (HMAC-SHA256, base64; `offer_mac`): the
    /// joining device checks the server's description against it, so that the server cannot, for
    /// one, present an encrypted suite as a plain one.
    public var offerMAC: String?

    /// How long an invitation works unless its maker says otherwise: 24 hours, in seconds.
    public static let defaultLifetime: UInt64 = 24 * 3600
    /// The lifetimes an invitation may have, in seconds: 60 seconds to 30 days.
    public static let lifetimes: ClosedRange<UInt64> = 60...(30 * 24 * 3600)

    /// An invitation under `invitationID` giving `role`, working for `expiresIn` seconds.
    public init(invitationID: String, role: SuiteRole, expiresIn: UInt64? = nil, offerMAC: String? = nil) {
        self.invitationID = invitationID
        self.role = role
        self.expiresIn = expiresIn
        self.offerMAC = offerMAC
    }

    enum CodingKeys: String, CodingKey {
        case invitationID = "invitation_id"
        case role
        case expiresIn = "expires_in"
        case offerMAC = "offer_mac"
    }
}

/// An invitation as the server describes it (never with its id or code).
public struct InvitationInfo: Codable, Sendable, Hashable {
    /// Where an invitation stands.
    public enum State: String, Codable, Sendable, Hashable {
        /// It can be accepted.
        case pending
        /// An account accepted it (`accepted_by`); it cannot be used again.
        case accepted
        /// The owner or an admin revoked it.
        case revoked
        /// It expired unused.
        case expired
    }

    /// Its public name, for listing and revoking (not the code, not its id).
    public var id: String
    /// The account that owns the suite.
    public var owner: String
    /// The suite, as its owner names it.
    public var suite: String
    /// The role it gives.
    public var role: SuiteRole
    /// The account that made it (`created_by`): the owner or an admin.
    public var createdBy: String
    /// When it was made and when it stops working, as typed-JSON dates.
    public var created: String
    /// See `created`.
    public var expires: String
    /// Where it stands.
    public var state: State
    /// The account that accepted it (`accepted_by`), once accepted.
    public var acceptedBy: String?
    /// Whether the suite is end-to-end encrypted: the joining device then sends a claim with its
    /// acceptance and waits for the suite's keys (`keys`), which a device of the owner hands over.
    public var encrypted: Bool?
    /// The accepting device's member key and proof, for the owner's device (an encrypted suite).
    public var claim: InvitationClaim?
    /// The suite's keys sealed to the claim's member key (base64), once the owner's device handed
    /// them over: only the joining device opens them.
    public var keys: String?
    /// The inviting device's authentication of what the invitation offers
    /// (`InvitationRequest.offerMAC`).
    public var offerMAC: String?

    /// An invitation as described.
    public init(
        id: String,
        owner: String,
        suite: String,
        role: SuiteRole,
        createdBy: String,
        created: String,
        expires: String,
        state: State,
        acceptedBy: String? = nil
    ) {
        self.id = id
        self.owner = owner
        self.suite = suite
        self.role = role
        self.createdBy = createdBy
        self.created = created
        self.expires = expires
        self.state = state
        self.acceptedBy = acceptedBy
    }

    enum CodingKeys: String, CodingKey {
        case id, owner, suite, role
        case createdBy = "created_by"
        case created, expires, state
        case acceptedBy = "accepted_by"
        case encrypted, claim, keys
        case offerMAC = "offer_mac"
    }
}

/// `POST /v1/invitations/{id}/accept`'s body for an end-to-end encrypted suite: the joining
/// device's new member key (X25519, base64) and its proof that it knows the code (HMAC-SHA256 under
/// a key derived from the code, base64), so that the server cannot put a key of its own in its place.
public struct InvitationClaim: Codable, Sendable, Hashable {
    /// The member key's public half (base64).
    public var memberKey: String
    /// The proof (base64).
    public var proof: String

    /// A claim as described.
    public init(memberKey: String, proof: String) {
        self.memberKey = memberKey
        self.proof = proof
    }

    enum CodingKeys: String, CodingKey {
        case memberKey = "member_key"
        case proof
    }
}

/// A member account's key vouched for by the suite's owner key: the Ed25519 signature (base64) of
/// the suite, the account, the member key and the epoch the suite was at when it was admitted. The
/// owner's devices seal each new epoch's key to the member keys they can check this way.
public struct MemberAdmission: Codable, Sendable, Hashable {
    /// The member key's public half (X25519, base64).
    public var memberKey: String
    /// The suite's key epoch when the member was admitted.
    public var epoch: UInt32
    /// The owner key's signature (base64).
    public var signature: String

    /// An admission as described.
    public init(memberKey: String, epoch: UInt32, signature: String) {
        self.memberKey = memberKey
        self.epoch = epoch
        self.signature = signature
    }

    enum CodingKeys: String, CodingKey {
        case memberKey = "member_key"
        case epoch, signature
    }
}

/// `PUT /v1/suites/{suite}/invitations/{id}/keys`: the owner's device hands the suite's keys to
/// the device that accepted an invitation to an end-to-end encrypted suite, sealed to its member
/// key, and records the member's admission.
public struct InvitationKeys: Codable, Sendable, Hashable {
    /// The sealed keys (base64).
    public var keys: String
    /// The member's admission.
    public var admission: MemberAdmission

    /// A hand-over as described.
    public init(keys: String, admission: MemberAdmission) {
        self.keys = keys
        self.admission = admission
    }
}

/// `GET /v1/suites/{suite}/invitations`: the suite's invitations, newest first.
public struct InvitationList: Codable, Sendable, Hashable {
    /// The invitations (pending ones, and those that ended in the last 30 days).
    public var invitations: [InvitationInfo]

    /// A list of `invitations`.
    public init(invitations: [InvitationInfo]) { self.invitations = invitations }
}

/// An account's membership of another account's suite: what accepting an invitation made (the
/// asking account a member of `owner`'s `suite` with `role`), and what a member device's suite
/// keeps of it (`SyncSettings.shared` in GroupDefaultsSync).
public struct Membership: Codable, Sendable, Hashable {
    /// The account that owns the suite: the `owner` parameter of the member's requests.
    public var owner: String
    /// The suite, as its owner names it.
    public var suite: String
    /// The member's role.
    public var role: SuiteRole
    /// The member's own account (the one whose token joined); nil where it is not known (a
    /// membership recorded before it was kept).
    public var account: String?

    /// A membership as described.
    public init(owner: String, suite: String, role: SuiteRole, account: String? = nil) {
        self.owner = owner
        self.suite = suite
        self.role = role
        self.account = account
    }
}

/// `GET /v1/suites/{suite}/members`: who shares the suite. The owner and admins see each member's
/// devices that used it; other members see accounts and roles.
public struct MemberList: Codable, Sendable, Hashable {
    /// One account that shares the suite.
    public struct Member: Codable, Sendable, Hashable {
        /// The account.
        public var account: String
        /// Its role (`owner` for the owner).
        public var role: SuiteRole
        /// When it joined (accepted its invitation), as a typed-JSON date; nil for the owner.
        public var added: String?
        /// Its devices that pushed or pulled the suite, with when they were last seen; nil when the
        /// asking account may not see them.
        public var devices: [DeviceInfo]?
        /// In an end-to-end encrypted suite, its member key as the owner key admitted it.
        public var admission: MemberAdmission?

        /// A member as described.
        public init(account: String, role: SuiteRole, added: String?, devices: [DeviceInfo]?, admission: MemberAdmission? = nil) {
            self.account = account
            self.role = role
            self.added = added
            self.devices = devices
            self.admission = admission
        }
    }

    /// The account that owns the suite.
    public var owner: String
    /// The suite, as its owner names it.
    public var suite: String
    /// The asking account (`account`) and its role (`you`).
    public var account: String
    /// See `account`.
    public var you: SuiteRole
    /// The owner first, then the members by account.
    public var members: [Member]
    /// The keys pinned for the members (`PinnedKeys.keys`); nil from a server that has no pins.
    public var pinned: [String]?

    /// A list as described.
    public init(owner: String, suite: String, account: String, you: SuiteRole, members: [Member], pinned: [String]? = nil) {
        self.owner = owner
        self.suite = suite
        self.account = account
        self.you = you
        self.members = members
        self.pinned = pinned
    }
}

/// `POST /v1/suites/{suite}/pins`: keys the owner or an admin pins for the members, or unpins.
///
/// A pinned key is the owner's to set: the server refuses every member's write of it (per op,
/// `pinned_key`), and members' devices report it as forced. A key that holds no value yet may be
/// pinned (its future values are the owner's). In an end-to-end encrypted suite the keys are key
/// ids (the server never learns a key's name).
public struct PinChange: Codable, Sendable, Hashable {
    /// Keys to pin.
    public var pin: [String]
    /// Keys to unpin (a key both pinned and unpinned here ends unpinned).
    public var unpin: [String]
    /// In an end-to-end encrypted suite, each pinned key id's name, sealed with the suite's key
    /// (as a deletion of the key stamped 0 by origin 0): members' devices open it to learn which
    /// key is pinned; the server cannot.
    public var names: [String: SealedPayload]?

    /// A change as described.
    public init(pin: [String] = [], unpin: [String] = [], names: [String: SealedPayload]? = nil) {
        self.pin = pin
        self.unpin = unpin
        self.names = names
    }

    /// The most keys one change may name.
    public static let maximumKeys = 1000
}

/// `GET /v1/suites/{suite}/pins` and `POST`'s answer: the suite's pinned keys, in byte order.
public struct PinnedKeys: Codable, Sendable, Hashable {
    /// The account that owns the suite.
    public var owner: String
    /// The suite, as its owner names it.
    public var suite: String
    /// The pinned keys (key ids in an end-to-end encrypted suite).
    public var keys: [String]
    /// In an end-to-end encrypted suite, the sealed name of each key id the pinning device gave one
    /// (`PinChange.names`).
    public var names: [String: SealedPayload]?

    /// A list as described.
    public init(owner: String, suite: String, keys: [String], names: [String: SealedPayload]? = nil) {
        self.owner = owner
        self.suite = suite
        self.keys = keys
        self.names = names
    }

    /// The most keys a suite may pin.
    public static let maximumKeys = 1000
}

/// `DELETE /v1/suites/{suite}/members/{account}`'s answer: who was removed from which suite.
public struct MemberRemoved: Codable, Sendable, Hashable {
    /// The account that owns the suite.
    public var owner: String
    /// The suite, as its owner names it.
    public var suite: String
    /// The account removed (or that left).
    public var account: String
    /// In an end-to-end encrypted suite whose keys the removed account held: the rotation now due
    /// (`rotation_due`), which the owner's devices make at their next sync; nil otherwise.
    public var rotationDue: KeyRotationDue?

    /// A removal as described.
    public init(owner: String, suite: String, account: String, rotationDue: KeyRotationDue? = nil) {
        self.owner = owner
        self.suite = suite
        self.account = account
        self.rotationDue = rotationDue
    }

    enum CodingKeys: String, CodingKey {
        case owner, suite, account
        case rotationDue = "rotation_due"
    }
}

/// A removal from an end-to-end encrypted shared suite that no key rotation has followed yet: the
/// removed account's devices still hold the suite's current key, so the owner's devices rotate at
/// their next sync (`groupdefaults-sync sync`, `run`), leaving the removed accounts out. The server
/// keeps it from a removal of a member that was handed the keys (console, API, `leave` or
/// `unshare`) until it stores a key bag of a later epoch than `epoch`; `GET …/key-bags` and the
/// removal's answer carry it.
public struct KeyRotationDue: Codable, Sendable, Hashable {
    /// The suite's key epoch at the first such removal: a key bag of a later epoch ends it.
    public var epoch: UInt32
    /// The accounts removed (or that left) since, in the order they went.
    public var removed: [String]
    /// When the first of them was removed (RFC 3339).
    public var since: String

    /// A rotation due since `since`, at `epoch`, for `removed`.
    public init(epoch: UInt32, removed: [String], since: String) {
        self.epoch = epoch
        self.removed = removed
        self.since = since
    }
}

/// The query parameter by which a member's request names the account that owns the suite.
public enum OwnerParameter {
    /// `owner`.
    public static let name = "owner"
}
