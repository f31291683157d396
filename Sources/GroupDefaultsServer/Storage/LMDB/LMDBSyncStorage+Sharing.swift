package import Foundation
import GroupDefaultsLMDB
package import GroupDefaultsWire

// Shared suites, in `sharing` (no account or suite name holds NUL, so NUL separates them):
// - `m/` + owner + NUL + suite + NUL + account → `StoredMember` JSON: a suite's members, in order;
// - `a/` + account + NUL + owner + NUL + suite → nothing: the suites shared with an account;
// - `i/` + lookup → `StoredInvitation` JSON;
// - `s/` + owner + NUL + suite + NUL + lookup → nothing: a suite's invitations;
// - `r/` + owner + NUL + suite + NUL → `KeyRotationDue` JSON: a rotation due after a removal;
// - `p/` + owner + NUL + suite + NUL + key → the key's sealed name (`SealedPayload` JSON), or
//   nothing: a suite's pinned keys, in byte order.
extension LMDBSyncStorage: SharingStore {
    enum SharingKeys {
        static func suite(_ owner: String, _ suite: String) -> [UInt8] { Array(owner.utf8) + [0] + Array(suite.utf8) + [0] }
        static func members(_ owner: String, _ suite: String) -> [UInt8] { Array("m/".utf8) + Self.suite(owner, suite) }
        static func member(_ owner: String, _ suite: String, _ account: String) -> [UInt8] { members(owner, suite) + Array(account.utf8) }
        static func memberships(_ account: String) -> [UInt8] { Array("a/".utf8) + Array(account.utf8) + [0] }
        static func membership(_ member: StoredMember) -> [UInt8] {
            memberships(member.account) + Array(member.owner.utf8) + [0] + Array(member.suite.utf8)
        }
        static func invitation(_ lookup: String) -> [UInt8] { Array("i/".utf8) + Array(lookup.utf8) }
        static func invitations(_ owner: String, _ suite: String) -> [UInt8] { Array("s/".utf8) + Self.suite(owner, suite) }
        static func rotationDue(_ owner: String, _ suite: String) -> [UInt8] { Array("r/".utf8) + Self.suite(owner, suite) }
        static func pins(_ owner: String, _ suite: String) -> [UInt8] { Array("p/".utf8) + Self.suite(owner, suite) }
    }

    /// One key, read in place on the calling thread: asked at every request of a member and at
    /// every turn of its event stream, a hop to the read queue and back cost more than the read
    /// (measured: about 1.3 ms more per change reaching a member's device, `groupdefaults-bench sync`).
    package func member(owner: String, suite: String, account: String) async throws -> StoredMember? {
        try whileOpen {
            var member: StoredMember?
            try environment.readTransaction { txn in member = try Self.member(txn, owner: owner, suite: suite, account: account) }
            return member
        }
    }

    package func members(owner: String, suite: String) async throws -> [StoredMember] {
        try await read { txn in
            var members: [StoredMember] = []
            try Self.forEach(txn, prefix: SharingKeys.members(owner, suite)) { _, value in
                members.append(try JSONDecoder().decode(StoredMember.self, from: Data(value)))
            }
            return members
        }
    }

    /// One cursor step, in place on the calling thread (as `member`).
    package func hasMembers(owner: String, suite: String) async throws -> Bool {
        try whileOpen {
            var found = false
            try environment.readTransaction { txn in
                try Self.forEach(txn, prefix: SharingKeys.members(owner, suite)) { _, _ in found = true }
            }
            return found
        }
    }

    package func memberships(account: String) async throws -> [StoredMember] {
        try await read { txn in
            let prefix = SharingKeys.memberships(account)
            var keys: [[UInt8]] = []
            try Self.forEach(txn, prefix: prefix) { key, _ in keys.append(Array(key[prefix.count...])) }
            return try keys.compactMap { rest in
                let parts = rest.split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2 else { return nil }
                return try Self.member(
                    txn,
                    owner: String(decoding: parts[0], as: UTF8.self),
                    suite: String(decoding: parts[1], as: UTF8.self),
                    account: account
                )
            }
        }
    }

