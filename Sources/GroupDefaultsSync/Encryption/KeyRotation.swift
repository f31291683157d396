import Crypto
import Foundation
import GroupDefaults
import GroupDefaultsWire
import Logging

/// A new key epoch for an encrypted suite (`groupdefaults-sync rotate-key`): after a device is
/// revoked, what is written from then on is sealed under a key it never had.
///
/// In order, so that a failure at any step loses nothing and running it again finishes the work:
/// 1. the new keys (every old epoch kept, for history) are written to the key file, with the
///    signed bag; until the server is known to hold the bag, entries are still sealed under the
///    epoch before (`SuiteKeys.sealingEpoch`), and if another owner device stores its own bag for
///    the epoch first, this device's key for it is dropped (`SuiteKeys.settlingRotation`);
/// 2. the new epoch's key, sealed to the recovery key and signed by the current epoch's key, is
///    stored on the server (a key bag), so the recovery key still opens everything; storing it
///    moves the suite to the new epoch, and the server refuses pushes under an older one from then
///    on (`stale_key_epoch`);
/// 3. what other devices pushed until then is pulled, and every entry of the server's suite sealed
///    under an older epoch that this device holds (the same write: it has just synced) is sealed
///    again under the new one, keeping its stamp (a
///    re-seal: `PushOp.origin`), so no write changes and none is lost; one it does not hold is left
///    as it was and reported, never laundered into the new epoch (while the rotation is
///    unfinished, this device applies entries under the epoch before too: `SuiteKeys.oldestAppliedEpoch`);
/// 4. the key file forgets the signed bag (`SuiteKeys.pendingBag`). Until then the rotation is
///    unfinished (`SuiteKeys.hasUnfinishedRotation`), and the next `sync` or `run` of this device
///    finishes it (`SuiteSharing.finishRotation`): a rotation stopped between its bag and its last
///    re-seal would otherwise leave entries under the retired epoch, which every other device with
///    the new key refuses.
///
/// Every other device that should keep the suite pairs again (`groupdefaults-sync pair` here,
/// `configure --pairing-code` there) and gets every epoch's key; devices with the new key refuse
/// entries under a retired epoch. In a suite shared with other accounts, the owner's devices and
/// the members' take the new key from the key bag instead (`SharedKeyBag`), without pairing.
public enum KeyRotation {
    /// What a rotation did.
    public struct Outcome: Sendable {
        /// The keys now in the key file.
        public var keys: SuiteKeys
        /// Entries sealed again under the new epoch.
        public var resealed: Int
        /// Entries that did not open with this device's keys, left as they were.
        public var refused: [RefusedEntry]
        /// In a suite shared with other accounts, the members the new key was sealed to (the
        /// owner's devices take it too); nil for a suite never shared.
        public var sharedWith: [String]?
    }

