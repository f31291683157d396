package import GroupDefaultsWire

/// Pinned keys: a suite's owner, or an admin, pins keys that only the owner's devices may write.
///
/// - A member's push that writes a pinned key has that op refused on its own (`pinned_key`, with
///   the entry the server holds, the owner's, as its winner); the batch's other ops are applied.
///   Each backend reads the suite's pins in the push's transaction (`refuse(_:pinned:owner:suite:)`).
/// - Pins are authority (`StoredTables`: in LMDB's `sharing`, PostgreSQL's `pinned_keys`): a
///   restore keeps the present's; an account's deletion removes its suites' pins.
/// - In an end-to-end encrypted suite a pin names the key's id, which the owner's device computes:
///   the server compares ids and never learns a name.
package enum PinRule {
    /// The largest sealed name a pin keeps (a key's name is at most 511 bytes, plus sealing's
    /// overhead and padding).
    package static let maximumSealedNameBytes = 1024

    /// Checks a change: at most `PinChange.maximumKeys` keys, each a key name the server takes
    /// (in an end-to-end `encrypted` suite, a key id: 32 lowercase hex digits), and sealed names
    /// only for key ids it pins, each of bounded size.
    package static func check(_ change: PinChange, encrypted: Bool) throws(SyncStorageError) {
        if encrypted, let key = (change.pin + change.unpin).first(where: { !isKeyID($0) }) {
            throw SyncStorageError(
                .malformed,
                "key \(key.debugDescription): the suite is end-to-end encrypted, so its keys are pinned by their ids (32 lowercase hex digits)"
            )
        }
        // Sealed names go with key ids only (ASCII: no two canonically equivalent), also before a
        // new encrypted suite's first push tells the server that it is one.
        if let key = change.names?.keys.first(where: { !isKeyID($0) }) {
            throw SyncStorageError(
                .malformed,
                "names: \(key.debugDescription) is no key id; sealed names are for an end-to-end encrypted suite's pins"
            )
        }
        guard change.pin.count + change.unpin.count <= PinChange.maximumKeys else {
            throw SyncStorageError(.malformed, "a change names at most \(PinChange.maximumKeys) keys")
        }
        // A new pin is a new name: the rules for new keys (no control character), not the lenient
        // ones for keys stored before them; an unpin takes any key a pin may hold.
        for key in change.pin {
            if let problem = NameKind.key.problem(with: key) { throw SyncStorageError(.malformed, "key \(key.debugDescription): \(problem)") }
        }
        for key in change.unpin {
            if let problem = NameKind.key.problem(withStored: key) { throw SyncStorageError(.malformed, "key \(key.debugDescription): \(problem)") }
        }
        let pinned = Set(change.pin.map(\.exact))
        for (key, sealed) in change.names ?? [:] {
            guard pinned.contains(key.exact) else {
                throw SyncStorageError(.malformed, "names: \(key.debugDescription) is not a key this change pins")
            }
            guard sealed.box.count <= maximumSealedNameBytes else {
                throw SyncStorageError(.malformed, "names: the sealed name of \(key.debugDescription) takes over \(maximumSealedNameBytes) bytes")
            }
        }
    }

    /// Marks refused each op of `push` whose key is in `pinned`, for a member's push (the owner's
    /// devices write pinned keys as any other).
    package static func refuse(_ push: inout PreparedPush, pinned: Set<ExactName>, owner: String, suite: String) {
        guard push.account != nil, !pinned.isEmpty else { return }
        for (index, op) in push.request.ops.enumerated() where push.refusals[index] == nil && pinned.contains(op.key.exact) {
            push.refusals[index] = OpRefusal(
                .pinnedKey,
                "\(owner) pinned this key of suite '\(suite)': only the owner's devices change it, and its value stands"
            )
        }
    }

    /// Whether `key` is a key id as an encrypted suite's devices make them (`SuiteKeys.keyID(for:)`).
    static func isKeyID(_ key: String) -> Bool {
        key.utf8.count == 32 && key.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// How the audit log names a key: quoted, every character outside printable ASCII as its code
    /// point (`"\u{212A}elvin"`), so that look-alike keys read apart.
    package static func shown(_ key: String) -> String {
        var text = "\""
        for scalar in key.unicodeScalars {
            if scalar.isASCII, scalar.value >= 0x20, scalar.value != 0x7F, scalar != "\"", scalar != "\\" {
                text.unicodeScalars.append(scalar)
            } else {
                text += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            }
        }
        return text + "\""
    }

    /// Refuses a suite past `PinnedKeys.maximumKeys` pins.
    package static func checkCount(_ count: Int) throws(SyncStorageError) {
        guard count <= PinnedKeys.maximumKeys else {
            throw SyncStorageError(.quotaExceeded, "a suite pins at most \(PinnedKeys.maximumKeys) keys: nothing was changed")
        }
    }
}

/// One pinned key as a backend stores it: the key (an encrypted suite's key id) and, in an
/// encrypted suite, its name sealed by the device that pinned it.
package struct StoredPin: Sendable, Hashable, Codable {
    package var key: String
    package var name: SealedPayload?

    package init(key: String, name: SealedPayload?) {
        self.key = key
        self.name = name
    }

    /// The answer of the pins routes.
    package static func list(_ pins: [StoredPin], owner: String, suite: String) -> PinnedKeys {
        var names: [String: SealedPayload] = [:]
        for pin in pins { if let name = pin.name { names[pin.key] = name } }
        return PinnedKeys(owner: owner, suite: suite, keys: pins.map(\.key), names: names.isEmpty ? nil : names)
    }
}
