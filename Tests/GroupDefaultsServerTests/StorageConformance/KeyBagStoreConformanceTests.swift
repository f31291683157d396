import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `KeyBagStore` (key bags), over every backend.
    @Suite("KeyBagStore")
    struct KeyBagStoreConformance: StorageConformance {
        @Test(
            "key bags: none before the suite is anchored, then only for the next epoch, signed by the current key or the recovery key; the anchor is stored once",
            arguments: StorageBackend.allCases
        )
        func keyBags(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                let sealed = PushOp(
                    keyID: "k",
                    sealed: SealedPayload(epoch: 1, box: Array(repeating: 1, count: 40)),
                    deleted: false,
                    hlc: HLC(rawValue: 10)
                )
                var chain = TestKeyChain(suite: "e")
                // No anchor before the first sealed push (no token can claim a name in advance); the
                // first device anchors right after it.
                await expectStorageError(.suiteNotEncrypted) { try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: chain.anchor()) }
                try await push(storage, suite: "e", [sealed])
                try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: chain.anchor())
                try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: chain.anchor())  // the same: nothing changes
                var stranger = TestKeyChain(suite: "e")
                await expectStorageError(.keyAnchorMismatch) {
                    try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: stranger.anchor())
                }

                // Unsigned, signed by a stranger, signed over other bytes: refused; the suite stays at epoch 1.
                var unsigned = chain.bag(2, signer: .some(nil))
                await expectStorageError(.keyBagUnsigned) { try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: unsigned) }
                unsigned = chain.bag(2, signer: stranger.epochs[1])
                await expectStorageError(.keyBagUnsigned) { try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: unsigned) }
                var tampered = chain.bag(2)
                tampered.bundle = Data(repeating: 7, count: 48).base64EncodedString()
                await expectStorageError(.keyBagUnsigned) { try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: tampered) }
                #expect(try await storage.keyBags(account: "alice", suite: "e").keys.sorted() == [1])

                // Signed by epoch 1's key, then by the recovery key.
                let second = chain.bag(2)
                try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: second)
                let third = chain.bag(3, signer: chain.recovery)
                try await storage.putKeyBag(account: "alice", suite: "e", epoch: 3, bag: third)
                // Epoch 2's key no longer signs: the bag of 4 is signed by 3's or the recovery key's.
                await expectStorageError(.keyBagUnsigned) {
                    try await storage.putKeyBag(account: "alice", suite: "e", epoch: 4, bag: chain.bag(4, signer: chain.epochs[2]))
                }
                let answer = KeyBagRule.answer(try await storage.keyBags(account: "alice", suite: "e"))
                #expect(answer.epochs == ["2": second.bundle!, "3": third.bundle!])
                #expect(answer.signatures == ["2": second.signature!, "3": third.signature!])
                #expect(answer.anchor?.bags["1"]?.verifyKey == TestKeyChain.base64(chain.epochs[1]!))
                #expect(answer.anchor?.recoveryVerifyKey == TestKeyChain.base64(chain.recovery))

                // A suite with plain entries takes no anchor; one never anchored takes no bag.
                try await push(storage, suite: "p", [op("k", .string("plain"), hlc: 10)])
                var plain = TestKeyChain(suite: "p")
                await expectStorageError(.suiteNotEncrypted) { try await storage.anchorKeyBags(account: "alice", suite: "p", anchor: plain.anchor()) }
                try await push(storage, suite: "u", [sealed])
                var unanchored = TestKeyChain(suite: "u")
                await expectStorageError(.keyAnchorMissing) {
                    try await storage.putKeyBag(account: "alice", suite: "u", epoch: 2, bag: unanchored.bag(2))
                }
                // An anchor covers the suite's epochs exactly.
                await expectStorageError(.staleKeyEpoch) {
                    try await storage.anchorKeyBags(account: "alice", suite: "u", anchor: unanchored.anchor(through: 2))
                }
            }
        }

        @Test("an anchor of a suite whose bags an older version stored signs those very bags, each by the key before it")
        func anchorOverUnsignedBags() throws {
            let stored: [UInt32: StoredKeyBag] = [
                2: StoredKeyBag(storedText: Data(repeating: 2, count: 48).base64EncodedString()),
                3: StoredKeyBag(storedText: Data(repeating: 3, count: 48).base64EncodedString()),
            ]
            #expect(stored[2]?.verifyKey == nil && stored[2]?.bundle != nil, "an older version's row is its bundle alone")
            var chain = TestKeyChain(suite: "s")
            let texts = stored.mapValues { $0.bundle! }
            let rows = try KeyBagRule.anchor(
                chain.anchor(through: 3, stored: texts),
                suite: "s",
                suiteEpoch: 3,
                written: true,
                reset: false,
                stored: stored
            ).rows
            #expect(rows.keys.sorted() == [1, 2, 3])
            #expect(rows[3]?.bundle == texts[3] && rows[3]?.signature != nil)
            #expect(StoredKeyBag(storedText: rows[3]!.storedText) == rows[3])
            // Bags of other bytes than the stored ones are not an anchor of this suite.
            var other = TestKeyChain(suite: "s")
            #expect(throws: SyncStorageError.self) {
                try KeyBagRule.anchor(other.anchor(through: 3), suite: "s", suiteEpoch: 3, written: true, reset: false, stored: stored).rows
            }
            // A chain with a link signed by no key of it is refused.
            var broken = chain.anchor(through: 3, stored: texts)
            broken.bags["3"] = chain.bag(3, bundle: texts[3], signer: .some(TestKeyChain(suite: "s").recovery))
            #expect(throws: SyncStorageError.self) {
                try KeyBagRule.anchor(broken, suite: "s", suiteEpoch: 3, written: true, reset: false, stored: stored).rows
            }
        }
    }
}
