package import GroupDefaultsWire

/// Key bags: each key epoch's key sealed to the suite's recovery key (opaque here), signed
/// (`KeyBagRule`: its rules are its own; backends apply them in a transaction).
package protocol KeyBagStore: Sendable {
    /// Stores the key bag of `epoch` and moves the suite to that epoch, if `KeyBagRule.put` takes it.
    func putKeyBag(account: String, suite: String, epoch: UInt32, bag: SignedKeyBag) async throws
    /// Stores the suite's anchor, if `KeyBagRule.anchor` takes it (the same anchor again: nothing).
    func anchorKeyBags(account: String, suite: String, anchor: KeyAnchor) async throws
    /// The stored key bags of the suite, by epoch (epoch 1: the anchor).
    func keyBags(account: String, suite: String) async throws -> [UInt32: StoredKeyBag]
}
