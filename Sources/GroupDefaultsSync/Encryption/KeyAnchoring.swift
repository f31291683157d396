public import GroupDefaultsWire

/// An encrypted suite's anchor on the server (`KeyAnchor`): the verify keys against which the
/// server checks every later key bag, stored by the suite's first device right after its first
/// push (a suite without sealed entries takes none), and checked by every device that joins. Until
/// a suite is anchored, the server takes no key bag for it; once it is, only a holder of the
/// current key or of the recovery key moves it to a new epoch.
///
/// A suite whose key bags an older version stored unsigned is anchored by the first device that
/// holds all its epochs' keys and, after the upgrade, pushes a change, joins or rotates: it signs
/// the stored bags.
public enum KeyAnchoring {
    /// Anchors the server's copy of the suite to `keys` if nobody has, and checks that an existing
    /// anchor is theirs. Returns the server's key bags.
    ///
    /// - Throws: `SyncError` with the code `keyAnchorMismatch` when the suite is anchored to other
    ///   keys (this device's key file belongs to another recovery key, or a token anchored the suite
    ///   first: then its operator resets it); as a request does otherwise.
    @discardableResult
    public static func ensure(_ keys: SuiteKeys, client: SyncClient, recoveryKey: RecoveryKey? = nil) async throws(SyncError) -> KeyBags {
        let bags = try await client.keyBags()
        guard keys.matches(anchor: bags.anchor) else { throw mismatch(client.suite) }
        if bags.anchor != nil { return bags }
        do {
            return try await client.anchorKeyBags(try keys.anchor(serverBags: bags, recoveryKey: recoveryKey))
        } catch  where error.code == .keyAnchorMismatch {
            throw mismatch(client.suite)
        }
    }

    private static func mismatch(_ suite: String) -> SyncError {
        var error = SyncError(
            .rejected,
            code: .keyAnchorMismatch,
            """
            the server's copy of \(suite) is anchored to other keys than this device's: its key file belongs to another \
            recovery key, or the suite was anchored by someone else
            """
        )
        error.remedy = .setUpAgainOrReset
        return error
    }
}
