public import GroupDefaults
import GroupDefaultsWire
import Logging

/// The keys one engine seals and opens entries with, in an end-to-end encrypted suite (nil for a
/// plain one), where they were read from, and what the engine learnt of epochs it lacks.
///
/// Local changes are sealed before they are pushed (`EntrySealer`), and every entry the server
/// sends is opened and checked against its envelope before anything is applied. An entry that does
/// not check out is refused (not applied, not pushed back) and reported; the others go on. A value
/// the server holds but does not serve (`SyncEntry.unavailable`), or one this device cannot take
/// (nested more deeply than `PropertyListValue.maximumNestingDepth`, not typed JSON), is refused
/// the same way (`withoutUnavailable`): that key alone, kept in the conflict journal with why; this
/// device keeps its own value of it.
struct Keyring: Sendable {
    /// Seals and opens entries; nil for a plain suite.
    private(set) var sealer: EntrySealer?
    /// Where the keys were read from, to read them again after a rotation (`reload`).
    let file: String?
    /// The suite's name on the server, for messages.
    let suite: String
    let logger: Logger
    /// Whether a step found entries sealed under an epoch this device lacks, in a shared suite:
    /// the next one takes it from the key bags first (`SyncEngine.adoptSharedEpochs`).
    var needsSharedEpochs = false
    /// Above which the key bags handed this device no epoch when it last looked (`.max` when they
    /// handed none): an entry sealed under such an epoch is reported, not retried.
    var unadoptableEpoch: UInt32?
    /// Whether the engine found the suite anchored to these keys, or anchored it (`KeyAnchoring`).
    var anchored = false

    init(keys: SuiteKeys?, file: String?, suite: String, logger: Logger) {
        self.sealer = keys.map(EntrySealer.init(keys:))
        self.file = file
        self.suite = suite
        self.logger = logger
    }

    /// The keys in use; nil for a plain suite.
    var keys: SuiteKeys? { sealer?.keys }

    /// Takes `keys` as the keys in use: those a rotation or the key bags have just written to the key file.
    mutating func use(_ keys: SuiteKeys) { sealer = EntrySealer(keys: keys) }

    /// Reads the key file again; true if its epochs' keys differ from those in use (the suite was
    /// rotated, or this device paired again, or another process took the key another device's
    /// rotation made for an epoch: `settleRotation`). A rotation finished since (its bag forgotten),
    /// or whose bag is now known stored, is taken in too.
    mutating func reload() -> Bool {
        guard let file, let current = keys, let read = try? SuiteKeys.read(from: file, suite: current.suite) else { return false }
        let newer = read.epochs != current.epochs
        guard newer || read.hasUnfinishedRotation != current.hasUnfinishedRotation || read.sealingEpoch != current.sealingEpoch else {
            return false
        }
        use(read)
        guard newer else { return false }
        logger.notice("read the suite's keys again: epoch \(read.currentEpoch)", metadata: ["suite": "\(suite)"])
        return true
    }

    /// Takes the epochs after this device's newest that `bags` hand it (`SuiteKeys.adopting`,
    /// which checks the owner key's signature), writing them to the key file first; true if there
    /// were any. When there were none and a step `needed` one, no epoch after this device's newest
    /// is to be had from them now, so that the step reports it rather than trying again.
    mutating func adopt(_ bags: KeyBags, needed: Bool) throws(SyncError) -> Bool {
        guard let file, let keys else { return false }
        guard let adopted = keys.adopting(bags) else {
            if needed { unadoptableEpoch = .max }
            return false
        }
        try adopted.write(to: file)
        use(adopted)
        unadoptableEpoch = nil
        logger.notice("took the suite's new key from its key bags: epoch \(adopted.currentEpoch)", metadata: ["suite": "\(suite)"])
        return true
    }

    /// Takes what the server's `bags` tell of the rotation this device began
    /// (`SuiteKeys.settlingRotation(with:)`), applied to the key file as it is now (another process
    /// of this device may have written it since) and written first; true if the keys in use changed.
    mutating func settleRotation(with bags: KeyBags) throws(SyncError) -> Bool {
        guard let file, let inUse = keys else { return false }
        let current = (try? SuiteKeys.read(from: file, suite: inUse.suite)) ?? inUse
        guard let settled = current.settlingRotation(with: bags) else { return reload() }
        try settled.write(to: file)
        use(settled)
        if let lost = current.pendingBag, settled.pendingBag == nil {
            let taken = settled.epochs[lost.epoch] != nil ? "taken from the key bags" : "to be had by pairing this device again"
            logger.warning(
                "another device rotated the suite's keys to epoch \(lost.epoch) first: the key this device made for it is dropped, the suite's \(taken)",
                metadata: ["suite": "\(suite)"]
            )
        }
        return true
    }

    // MARK: Sealing

