import GroupDefaultsWire

/// What a push was authorized under, which its write transaction checks again: the token it came
/// with, and the owner account's incarnation the request was checked against (`SuiteAccess`).
///
/// A request is authorized before its write begins. An account deleted, a token revoked or a
/// member removed in between must not see the push written after it: into nothing, into a new
/// account made since under the same name, or into a suite no longer shared with it. So each
/// backend, in the transaction that writes the push, refuses it when the token is no longer held or
/// is revoked (401 `unauthorized`), when the owner's incarnation is not the one checked (410
/// `account_deleted`), or, for a member's push (`PreparedPush.account`), when the member is no
/// longer one, or now only reads (403 `not_a_member`, `insufficient_role`).
package struct PushAuthority: Sendable, Hashable {
    /// The token's public id (`StoredToken.id`).
    package var tokenID: String
    /// The owner's incarnation the request was checked against; nil if none was read.
    package var ownerIncarnation: String?

    package init(tokenID: String, ownerIncarnation: String?) {
        self.tokenID = tokenID
        self.ownerIncarnation = ownerIncarnation
    }

    /// The refusal of a push whose token went while it was on its way.
    package static func tokenGone() -> SyncStorageError {
        SyncStorageError(.unauthorized, "the token was revoked, or its account deleted, while this push was on its way: nothing was written")
    }

    /// The refusal of a member's push whose membership ended while it was on its way.
    package static func memberGone(_ owner: String, _ suite: String) -> SyncStorageError {
        SyncStorageError(
            .notAMember,
            "\(owner)'s suite '\(suite)' stopped being shared with this account while this push was on its way: nothing was written"
        )
    }

    /// The refusal of a member's push whose account became a read member while it was on its way.
    package static func memberReads(_ owner: String, _ suite: String) -> SyncStorageError {
        SyncStorageError(
            .insufficientRole,
            "this account became a read member of \(owner)'s suite '\(suite)' while this push was on its way: nothing was written"
        )
    }

    /// The refusal of a push whose owner account was deleted while it was on its way.
    package static func ownerGone(_ owner: String) -> SyncStorageError {
        SyncStorageError(
            .accountDeleted,
            "the account \(owner) was deleted while this push was on its way: nothing was written, and nothing goes into a new account of that name"
        )
    }
}