    package func createInvitation(_ invitation: StoredInvitation, now: Date) async throws {
        let json = Array(try JSONEncoder().encode(invitation))
        try await write { txn in
            var held: [StoredInvitation] = []
            try Self.forEach(txn, prefix: SharingKeys.invitations(invitation.owner, invitation.suite)) { key, _ in
                if let kept = try Self.invitation(txn, lookup: String(decoding: key.suffix(64), as: UTF8.self)) { held.append(kept) }
            }
            let pending = held.count { $0.state(at: now) == .pending }
            for lookup in StoredInvitation.endedToDrop(held, at: now) {
                try Self.delete(txn, DB.sharing, SharingKeys.invitation(lookup))
                try Self.delete(txn, DB.sharing, SharingKeys.invitations(invitation.owner, invitation.suite) + Array(lookup.utf8))
            }
            try StoredInvitation.checkCount(pending)
            guard try Self.get(txn, DB.sharing, SharingKeys.invitation(invitation.lookup)) == nil else {
                throw SyncStorageError(.invitationUsed, "an invitation with this id exists: make a new code")
            }
            try Self.put(txn, DB.sharing, SharingKeys.invitation(invitation.lookup), json)
            try Self.put(txn, DB.sharing, SharingKeys.invitations(invitation.owner, invitation.suite) + Array(invitation.lookup.utf8), [])
        }
    }

    package func invitation(lookup: String) async throws -> StoredInvitation? {
        try await read { txn in try Self.invitation(txn, lookup: lookup) }
    }

    package func invitations(owner: String, suite: String) async throws -> [StoredInvitation] {
        let now = Date()
        return try await read { txn in
            var found: [StoredInvitation] = []
            try Self.forEach(txn, prefix: SharingKeys.invitations(owner, suite)) { key, _ in
                if let invitation = try Self.invitation(txn, lookup: String(decoding: key.suffix(64), as: UTF8.self)), invitation.isKept(at: now) {
                    found.append(invitation)
                }
            }
            return found.sorted { ($0.created, $0.id) > ($1.created, $1.id) }
        }
    }

    package func acceptInvitation(lookup: String, account: String, claim: InvitationClaim?, now: Date) async throws -> StoredMember {
        try await write { txn in
            guard var invitation = try Self.invitation(txn, lookup: lookup) else { throw Self.invitationNotFound }
            let existing = try Self.member(txn, owner: invitation.owner, suite: invitation.suite, account: account)
            let member = try invitation.accept(by: account, existing: existing, claim: claim, now: now)
            try Self.put(txn, DB.sharing, SharingKeys.invitation(lookup), Array(try JSONEncoder().encode(invitation)))
            try Self.put(txn, DB.sharing, SharingKeys.member(member.owner, member.suite, member.account), Array(try JSONEncoder().encode(member)))
            try Self.put(txn, DB.sharing, SharingKeys.membership(member), [])
            return member
        }
    }

    package func handOverKeys(owner: String, suite: String, id: String, keys: String, admission: MemberAdmission) async throws -> StoredInvitation {
        try await write { txn in
            var invitation = try Self.invitation(txn, owner: owner, suite: suite, id: id)
            var member = try invitation.acceptedBy.flatMap { try Self.member(txn, owner: owner, suite: suite, account: $0) }
            try invitation.handOver(keys: keys, admission: admission, to: &member)
            guard let member else { throw SyncStorageError(.notAMember, "the invitation's member is gone") }
            try Self.put(txn, DB.sharing, SharingKeys.invitation(invitation.lookup), Array(try JSONEncoder().encode(invitation)))
            try Self.put(txn, DB.sharing, SharingKeys.member(owner, suite, member.account), Array(try JSONEncoder().encode(member)))
            if let due = try Self.rotationDue(txn, owner: owner, suite: suite) {
                try Self.putRotationDue(txn, owner: owner, suite: suite, due.admitting(member.account))
            }
            return invitation
        }
    }

    package func revokeInvitation(owner: String, suite: String, id: String, by role: SuiteRole, now: Date) async throws -> StoredInvitation {
        try await write { txn in
            var invitation = try Self.invitation(txn, owner: owner, suite: suite, id: id)
            try invitation.revoke(by: role, now: now)
            try Self.put(txn, DB.sharing, SharingKeys.invitation(invitation.lookup), Array(try JSONEncoder().encode(invitation)))
            return invitation
        }
    }

