public import GroupDefaults
import GroupDefaultsWire
import Logging

// An end-to-end encrypted suite, seen from the engine: local changes are sealed before they are
// pushed (`EntrySealer`), and every entry the server sends is opened and checked against its
// envelope before anything is applied. An entry that does not check out is refused (not applied,
// not pushed back) and reported; the others go on.
extension SyncEngine {
    /// The op that carries `change` to the server: plain, or sealed in an encrypted suite. A
    /// change another device made (uploaded again when the server lost it: a reset, a store synced
    /// with another server before) names that device as its origin, so that its stamp is kept.
    func op(for change: PendingChange) throws(SyncError) -> PushOp {
        let foreign = change.stamp.origin == defaults.origin ? nil : change.stamp.origin
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
        op.origin = foreign
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

    /// The entries to apply, opened, and those refused. In a plain suite, entries pass as they
    /// are, unless the server's suite is encrypted: then this device needs the suite's key.
    func opened(_ entries: [SyncEntry]) throws(SyncError) -> (entries: [SyncEntry], refused: [RefusedEntry]) {
        guard let sealer else {
            if entries.contains(where: { $0.sealed != nil }) {
                var error = SyncError(
                    .local,
                    code: .suiteEncrypted,
                    "the server's copy of \(client.suite) is end-to-end encrypted and this device does not have its key"
                )
                error.remedy = .getSuiteKeys
                throw error
            }
            return (entries, [])
        }
        if let newest = entries.compactMap(\.sealed?.epoch).max(), sealer.keys.epochs[newest] == nil, reloadKeys() {
            return try opened(entries)  // rotated on this device since the engine started
        }
        var opened: [SyncEntry] = []
        var refused: [RefusedEntry] = []
        opened.reserveCapacity(entries.count)
        let oldest = sealer.keys.oldestAppliedEpoch
        for entry in entries {
            // Once rotated, an older epoch's key may be a revoked device's: what it seals is history
            // (shown by `history`), not applied (but the epoch before, during a rotation this device
            // has not finished: `oldestAppliedEpoch`). Every entry sealed under it before the
            // rotation comes again sealed under the new epoch, with its own stamp (`KeyRotation`).
            if let epoch = entry.sealed?.epoch, epoch < oldest {
                refused.append(
                    RefusedEntry(
                        keyID: entry.key,
                        key: nil,
                        stamp: entry.stamp,
                        reason: "sealed under key epoch \(epoch), retired since epoch \(oldest) began"
                    )
                )
                continue
            }
            do throws(EntrySealer.Refusal) {
                opened.append(try sealer.open(entry))
            } catch .unknownEpoch(let epoch) {
                // Not tampering: the suite's key was rotated since this device got its keys. Nothing
                // is applied until it has the new key. In a shared suite the key bags hand it over:
                // taken before the step is tried again (`adoptSharedEpochs`).
                if sealer.keys.sharing != nil, epoch > (unadoptableEpoch ?? 0) {
                    needsSharedEpochs = true
                    throw SyncError(
                        .unavailable,
                        code: .staleKeyEpoch,
                        "the key of \(client.suite) was rotated (epoch \(epoch)): taking the new key from the suite's key bags"
                    )
                }
                if sealer.keys.sharing != nil {
                    unadoptableEpoch = nil  // the next step looks at the key bags again
                    var error = SyncError(
                        .local,
                        code: .staleKeyEpoch,
                        """
                        the key of \(client.suite) was rotated (epoch \(epoch)), and no key bag the server holds hands it to this device \
                        signed by the suite's owner key: the server may be withholding or forging it, or this account was removed
                        """
                    )
                    error.remedy = .pairAgain
                    throw error
                }
                var error = SyncError(
                    .local,
                    code: .staleKeyEpoch,
                    "the key of \(client.suite) was rotated (epoch \(epoch); this device has up to \(sealer.keys.currentEpoch))"
                )
                error.remedy = .pairAgain
                throw error
            } catch {
                refused.append(RefusedEntry(keyID: entry.key, key: nil, stamp: entry.stamp, reason: "\(error)"))
            }
        }
        if !refused.isEmpty {
            logger.error(
                "refused entries the server sent that do not check out",
                metadata: [
                    "suite": "\(client.suite)", "count": "\(refused.count)",
                    "first": "\(refused[0].keyID): \(refused[0].reason)",
                ]
            )
        }
        return (opened, refused)
    }

    /// Takes the epochs after this device's newest that the suite's key bags hand it (a suite
    /// shared between accounts, rotated since: `SuiteKeys.adopting`, which checks the owner key's
    /// signature), writing them to the key file first; true if there were any. When there were
    /// none, no epoch after this device's newest is to be had from them now, whichever the entries
    /// need (two `rotate-key`s on another device: epoch 3 when this one has 1), so that the step
    /// reports it rather than trying again (the next step looks again).
    func adoptSharedEpochs() async throws(SyncError) -> Bool {
        let needed = needsSharedEpochs
        needsSharedEpochs = false
        guard let keyFile, let keys = sealer?.keys, keys.sharing != nil else { return false }
        if reloadKeys() { return true }
        guard let adopted = keys.adopting(try await client.keyBags()) else {
            if needed { unadoptableEpoch = .max }
            return false
        }
        try adopted.write(to: keyFile)
        sealer = EntrySealer(keys: adopted)
        unadoptableEpoch = nil
        logger.notice(
            "took the suite's new key from its key bags: epoch \(adopted.currentEpoch)",
            metadata: ["suite": "\(client.suite)"]
        )
        return true
    }

    /// `adoptSharedEpochs`, when a step found entries under an epoch this device lacks.
    func adoptSharedEpochsIfNeeded() async throws(SyncError) {
        if needsSharedEpochs { _ = try await adoptSharedEpochs() }
    }

    /// Takes `keys` as the keys in use: those a rotation made here has just written to the key file.
    func use(_ keys: SuiteKeys) { sealer = EntrySealer(keys: keys) }

    /// Reads the key file again; true if it now has a newer epoch than the keys in use (the suite
    /// was rotated, or this device paired again, since the engine started). A rotation finished
    /// since (its bag forgotten) is taken in too.
    func reloadKeys() -> Bool {
        guard let keyFile, let current = sealer?.keys, let keys = try? SuiteKeys.read(from: keyFile, suite: current.suite) else {
            return false
        }
        let newer = Set(keys.epochs.keys) != Set(current.epochs.keys)
        guard newer || keys.hasUnfinishedRotation != current.hasUnfinishedRotation else { return false }
        sealer = EntrySealer(keys: keys)
        guard newer else { return false }
        logger.notice("read the suite's keys again: epoch \(keys.currentEpoch)", metadata: ["suite": "\(client.suite)"])
        return true
    }

    /// The entries of `keys` (stale: older than what this device accepted) reported as rolled back.
    func rolledBack(_ keys: [String], among entries: [SyncEntry], sealer: EntrySealer) -> [RefusedEntry] {
        let stale = Set(keys.map(\.exact))
        let refused = entries.filter { stale.contains($0.key.exact) }.map {
            RefusedEntry(
                keyID: sealer.keys.keyID(for: $0.key),
                key: $0.key,
                stamp: $0.stamp,
                reason: RefusedRecord.rolledBack
            )
        }
        logger.error(
            "refused entries older than those already accepted",
            metadata: [
                "suite": "\(client.suite)", "keys": "\(keys.prefix(20).joined(separator: ","))",
            ]
        )
        return refused
    }

    /// In an encrypted suite, the keys a snapshot should have had: every key this device holds
    /// that is not waiting to be pushed (the server acknowledged it) and is not local-only, but
    /// which the snapshot lacks. The server may be hiding them; they are kept and reported, not
    /// removed.
    func omitted(from snapshot: [SyncEntry]) throws(SyncError) -> [String] {
        guard let sealer else { return [] }
        let present = Set(snapshot.map(\.key.exact))  // key ids
        do {
            let pending = Set(try defaults.pendingChanges().map(\.key.exact))
            let localOnly = try defaults.syncState().localOnlyKeys.compactMap { try? GlobPattern($0) }
            return try defaults.read { try $0.keys }.filter { key in
                !present.contains(sealer.keys.keyID(for: key).exact) && !pending.contains(key.exact) && !localOnly.contains { $0.matches(key) }
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