    /// The op that carries `change` to the server from the device `origin`: plain, or sealed in an
    /// encrypted suite. A change another device made (uploaded again when the server lost it: a
    /// reset, a store synced with another server before) names that device, so that its stamp is kept.
    func op(for change: PendingChange, from origin: UInt64) throws(SyncError) -> PushOp {
        var op: PushOp
        if let sealer {
            do {
                op = try sealer.seal(key: change.key, value: change.value, hlc: change.stamp.hlc, origin: change.stamp.origin)
            } catch {
                throw SyncError(.local, "cannot seal the change of '\(change.key)': \(error)")
            }
        } else {
            op = PushOp(key: change.key, value: change.value, hlc: change.stamp.hlc)
        }
        op.origin = change.stamp.origin == origin ? nil : change.stamp.origin
        return op
    }

    /// A push request as this device wrote it, with each op's key name and stamp (a sealed op's
    /// key is only an id). An op of a stored batch that no longer opens is a damaged batch.
    func pushedKeys(of request: PushRequest) throws(SyncError) -> [(key: String, stamp: Stamp)] {
        var keys: [(key: String, stamp: Stamp)] = []
        for op in request.ops {
            let stamp = Stamp(hlc: op.hlc, origin: op.origin ?? request.deviceID)
            guard let sealed = op.sealed else {
                keys.append((op.key, stamp))
                continue
            }
            guard let sealer else { throw SyncError(.local, "a sealed batch is stored in a suite that is not encrypted") }
            let entry = SyncEntry(keyID: op.key, sealed: sealed, deleted: op.isDeleted, hlc: op.hlc, origin: stamp.origin)
            do throws(EntrySealer.Refusal) {
                keys.append((try sealer.open(entry).key, stamp))
            } catch {
                throw SyncError(.local, "the stored in-flight batch does not open (\(error))")
            }
        }
        return keys
    }

    // MARK: Opening

    /// The entries to apply, opened, and those refused. In a plain suite, entries pass as they
    /// are, unless the server's suite is encrypted: then this device needs the suite's key.
    mutating func opened(_ entries: [SyncEntry]) throws(SyncError) -> (entries: [SyncEntry], refused: [RefusedEntry]) {
        guard let sealer else {
            guard !entries.contains(where: { $0.sealed != nil }) else {
                var error = SyncError(
                    .local,
                    code: .suiteEncrypted,
                    "the server's copy of \(suite) is end-to-end encrypted and this device does not have its key"
                )
                error.remedy = .getSuiteKeys
                throw error
            }
            return (entries, [])
        }
        if let newest = entries.compactMap(\.sealed?.epoch).max(), sealer.keys.epochs[newest] == nil, reload() {
            return try opened(entries)  // rotated on this device since the engine started
        }
        var opened: [SyncEntry] = []
        var refused: [RefusedEntry] = []
        opened.reserveCapacity(entries.count)
        for entry in entries {
            // Once rotated, an older epoch's key may be a revoked device's: what it seals is history
            // (shown by `history`), not applied (but the epoch before, during a rotation this device
            // has not finished: `oldestAppliedEpoch`). Every entry sealed under it before the
            // rotation comes again sealed under the new epoch, with its own stamp (`KeyRotation`).
            if isRetired(entry), let epoch = entry.sealed?.epoch {
                let reason = "sealed under key epoch \(epoch), retired since epoch \(sealer.keys.oldestAppliedEpoch) began"
                refused.append(RefusedEntry(keyID: entry.key, key: nil, stamp: entry.stamp, reason: reason))
                continue
            }
            do throws(EntrySealer.Refusal) {
                opened.append(try sealer.open(entry))
            } catch .unknownEpoch(let epoch) {
                throw lacking(epoch, have: sealer.keys)
            } catch .doesNotOpen where sealer.keys.isUnsettled(entry.sealed?.epoch) {
                // Sealed by whichever device stored the epoch's bag: until this device knows its own
                // is the one stored (`settleRotation`), its key for the epoch may not be the suite's.
                throw lacking(entry.sealed!.epoch, have: sealer.keys)
            } catch {
                refused.append(RefusedEntry(keyID: entry.key, key: nil, stamp: entry.stamp, reason: "\(error)"))
            }
        }
        if let first = refused.first {
            logger.error(
                "refused entries the server sent that do not check out",
                metadata: ["suite": "\(suite)", "count": "\(refused.count)", "first": "\(first.keyID): \(first.reason)"]
            )
        }
        return (opened, refused)
    }

    /// Whether `entry` is sealed under a key epoch retired since (older than
    /// `SuiteKeys.oldestAppliedEpoch`): history, which `opened` refuses.
    func isRetired(_ entry: SyncEntry) -> Bool {
        guard let epoch = entry.sealed?.epoch, let keys = sealer?.keys else { return false }
        return epoch < keys.oldestAppliedEpoch
    }