    package func removeMember(owner: String, suite: String, account: String) async throws -> Bool {
        let now = Date()
        let removed = try await write { txn -> Bool in
            guard let member = try Self.member(txn, owner: owner, suite: suite, account: account) else { return false }
            try Self.delete(txn, DB.sharing, SharingKeys.member(owner, suite, account))
            try Self.delete(txn, DB.sharing, SharingKeys.membership(member))
            let epoch = try Self.suiteRecord(txn, LMDBKeys.suiteName(account: owner, suite: suite))?.epoch ?? 0
            let existing = try Self.rotationDue(txn, owner: owner, suite: suite)
            let due = KeyRotationDue.after(removing: member, epoch: epoch, existing: existing, now: now)
            if due != existing { try Self.putRotationDue(txn, owner: owner, suite: suite, due) }
            var made: [StoredInvitation] = []
            try Self.forEach(txn, prefix: SharingKeys.invitations(owner, suite)) { key, _ in
                if let invitation = try Self.invitation(txn, lookup: String(decoding: key.suffix(64), as: UTF8.self)),
                    invitation.createdBy.isSameName(as: account), invitation.state(at: now) == .pending
                {
                    made.append(invitation)
                }
            }
            for var invitation in made {
                try invitation.revoke(by: .owner, now: now)
                try Self.put(txn, DB.sharing, SharingKeys.invitation(invitation.lookup), Array(try JSONEncoder().encode(invitation)))
            }
            return true
        }
        // The removed account's open streams wake and re-check their access, which is gone.
        if removed { waiters.notify(.init(account: owner, suite: suite), head: .max) }
        return removed
    }

    /// Deletes every membership of `account` and every member and invitation of its suites, in
    /// `txn` (an account's deletion). Returns the suites shared with it, and its own suites that
    /// had members, whose waits the caller wakes.
    static func deleteSharing(_ txn: LMDBTransaction, account: String) throws -> [(owner: String, suite: String)] {
        var touched: [(owner: String, suite: String)] = []
        var deletions: [[UInt8]] = []
        // Its memberships of other accounts' suites.
        let prefix = SharingKeys.memberships(account)
        try forEach(txn, prefix: prefix) { key, _ in
            let parts = key[prefix.count...].split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { return }
            let owner = String(decoding: parts[0], as: UTF8.self)
            let suite = String(decoding: parts[1], as: UTF8.self)
            deletions.append(Array(key))
            deletions.append(SharingKeys.member(owner, suite, account))
            touched.append((owner, suite))
        }
        // A deleted member's devices still hold the keys it was handed: a rotation is due there.
        let now = Date()
        for (owner, suite) in touched {
            guard let member = try member(txn, owner: owner, suite: suite, account: account) else { continue }
            let epoch = try suiteRecord(txn, LMDBKeys.suiteName(account: owner, suite: suite))?.epoch ?? 0
            let existing = try rotationDue(txn, owner: owner, suite: suite)
            let due = KeyRotationDue.after(removing: member, epoch: epoch, existing: existing, now: now)
            if due != existing { try putRotationDue(txn, owner: owner, suite: suite, due) }
        }
        // Its own suites' members, invitations, rotations due and pins: every `m/`, `s/`, `r/` and `p/` record
        // under its name.
        for kind in ["m/", "s/", "r/", "p/"] {
            let ownPrefix = Array(kind.utf8) + Array(account.utf8) + [0]
            try forEach(txn, prefix: ownPrefix) { key, value in
                deletions.append(Array(key))
                if kind == "m/", let member = try? JSONDecoder().decode(StoredMember.self, from: Data(value)) {
                    deletions.append(SharingKeys.membership(member))
                    touched.append((account, member.suite))
                }
                if kind == "s/" { deletions.append(SharingKeys.invitation(String(decoding: key.suffix(64), as: UTF8.self))) }
            }
        }
        for key in deletions { try delete(txn, DB.sharing, key) }
        return touched
    }

    private static let invitationNotFound = SyncStorageError(
        .invitationNotFound,
        "no invitation has this code: check it, or ask for a new one"
    )

    package func rotationDue(owner: String, suite: String) async throws -> KeyRotationDue? {
        try await read { txn in try Self.rotationDue(txn, owner: owner, suite: suite) }
    }

    /// The rotation due in `owner`'s `suite`, in `txn`.
    static func rotationDue(_ txn: LMDBTransaction, owner: String, suite: String) throws -> KeyRotationDue? {
        guard let json = try get(txn, DB.sharing, SharingKeys.rotationDue(owner, suite)) else { return nil }
        return try JSONDecoder().decode(KeyRotationDue.self, from: Data(json))
    }

