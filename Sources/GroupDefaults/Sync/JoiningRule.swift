import GroupDefaultsWire

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
/// - Stored keys the server lacks are marked pending, and uploaded. Registered defaults are not
///   stored values, so they are never pushed.
/// - In an end-to-end encrypted suite, a key the server holds only under the key epoch before the
///   current one (which a device holding only the new key does not apply: a rotation may not be
///   finished yet) is held by the server all the same: not uploaded. The rule waits for that key's
///   next entry, the rotation's seal or a later write, and judges it as if it had come with the
///   snapshot (`keepJoiningRule(newest:heldUnderRetiredEpoch:)`). One under an older epoch, which
///   no unfinished rotation seals again (a rotation left it: its device did not hold that version),
///   is history: its key counts as one the server lacks.
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

extension SharedDefaults {
    /// Keeps the joining rule past the join for the stored keys (values and deletions) that
    /// `heldUnderRetiredEpoch` names: the server held them only under the key epoch before the
    /// current one, so their next entry from the server is judged by the rule (it wins over what
    /// this store held from before sync was turned on), then by last writer wins. The store's clock
    /// is moved past `newest`, those entries' newest stamp (unless it is too far ahead of this
    /// machine's clock), so that a change made here from now on is stamped after them, as after
    /// any entry the join took.
    package func keepJoiningRule(newest: HLC, heldUnderRetiredEpoch: (String) -> Bool) throws {
        try write { tx in
            let keys = try tx.perform(key: nil) { try tx.storedKeys() }.map { String(decoding: $0, as: UTF8.self) }
            let held = keys.filter(heldUnderRetiredEpoch).map(\.exact)
            guard !held.isEmpty else { return }
            try tx.setJoiningKeys(try tx.joiningKeys().union(held))
            if !newest.isAhead(of: store.wallClockMilliseconds()) { try tx.receive(newest) }
        }
    }
}

extension SharedDefaults.Transaction {
    /// The keys whose next server entry the joining rule still decides (`keepJoiningRule`), by
    /// their bytes.
    func joiningKeys() throws -> Set<ExactName> {
        try perform(key: nil) { try syncKeyNames(MetaKey.syncJoiningKeys) }
    }

    /// Replaces the keys the joining rule still decides.
    func setJoiningKeys(_ keys: Set<ExactName>) throws {
        try perform(key: nil) { try setSyncKeyNames(keys, for: MetaKey.syncJoiningKeys) }
    }

    /// The joining rule for the keys it still decides after the join, with those keys; nil when
    /// there are none (or the moment sync was turned on is not recorded).
    func carriedJoiningRule() throws -> (keys: Set<ExactName>, rule: JoiningRule)? {
        let keys = try joiningKeys()
        guard !keys.isEmpty,
            let moment = try perform(key: nil, { try syncNumber(MetaKey.syncConfiguredAt, "the moment sync was turned on") })
        else { return nil }
        return (keys, JoiningRule(configuredAt: HLC(rawValue: moment)))
    }
}
