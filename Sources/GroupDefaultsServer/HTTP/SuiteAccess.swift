import Foundation
import GroupDefaultsWire
import Hummingbird

/// The suite a request names, whose it is, and what the asking token may do with it: the one
/// place a suite route learns it. A request names another account's suite with `?owner=ACCOUNT`
/// (a suite shared with the token's account); without it, the suite is the token's account's own.
struct SuiteAccess: Sendable {
    let token: StoredToken
    /// The account whose suite it is: where its data and quotas are.
    let owner: String
    let suite: String
    /// The token's account's role in it (`owner` for its own suite).
    let role: SuiteRole

    /// What a route needs of the suite.
    enum Need: Sendable {
        /// Reading: any role.
        case read
        /// Pushing and key bags: a token that may write, and a role that may.
        case write
        /// Changing who shares it (inviting, removing, leaving): a token that may write; the role
        /// is checked by `SharingRule`.
        case share
    }

    /// The name the device records give the suite (`SharingRule.deviceSuiteName`).
    var deviceSuite: String { SharingRule.deviceSuiteName(owner: owner, suite: suite, account: token.account) }

    /// Whether the suite is another account's.
    var isShared: Bool { !owner.isSameName(as: token.account) }

    /// The access of `context`'s token to the suite of the path, for `need`: the suite's name
    /// (422), the owner's name (400), the token's scope and write permission (403 `forbidden`),
    /// then the membership (403 `not_a_member` when not shared with this account,
    /// `insufficient_role` for a `read` member writing), then the owner account's incarnation the
    /// request names (410 `account_deleted`, `AccountIncarnationCheck`).
    static func check(
        _ request: Request,
        _ context: TokenRequestContext,
        need: Need,
        sharing: any SharingStore
    ) async throws -> SuiteAccess {
        let token = context.token
        let raw = context.parameters.get("suite") ?? ""
        guard let suite = raw.removingPercentEncoding else { throw APIError.invalidSuite("the suite name is not valid percent-encoding") }
        if let problem = NameKind.suite.problem(with: suite) { throw APIError.invalidSuite(problem) }
        let owner = request.uri.queryParameters[OwnerParameter.name[...]].map(String.init) ?? token.account
        if let problem = NameKind.account.problem(withStored: owner) { throw APIError.malformed("?owner=: \(problem)") }
        try token.authorize(suite: suite, write: need != .read)
        let member = owner.isSameName(as: token.account) ? nil : try await sharing.member(owner: owner, suite: suite, account: token.account)
        guard let role = SharingRule.role(of: token.account, owner: owner, member: member) else {
            throw APIError(.notAMember, "\(owner)'s suite '\(suite)' is not shared with this account")
        }
        // A member of an encrypted suite whose keys the owner's device has not handed over yet (it
        // may be someone who learned the invitation's id, not its code) may only leave.
        if member?.awaitingKeys == true, need != .share {
            throw APIError(
                .notAMember,
                "\(owner)'s suite '\(suite)' is shared with this account once a device of its owner hands over the suite's keys"
            )
        }
        if need == .write, !role.mayWrite {
            throw APIError(.insufficientRole, "this account is a read member of \(owner)'s suite '\(suite)': it may read the suite, not change it")
        }
        // The device's copy is of the owner account it remembers, not of a new account of that name.
        try await context.accountIncarnation?.check(owner: owner)
        return SuiteAccess(token: token, owner: owner, suite: suite, role: role)
    }

    /// Only the owner's devices rotate a shared suite's keys (they alone hold the owner key that
    /// signs the members' part of a key bag), and a bag of a suite with members carries that part
    /// (`SignedKeyBag.shared`): else a device of a version that cannot share encrypted suites would
    /// leave the members behind.
    func checkMayRotate(_ sharing: any SharingStore, bag: SignedKeyBag) async throws {
        if isShared {
            throw APIError(.insufficientRole, "only the owner's devices rotate the keys of \(owner)'s suite '\(suite)'")
        }
        if bag.shared == nil, try await sharing.hasMembers(owner: owner, suite: suite) {
            throw APIError.malformed(
                "'\(suite)' is shared with other accounts: its key bag carries their part (shared), which this device did not send"
            )
        }
    }

    /// Whether the token's account still shares the suite (for an open event stream; the owner
    /// always does).
    func isStillAllowed(_ sharing: any SharingStore) async -> Bool {
        guard isShared else { return true }
        // A store that cannot answer is not a refusal: the stream's next read says what is wrong.
        do { return try await sharing.member(owner: owner, suite: suite, account: token.account) != nil } catch { return true }
    }
}