    /// Rotates the keys of the suite `engine` mirrors; `keyFile` is where they are kept.
    ///
    /// - Throws: `SyncError`, as a sync does; the key file is written first, so running it again
    ///   after a failure starts from the keys the failed run made.
    /// `recoveryKey`, if given, signs the new epoch's key bag when this device lacks the key of
    /// the server's current epoch (a bag stored with a key of someone else's choosing); otherwise
    /// the current epoch's key signs it.
    /// In a suite shared with other accounts, the new epoch's key is also sealed for the owner's
    /// devices and to each member's key (`SharedKeyBag`), except `removed`'s, so that they take it
    /// without pairing.
    public static func rotate(
        _ engine: SyncEngine,
        keys: SuiteKeys,
        keyFile: String,
        recoveryKey: RecoveryKey? = nil,
        excluding removed: [String] = []
    ) async throws(SyncError) -> Outcome {
        var keys = keys
        if let recoveryKey {
            // Every epoch the recovery key opens first (signed bags only), so that a device that
            // missed rotations seals everything again rather than leaving it under a retired epoch.
            let recovered = SuiteKeys(recoveryKey: recoveryKey, suite: keys.suite, keyBags: try await engine.client.keyBags())
            guard let merged = keys.adding(recovered) else {
                throw SyncError(.local, "this recovery key is not the one of \(keys.suite) (its keys differ from the key file's)")
            }
            if merged.epochs.count > keys.epochs.count {
                try merged.write(to: keyFile)
                _ = await engine.reloadKeys()
            }
            keys = merged
        }
        // Up to date first: pending changes pushed under the old epoch while the server still takes it.
        // A server already at an epoch this device has no key for (a key bag stored by someone
        // else) refuses them: rotating past that epoch is what brings the suite back, and they are
        // sealed again under the new key afterwards.
        do {
            try await engine.syncOnce()
        } catch  where error.code == .staleKeyEpoch {
            engine.logger.warning(
                "the server is at a key epoch this device has no key for: rotating past it",
                metadata: ["suite": "\(engine.client.suite)"]
            )
        }
        InterruptionPoint.reached("rotate-key.synced")
        // After the server's newest epoch: a key bag is taken for the next epoch only, signed, and
        // once the suite is anchored (which this device does if nobody has).
        let serverBags = try await KeyAnchoring.ensure(keys, client: engine.client, recoveryKey: recoveryKey)
        let serverEpoch = max(serverBags.newestEpoch, 1)
        // What the server's bags tell of a rotation begun here before (`SuiteKeys.settlingRotation`):
        // its bag stored, or another owner device's bag stored for its epoch first (the key made
        // here dropped, the suite's taken from the bags where they hand it).
        if let settled = keys.settlingRotation(with: serverBags) {
            keys = settled
            if settled.pendingBag == nil {
                try keys.write(to: keyFile)
                await engine.reloadKeys(taking: keys)
            }
        }
        // A bag this device signed and sent, stored by a run that ended before it knew: that run's
        // rotation is finished (its key kept, the entries sealed again) rather than another begun.
        if let pending = keys.pendingBag, pending.stored, pending.epoch == serverEpoch {
            var epochs = keys.epochs
            epochs[pending.epoch] = pending.key
            let stored = keys.with(epochs: epochs)  // the bag kept until the re-seal is done
            try stored.write(to: keyFile)
            _ = await engine.reloadKeys()
            return try await reseal(engine, old: keys, new: stored.with(pendingBag: nil), bag: pending.bag, keyFile: keyFile, excluding: removed)
        }
        // A bag signed here before and not known to be stored is sent again with the same key: one
        // key per epoch from this device. Once the server is past its epoch, it is moot.
        if let pending = keys.pendingBag, pending.epoch <= serverEpoch { keys = keys.with(pendingBag: nil) }
        let new: SuiteKeys
        var bag: SignedKeyBag
        if let pending = keys.pendingBag, pending.epoch == serverEpoch + 1 {
            var epochs = keys.epochs
            epochs[pending.epoch] = pending.key
            let again = keys.with(epochs: epochs).with(pendingBag: nil)
            // The members' part made again for the members as they are now (a member invited
            // since gets the key; a suite shared since needs the part). The first bag may have
            // reached the server (its answer lost): its key is used again only while everyone it
            // was sealed to is still a member, else a new key is made, which no bag sent holds.
            let part = try await membersPart(engine, keys: again, epoch: pending.epoch, bags: serverBags, excluding: removed)
            let sealedBefore = Set((pending.bag.shared?.accounts ?? []).map(\.exact))
            if sealedBefore.isSubset(of: Set((part?.accounts ?? []).map(\.exact))) {
                new = again
                bag = pending.bag
                bag.shared = part
            } else {
                var unsent = keys.epochs
                unsent[pending.epoch] = nil
                new = try keys.with(epochs: unsent).rotated(after: serverEpoch).with(pendingBag: nil)
                bag = try new.signedKeyBag(epoch: new.currentEpoch, recoveryKey: recoveryKey)
                bag.shared = try await membersPart(engine, keys: new, epoch: new.currentEpoch, bags: serverBags, excluding: removed)
            }
        } else {
            // The next epoch's key made by a run before this version kept its bag is used again.
            new = (keys.currentEpoch == serverEpoch + 1 ? keys : try keys.rotated(after: serverEpoch)).with(pendingBag: nil)
            // Before the file: a device that cannot sign changes nothing.
            bag = try new.signedKeyBag(epoch: new.currentEpoch, recoveryKey: recoveryKey)
            bag.shared = try await membersPart(engine, keys: new, epoch: new.currentEpoch, bags: serverBags, excluding: removed)
        }
        let epoch = new.currentEpoch
        let pending = PendingKeyBag(epoch: epoch, key: new.epochs[epoch]!, bag: bag)
        try new.with(pendingBag: pending).write(to: keyFile)
        InterruptionPoint.reached("rotate-key.bag-signed")
        do {
            try await engine.client.putKeyBag(epoch: epoch, bag: bag)
        } catch  where !error.isTransient {
            // Refused: the key file goes back to its epochs (a run that fails does not move this
            // device to an epoch the server lacks), keeping the signed bag for the next run. After
            // a transient failure the bag may be stored: the new key stays too.
            try? keys.with(pendingBag: pending).write(to: keyFile)
            throw error
        }
        // Known stored: the new epoch is the suite's, and entries are sealed under it from now on.
        var stored = pending
        stored.stored = true
        try new.with(pendingBag: stored).write(to: keyFile)
        InterruptionPoint.reached("rotate-key.bag-stored")
        return try await reseal(engine, old: keys, new: new, bag: bag, keyFile: keyFile, excluding: removed)
    }

