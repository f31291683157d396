/// The header in which the server names, on every answer of a suite route the token may use, the
/// incarnation of the account that owns the suite (an opaque id that a deleted account's name used
/// again does not share), and in which a device sends back the one it remembers: the server
/// refuses a request that names another (`SyncErrorCode.accountDeleted`), before it reads or
/// writes anything, and a device refuses an answer that names another.
public enum AccountIncarnationHeader {
    /// `Account-Incarnation`.
    public static let name = "Account-Incarnation"
}
