/// An operator's reset of a suite (`groupdefaults-server suites reset`, `SuiteAdmin.resetSuite`):
/// for a suite no device can use any more (its keys lost, anchored by a stranger, filled with
/// values nobody wants), the server's copy starts again, empty, and devices join it again.
///
/// Its revisions go on rather than start again: the reset takes the revision after the head, and
/// a cursor from before it is answered `suite_reset` (`changes`, `events`), upon which a device
/// reads the new snapshot and uploads what it holds, as at its first sync. Nothing a device holds
/// is lost; what only the server held (history, other devices' values no device still has) is.
package enum SuiteReset {
    /// The revision a reset of a suite whose head is `head` takes.
    package static func revision(after head: UInt64) -> UInt64 { head == .max ? head : head + 1 }

    /// Whether `changes(since:)` reads from the reset's revision instead: a client with no cursor
    /// (0) is not a device from before the reset, and reads the whole suite as it is since, unless
    /// a tombstone was purged after the reset (then, as ever, `cursor_expired`).
    package static func readsFromReset(since: UInt64, resetRev: UInt64, oldestValid: UInt64) -> Bool {
        since == 0 && resetRev > 0 && oldestValid <= resetRev
    }
}