    /// What a step fails with when an entry is sealed under `epoch`, which this device lacks. Not
    /// tampering: the suite's key was rotated since this device got its keys, and nothing is
    /// applied until it has the new key. In a shared suite the key bags hand it over: taken before
    /// the step is tried again (`needsSharedEpochs`), unless they handed none when last looked.
    private mutating func lacking(_ epoch: UInt32, have keys: SuiteKeys) -> SyncError {
        if keys.sharing != nil, epoch > (unadoptableEpoch ?? 0) {
            needsSharedEpochs = true
            return SyncError(
                .unavailable,
                code: .staleKeyEpoch,
                "the key of \(suite) was rotated (epoch \(epoch)): taking the new key from the suite's key bags"
            )
        }
        var error: SyncError
        if keys.sharing != nil {
            unadoptableEpoch = nil  // the next step looks at the key bags again
            error = SyncError(
                .local,
                code: .staleKeyEpoch,
                """
                the key of \(suite) was rotated (epoch \(epoch)), and no key bag the server holds hands it to this device \
                signed by the suite's owner key: the server may be withholding or forging it, or this account was removed
                """
            )
        } else {
            error = SyncError(
                .local,
                code: .staleKeyEpoch,
                "the key of \(suite) was rotated (epoch \(epoch); this device has up to \(keys.currentEpoch))"
            )
        }
        error.remedy = .pairAgain
        return error
    }

    /// `entries` without those whose value this device cannot take, and those as refused. Called
    /// before entries are opened (an unavailable one has nothing to open) and after (a sealed
    /// value is seen only then).
    func withoutUnavailable(_ entries: [SyncEntry]) -> (entries: [SyncEntry], refused: [RefusedEntry]) {
        var taken: [SyncEntry] = []
        var refused: [RefusedEntry] = []
        taken.reserveCapacity(entries.count)
        for entry in entries {
            let reason: UnavailableValue? =
                if let unavailable = entry.unavailable {
                    unavailable
                } else if let value = entry.value, !value.fitsNestingLimit {
                    .tooDeep
                } else {
                    nil
                }
            guard let reason else {
                taken.append(entry)
                continue
            }
            // Before opening, an encrypted suite's key is only its id; after, its name.
            let name = sealer == nil || entry.unavailable == nil ? entry.key : nil
            refused.append(
                RefusedEntry(
                    keyID: name.flatMap { keys?.keyID(for: $0) } ?? entry.key,
                    key: name,
                    stamp: entry.stamp,
                    reason: "value unavailable (\(reason.words)); this device keeps its own"
                )
            )
        }
        if let first = refused.first {
            logger.error(
                "refused entries whose value this device cannot take",
                metadata: ["suite": "\(suite)", "count": "\(refused.count)", "first": "\(first)"]
            )
        }
        return (taken, refused)
    }

    // MARK: Reporting

    /// The entries of `stale` (older than what this device accepted) among `entries`, reported as rolled back.
    func rolledBack(_ stale: [String], among entries: [SyncEntry]) -> [RefusedEntry] {
        guard let keys else { return [] }
        let names = Set(stale.map(\.exact))
        let refused = entries.filter { names.contains($0.key.exact) }.map {
            RefusedEntry(keyID: keys.keyID(for: $0.key), key: $0.key, stamp: $0.stamp, reason: RefusedRecord.rolledBack)
        }
        logger.error(
            "refused entries older than those already accepted",
            metadata: ["suite": "\(suite)", "keys": "\(stale.prefix(20).joined(separator: ","))"]
        )
        return refused
    }

    /// In an encrypted suite, the keys a snapshot should have had: every key `defaults` holds
    /// that is not waiting to be pushed (the server acknowledged it) and is not local-only, but
    /// which the snapshot lacks. The server may be hiding them; they are kept and reported, not
    /// removed.
    func omitted(from snapshot: [SyncEntry], in defaults: SharedDefaults) throws(SyncError) -> [String] {
        guard let keys else { return [] }
        let present = Set(snapshot.map(\.key.exact))  // key ids
        do {
            let pending = Set(try defaults.pendingChanges().map(\.key.exact))
            let localOnly = try defaults.syncState().localOnlyKeys.compactMap { try? GlobPattern($0) }
            return try defaults.read { try $0.keys }.filter { key in
                !present.contains(keys.keyID(for: key).exact) && !pending.contains(key.exact) && !localOnly.contains { $0.matches(key) }
            }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        } catch {
            throw SyncError.local(error)
        }
    }
}

/// An entry the server sent that this device refused: it did not open, or it opened to something
/// other than its envelope said (`tampered` in `groupdefaults-sync` output).
public struct RefusedEntry: Sendable, Hashable, CustomStringConvertible {
    /// The entry's key id, as the server named it.
    public var keyID: String
    /// The key's name, when the entry opened (a rolled-back one); nil when it could not be trusted.
    public var key: String?
    /// The stamp the entry claimed.
    public var stamp: Stamp
    /// Why it was refused.
    public var reason: String

    public var description: String { "\(key.map { "'\($0)'" } ?? "key id \(keyID)"): \(reason)" }
}