    /// The rotation's last steps, once the server holds the new epoch's bag and the key file its
    /// key (and the bag, the mark of a rotation unfinished): pulls, seals again every entry under an
    /// older epoch, writes `new` (without the bag) to the key file, and rotates once more if the bag
    /// was sealed to a removed account.
    private static func reseal(
        _ engine: SyncEngine,
        old keys: SuiteKeys,
        new: SuiteKeys,
        bag: SignedKeyBag,
        keyFile: String,
        excluding removed: [String]
    ) async throws(SyncError) -> Outcome {
        let epoch = new.currentEpoch
        // What other devices pushed under the old epoch until the bag was stored (after it, the
        // server refuses the old epoch, and they seal again once they have the new key): taken in
        // now, so that it is sealed again below rather than left under a retired epoch, which
        // devices with the new key refuse.
        try await engine.pull()
        InterruptionPoint.reached("rotate-key.pulled")

        let old = EntrySealer(keys: keys)
        let sealer = EntrySealer(keys: new)
        let limits = try await engine.client.limits()
        var after: String?
        var resealed = 0
        var refused: [RefusedEntry] = []
        repeat {
            let page = try await engine.client.snapshot(after: after, limit: limits.maxOpsPerBatch)
            after = page.next
            var ops: [PushOp] = []
            for entry in page.entries where (entry.sealed?.epoch ?? epoch) < epoch {
                let opened: SyncEntry
                do throws(EntrySealer.Refusal) { opened = try old.open(entry) } catch {
                    refused.append(RefusedEntry(keyID: entry.key, key: nil, stamp: entry.stamp, reason: "\(error)"))
                    continue
                }
                // Only what this device holds (it synced just before) is sealed again: an entry the
                // server has and this device does not (one it refused, or one planted with an old
                // key) does not become a new epoch's.
                let held = try? engine.defaults.syncEntry(forKey: opened.key)
                guard let held, held.stamp == opened.stamp, held.isDeleted == opened.isDeleted else {
                    refused.append(
                        RefusedEntry(
                            keyID: entry.key,
                            key: opened.key,
                            stamp: entry.stamp,
                            reason: "differs from this device's copy: not sealed again"
                        )
                    )
                    continue
                }
                var op: PushOp
                do {
                    op = try sealer.seal(key: opened.key, value: opened.value, hlc: opened.hlc, origin: opened.origin)
                } catch {
                    throw SyncError(.local, "cannot seal '\(opened.key)' again: \(error)")
                }
                op.origin = opened.origin
                ops.append(op)
            }
            // In batches within the server's body limit (each op about its JSON's size).
            var batch: [PushOp] = []
            var bytes = 128
            for op in ops {
                let size = ((try? JSONEncoder().encode(op).count) ?? limits.maxBodyBytes) + 1
                if !batch.isEmpty, bytes + size > limits.maxBodyBytes {
                    resealed += try await push(batch, engine: engine, epoch: epoch, refused: &refused)
                    batch = []
                    bytes = 128
                }
                batch.append(op)
                bytes += size
            }
            if !batch.isEmpty { resealed += try await push(batch, engine: engine, epoch: epoch, refused: &refused) }
        } while after != nil
        // The key file as it is now (another process may have added an epoch meanwhile), without
        // this rotation's bag: the rotation is finished.
        let current = (try? SuiteKeys.read(from: keyFile, suite: new.suite)) ?? new
        let finished = current.pendingBag?.epoch == epoch ? current.with(pendingBag: nil) : current
        try finished.write(to: keyFile)
        await engine.reloadKeys(taking: finished)
        InterruptionPoint.reached("rotate-key.keys-written")
        let sharedWith = bag.shared.map { $0.accounts.sorted { $0.exact < $1.exact } }
        var outcome = Outcome(keys: new, resealed: resealed, refused: refused, sharedWith: sharedWith)
        // A bag signed before a removal, sent again, may seal to the removed account: once it is
        // stored, the suite moves on to an epoch sealed without it (accounts compared as bytes).
        let removedNames = Set(removed.map(\.exact))
        if let shared = bag.shared, shared.accounts.contains(where: { removedNames.contains($0.exact) }) {
            let again = try await rotate(engine, keys: new, keyFile: keyFile, excluding: removed)
            outcome = Outcome(keys: again.keys, resealed: again.resealed, refused: refused + again.refused, sharedWith: again.sharedWith)
        }
        return outcome
    }

