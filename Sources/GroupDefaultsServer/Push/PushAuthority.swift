import GroupDefaultsWire

/// What a push was authorized under, which its write transaction checks again: the token it came
/// with, and the owner account's incarnation the request was checked against (`SuiteAccess`).
///
/// A request is authorized before its write begins. An account deleted, or a token revoked, in
/// between must not see the push written after it: into nothing, or into a new account made since
/// under the same name. So each backend, in the transaction that writes the push, refuses it when
/// the token is no longer held or is revoked (401 `unauthorized`), or when the owner's incarnation
/// is not the one checked (410 `account_deleted`).
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

    /// The refusal of a push whose owner account was deleted while it was on its way.
    package static func ownerGone(_ owner: String) -> SyncStorageError {
        SyncStorageError(
            .accountDeleted,
            "the account \(owner) was deleted while this push was on its way: nothing was written, and nothing goes into a new account of that name"
        )
    }
}
