/// The joining rule: how a device that never synced a suite joins the server's copy of it.
///
/// - A device that never synced the suite (it has no cursor) reads the server's whole snapshot
///   before its first push.
/// - The server's entry wins over every local value and tombstone stamped up to the moment sync
///   was turned on (`configure`, whose HLC `enableSync` records in `meta`: `configuredAt`), however
///   recent its stamp: a device joining a suite that already exists on the server must not
///   overwrite its settings with the copy it held. A suite configured before that moment was
///   recorded takes the moment its join begins.
/// - What any process wrote after that moment is pending and competes by last writer wins,
///   deletions included.
/// - Stored keys the server lacks are marked pending, and uploaded (the sync engine counts a key
///   an encrypted suite holds only under a retired key epoch as lacking). Registered defaults are
///   not stored values, so they are never pushed.
/// - A local value or deletion the server's entry replaced is kept in the conflict journal when it
///   was pending or when only this rule made it lose (`RemoteApplyResult.replacedOnJoining`).
///
/// The sync engine (`SyncEngine` in GroupDefaultsSync) reads the snapshot and calls this type;
/// `enableSync` records the moment (`recordMoment`) and `applyRemote` asks it, key by key, whether
/// the server's entry wins (`serverWins`).
package struct JoiningRule: Sendable, Equatable {
    /// The moment sync was turned on: the server's entries win over what is stamped up to it.
    package var configuredAt: HLC

    /// The rule with the moment `configuredAt`.
    package init(configuredAt: HLC) {
        self.configuredAt = configuredAt
    }

    /// The rule for joining `defaults`'s suite now: the moment `enableSync` recorded, or, for a
    /// suite configured before it was recorded, what the store holds when the join begins.
    package init(joining defaults: SharedDefaults) throws {
        let recorded = try defaults.syncState().configuredAt
        self.configuredAt = try recorded ?? defaults.clockReading()
    }

    /// Marks pending the keys `defaults` stores that the server lacks (`serverHas` tells, by key
    /// name), so that they are uploaded. Made before the snapshot is applied: a crash in between
    /// leaves the cursor unset, and the join is made again.
    package func markKeysTheServerLacks(in defaults: SharedDefaults, serverHas: (String) -> Bool) throws {
        let localKeys = try defaults.read { try $0.keys }
        try defaults.markPending(localKeys.filter { !serverHas($0) })
    }

    /// Whether the server's entry stamped `remote` wins over what the store holds stamped `held`
    /// by this rule, whatever the stamps: `held` is from before sync was turned on (and is not the
    /// same write).
    func serverWins(over held: Stamp, remote: Stamp) -> Bool {
        held != remote && held.hlc <= configuredAt
    }

    /// Records the moment sync is turned on (the store's clock: the HLC of its last change) in
    /// `tx`, unless the suite is synced already and has one.
    static func recordMoment(in tx: SharedDefaults.Transaction) throws {
        guard try !tx.hasSyncRecord(MetaKey.syncServer) || !tx.hasSyncRecord(MetaKey.syncConfiguredAt) else { return }
        try tx.setSyncNumber(tx.lastCommittedHLC().rawValue, for: MetaKey.syncConfiguredAt)
    }
}