    /// Stores `due` as the rotation due in `owner`'s `suite`, or deletes the record for nil.
    static func putRotationDue(_ txn: LMDBTransaction, owner: String, suite: String, _ due: KeyRotationDue?) throws {
        if let due {
            try put(txn, DB.sharing, SharingKeys.rotationDue(owner, suite), Array(try JSONEncoder().encode(due)))
        } else {
            try delete(txn, DB.sharing, SharingKeys.rotationDue(owner, suite))
        }
    }

    static func member(_ txn: LMDBTransaction, owner: String, suite: String, account: String) throws -> StoredMember? {
        guard let json = try get(txn, DB.sharing, SharingKeys.member(owner, suite, account)) else { return nil }
        return try JSONDecoder().decode(StoredMember.self, from: Data(json))
    }

    /// The invitation of `owner`'s `suite` whose public id is `id`.
    private static func invitation(_ txn: LMDBTransaction, owner: String, suite: String, id: String) throws -> StoredInvitation {
        var found: StoredInvitation?
        try forEach(txn, prefix: SharingKeys.invitations(owner, suite)) { key, _ in
            if let invitation = try invitation(txn, lookup: String(decoding: key.suffix(64), as: UTF8.self)), invitation.id == id {
                found = invitation
            }
        }
        guard let found else { throw SyncStorageError(.invitationNotFound, "the suite has no invitation \(id)") }
        return found
    }

    private static func invitation(_ txn: LMDBTransaction, lookup: String) throws -> StoredInvitation? {
        guard let json = try get(txn, DB.sharing, SharingKeys.invitation(lookup)) else { return nil }
        return try JSONDecoder().decode(StoredInvitation.self, from: Data(json))
    }

    /// Calls `body` with each record of `sharing` under `prefix`, in key order.
    private static func forEach(_ txn: LMDBTransaction, prefix: [UInt8], _ body: ([UInt8], [UInt8]) throws -> Void) throws {
        try prefix.withUnsafeBytes { start in
            try txn.forEach(DB.sharing, from: start) { key, value in
                guard key.starts(with: prefix) else { return false }
                try body(Array(key), Array(value))
                return true
            }
        }
    }

    /// Runs `body` in a read transaction off the cooperative pool.
    private func read<T: Sendable>(_ body: @escaping @Sendable (LMDBTransaction) throws -> T) async throws -> T {
        let environment = self.environment
        return try await onReadQueue {
            var result: T?
            try environment.readTransaction { txn in result = try body(txn) }
            return result!
        }
    }

    /// Runs `body` in a write transaction, flushed, off the cooperative pool.
    private func write<T: Sendable>(_ body: @escaping @Sendable (LMDBTransaction) throws -> T) async throws -> T {
        let environment = self.environment
        return try await onWriteQueue {
            var result: T?
            try environment.writeTransaction(sync: true) { txn in result = try body(txn) }
            return result!
        }
    }

    // MARK: Pinned keys

    package func pinnedKeys(owner: String, suite: String) async throws -> [StoredPin] {
        try await read { txn in try Self.pins(txn, owner: owner, suite: suite) }
    }

    package func changePins(owner: String, suite: String, _ change: PinChange) async throws -> [StoredPin] {
        try await write { txn in
            let prefix = SharingKeys.pins(owner, suite)
            for key in change.pin {
                let name = try change.names?[key].map { Array(try JSONEncoder().encode($0)) } ?? []
                try Self.put(txn, DB.sharing, prefix + Array(key.utf8), name)
            }
            for key in change.unpin { try Self.delete(txn, DB.sharing, prefix + Array(key.utf8)) }
            let pins = try Self.pins(txn, owner: owner, suite: suite)
            try PinRule.checkCount(pins.count)
            return pins
        }
    }

    /// The pins of `owner`'s `suite` in `txn`, in byte order.
    static func pins(_ txn: LMDBTransaction, owner: String, suite: String) throws -> [StoredPin] {
        let prefix = SharingKeys.pins(owner, suite)
        var pins: [StoredPin] = []
        try forEach(txn, prefix: prefix) { key, value in
            let name = value.isEmpty ? nil : try? JSONDecoder().decode(SealedPayload.self, from: Data(value))
            pins.append(StoredPin(key: String(decoding: key[prefix.count...], as: UTF8.self), name: name))
        }
        return pins
    }
}