    /// Puts back the key bags of the epochs a restored server lacks (this device rotated the
    /// suite's key after the backup was taken, or began a rotation it has not finished), each
    /// signed by the epoch before: else the server would refuse every push under the current
    /// epoch. In a suite shared with other accounts, each with the members' part, sealed to the
    /// members the restored server lists (the present's, unless the backup brought its own
    /// authority), never to one whose removal is still due.
    static func restoreBags(_ engine: SyncEngine, keys: SuiteKeys) async throws(SyncError) {
        let bags = try await engine.client.keyBags()
        let held = max(bags.newestEpoch, 1)
        guard keys.currentEpoch > held else { return }
        var removed: [String] = []
        if keys.sharing?.isOwner == true, let due = try await engine.sharing.rotationDue() {
            removed = try await engine.sharing.stillRemoved(due)
        }
        for epoch in (held + 1)...keys.currentEpoch {
            // A rotation's bag is sent as it was signed (one bag per epoch from this device, which
            // the settling of the rotation then knows by its bytes: `SuiteKeys.settlingRotation`).
            var bag: SignedKeyBag
            if let pending = keys.pendingBag, pending.epoch == epoch { bag = pending.bag } else { bag = try keys.signedKeyBag(epoch: epoch) }
            bag.shared = try await membersPart(engine, keys: keys, epoch: epoch, bags: bags, excluding: removed)
            try await engine.client.putKeyBag(epoch: epoch, bag: bag)
        }
    }

    /// The members' part of `epoch`'s key bag (`SharedKeyBag`): its key sealed for the owner's
    /// devices and to the members as the server lists them now, never to `removed`; nil for a
    /// suite never shared, or on a device without the owner key.
    static func membersPart(
        _ engine: SyncEngine,
        keys: SuiteKeys,
        epoch: UInt32,
        bags: KeyBags,
        excluding removed: [String]
    ) async throws(SyncError) -> SharedKeyBag? {
        guard let members = try await sharedMembers(engine, keys: keys, bags: bags, excluding: removed) else { return nil }
        return try keys.sharedKeyBag(epoch: epoch, members: members)
    }

    /// The member keys a shared suite's next epoch is sealed to, by account; nil for a suite never
    /// shared (no members, no shared bag), whose other devices pair again. A member is sealed to
    /// when the server lists it, the owner key signed its admission, and the suite's last shared
    /// bag (signed by the owner key) was sealed to it or it was admitted at that bag's epoch or
    /// later; without such a bag, at the suite's newest epoch or later (a rotation while it was a
    /// member would have carried its part). So a server that lists a member removed before, or
    /// hides the shared parts, leaves members out rather than bringing one back. Never `removed`.
    private static func sharedMembers(
        _ engine: SyncEngine,
        keys: SuiteKeys,
        bags: KeyBags,
        excluding removed: [String]
    ) async throws(SyncError) -> [ExactName: Curve25519.KeyAgreement.PublicKey]? {
        guard keys.sharing?.isOwner == true else { return nil }
        let listed = try await engine.client.members().members.filter { $0.role != .owner }
        let roster = keys.sharedRoster(bags)
        guard !listed.isEmpty || roster != nil || !removed.isEmpty else { return nil }
        let line = roster?.epoch ?? max(bags.newestEpoch, 1)
        // Accounts as bytes: removing `\u{212A}im` (KELVIN SIGN) leaves `Kim` in.
        let removedNames = Set(removed.map(\.exact))
        var members: [ExactName: Curve25519.KeyAgreement.PublicKey] = [:]
        for member in listed where !removedNames.contains(member.account.exact) {
            guard let admission = member.admission, let key = keys.memberKey(of: member.account, admission) else { continue }
            guard roster?.accounts.contains(member.account.exact) == true || admission.epoch >= line else { continue }
            members[member.account.exact] = key
        }
        return members
    }

    /// One batch of re-seals; how many the server applied. The ops it refused (a stamp from a
    /// clock that was wrong) stay under the old epoch and are added to `refused`.
    private static func push(
        _ ops: [PushOp],
        engine: SyncEngine,
        epoch: UInt32,
        refused: inout [RefusedEntry]
    ) async throws(SyncError) -> Int {
        let request = PushRequest(deviceID: engine.defaults.origin, batchID: "reseal-\(epoch)-\(UUID().uuidString.lowercased())", ops: ops)
        let body: [UInt8]
        do { body = Array(try JSONEncoder().encode(request)) } catch { throw SyncError(.local, "cannot encode a push: \(error)") }
        let results = try await engine.client.push(body: body).results
        InterruptionPoint.reached("rotate-key.resealed")
        for (op, result) in zip(ops, results) where result.status == .refused {
            refused.append(
                RefusedEntry(
                    keyID: op.key,
                    key: nil,
                    stamp: Stamp(hlc: op.hlc, origin: op.origin ?? engine.defaults.origin),
                    reason: "not sealed again: the server refused it (\(result.detail ?? result.error?.rawValue ?? "refused"))"
                )
            )
        }
        return results.count { $0.status == .applied }
    }
}
