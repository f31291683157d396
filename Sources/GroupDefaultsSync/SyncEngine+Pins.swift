import GroupDefaults
import GroupDefaultsWire
import Logging

// Pinned keys on a member's device (`PinChange`): the list kept in the suite, so that programs see
// the keys as forced and the server's entries of them win; and a push's ops the server refused as
// pinned, whose keys take the owner's value back.

extension SyncEngine {
    /// On a member's device: the suite's pinned keys from the server, kept in the suite (an
    /// encrypted suite's by the names sealed with them). A server without pins (404) changes
    /// nothing.
    func refreshPins() async throws(SyncError) {
        guard shared != nil else { return }
        let pinned: PinnedKeys
        do {
            pinned = try await client.pinnedKeys()
        } catch  where error.code == .notFound || error.code == .methodNotAllowed {
            return
        }
        let names = pinNames(pinned).keys
        try local { try defaults.replacePinnedKeys(names) }
    }

    /// The pinned keys' names: themselves in a plain suite; in an encrypted one, each key id's
    /// sealed name opened (a name that does not open, or opens to another key's id, is left out
    /// of `keys`, and shown as `id:` and the id in `named`).
    func pinNames(_ pinned: PinnedKeys) -> (keys: [String], named: [String]) {
        guard let sealer = keyring.sealer else { return (pinned.keys, pinned.keys) }
        var keys: [String] = []
        var named: [String] = []
        for id in pinned.keys {
            if let sealed = pinned.names?[id],
                let opened = try? sealer.open(SyncEntry(keyID: id, sealed: sealed, deleted: true, hlc: HLC(rawValue: 0), origin: 0)),
                sealer.keys.keyID(for: opened.key).isSameName(as: id)
            {
                keys.append(opened.key)
                named.append(opened.key)
            } else {
                named.append("id:\(id)")
            }
        }
        return (keys, named.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
    }

    /// A change of pins as the server takes it: in an encrypted suite, key ids, each pinned key's
    /// name sealed (as a deletion of the key stamped 0 by origin 0).
    func sealedPinChange(pin: [String], unpin: [String]) throws(SyncError) -> PinChange {
        guard let sealer = keyring.sealer else { return PinChange(pin: pin, unpin: unpin) }
        var names: [String: SealedPayload] = [:]
        for key in pin {
            do {
                let op = try sealer.seal(key: key, value: nil, hlc: HLC(rawValue: 0), origin: 0)
                if let sealed = op.sealed { names[op.key] = sealed }
            } catch {
                throw SyncError(.local, "could not seal the name of \(key): \(error)")
            }
        }
        return PinChange(pin: pin.map(sealer.keys.keyID(for:)), unpin: unpin.map(sealer.keys.keyID(for:)), names: names)
    }

    /// The ops of a push the server refused as pinned (`pinned_key`): their keys are pinned here
    /// from now on, and each takes the entry the server holds (the owner's), or with none no value;
    /// the local change it replaces goes to the conflict journal.
    func settlePinned(_ refused: [(name: String, winner: SyncEntry?)]) throws(SyncError) -> SyncReport {
        guard !refused.isEmpty else { return SyncReport() }
        for (name, _) in refused {
            logger.warning(
                "a change to a pinned key was not pushed: the owner's value stands, and this one is in the conflict journal",
                metadata: ["suite": "\(client.suite)", "key": "\(name)"]
            )
        }
        try local { try defaults.addPinnedKeys(refused.map(\.name)) }
        var report = try apply(refused.compactMap(\.winner), cursor: nil)
        // No entry on the server: the key holds no value (an older stamp than any the owner writes).
        let none = refused.filter { $0.winner == nil }.map { SyncEntry(key: $0.name, value: nil, hlc: HLC(rawValue: 1), origin: 0) }
        if !none.isEmpty {
            let result = try local { try defaults.applyRemote(none, cursor: nil) }
            report.add(result)
        }
        report.applied = 0
        return report
    }
}
