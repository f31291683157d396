import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import TestSupport
import Testing

extension StorageConformanceTests {
    /// `SuiteAdmin` (the operator's view and reset of suites), over every backend.
    @Suite("SuiteAdmin")
    struct SuiteAdminConformance: StorageConformance {
        @Test("suite summaries: written suites only, by account then name, with head, live keys and bytes", arguments: StorageBackend.allCases)
        func suiteSummaries(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                try await push(storage, account: "bob", suite: "s", [op("k", .string("v"), hlc: 10)])
                try await push(storage, account: "alice", suite: "t", [op("a", .string("v"), hlc: 10), op("b", .integer(1), hlc: 10)])
                try await push(storage, account: "alice", suite: "s", [op("k", .string("v"), hlc: 10)])
                try await push(storage, account: "alice", suite: "s", [op("k", nil, hlc: 20)])
                let all = try await storage.suiteSummaries(account: nil)
                #expect(all.map { "\($0.account)/\($0.name)" } == ["alice/s", "alice/t", "bob/s"])
                #expect(all.map(\.headRev) == [2, 2, 1])
                #expect(all.map(\.keys) == [0, 2, 1], "a tombstone is not a live key")
                #expect(all[0].bytes == 0)
                #expect(all[1].bytes > 0)
                #expect(try await storage.suiteSummaries(account: "alice") == Array(all.prefix(2)))
                #expect(try await storage.suiteSummaries(account: "carol").isEmpty)
            }
        }

        @Test(
            "a reset clears the suite (entries, history, batches; with its keys, key bags and epoch); revisions go on and a cursor from before it is answered suite_reset",
            arguments: StorageBackend.allCases
        )
        func resetSuite(backend: StorageBackend) async throws {
            try await backend.withStorage { storage in
                func sealed(_ key: String, epoch: UInt32, hlc: UInt64) -> PushOp {
                    PushOp(
                        keyID: key,
                        sealed: SealedPayload(epoch: epoch, box: Array(repeating: 1, count: 40)),
                        deleted: false,
                        hlc: HLC(rawValue: hlc)
                    )
                }
                #expect(try await storage.resetSuite(account: "alice", suite: "none", keys: false) == nil)
                var chain = TestKeyChain(suite: "e")
                try await push(storage, suite: "e", batch: "b1", [sealed("k1", epoch: 1, hlc: 10), sealed("k2", epoch: 1, hlc: 11)])
                try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: chain.anchor())
                try await storage.putKeyBag(account: "alice", suite: "e", epoch: 2, bag: chain.bag(2))
                let before = try await push(storage, suite: "e", [sealed("k1", epoch: 2, hlc: 12)]).headRev
                try await push(storage, suite: "other", [op("k", .string("kept"), hlc: 10)])

                // Reset keeping its keys: the epoch and the key chain stay, so a device on a retired
                // epoch cannot take the suite back to it.
                #expect(try await storage.resetSuite(account: "alice", suite: "e", keys: false) == 2)
                #expect(try await storage.keyBags(account: "alice", suite: "e").keys.sorted() == [1, 2])
                await expectStorageError(.staleKeyEpoch) { try await push(storage, suite: "e", [sealed("k2", epoch: 1, hlc: 13)]) }
                try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: chain.anchor())  // a device on epoch 1: nothing changes
                try await push(storage, suite: "e", [sealed("k2", epoch: 2, hlc: 13)])
                let kept = try await storage.snapshot(account: "alice", suite: "e", after: nil, limit: 10).page().headRev

                // Reset with its keys: the first device back decides the epoch.
                #expect(try await storage.resetSuite(account: "alice", suite: "e", keys: true) == 1)
                let snapshot = try await storage.snapshot(account: "alice", suite: "e", after: nil, limit: 10).page()
                #expect(snapshot.entries.isEmpty)
                #expect(snapshot.headRev == kept + 1 && kept > before, "the reset takes a revision; revisions never repeat")
                #expect(try await storage.history(account: "alice", suite: "e", key: "k1").isEmpty)
                #expect(try await storage.keyBags(account: "alice", suite: "e").isEmpty)
                // A client with no cursor reads the suite since the reset.
                #expect(try await storage.changes(account: "alice", suite: "e", since: 0, limit: 10).page().lastRev == snapshot.headRev)
                for since in [1, before - 1, before, kept] {
                    do {
                        _ = try await storage.changes(account: "alice", suite: "e", since: since, limit: 10).page()
                        Issue.record("a cursor from before the reset was answered")
                    } catch let error as SyncStorageError {
                        #expect(error.code == .suiteReset, "\(error)")
                    }
                }
                #expect(try await storage.changes(account: "alice", suite: "e", since: snapshot.headRev, limit: 10).page().entries.isEmpty)
                #expect(try await storage.suites(account: "alice").suites.first { $0.name == "e" }?.keys == 0)
                #expect(
                    try await storage.snapshot(account: "alice", suite: "other", after: nil, limit: 10).page().entries.count == 1,
                    "other suites are untouched"
                )

                // The suite starts again: a device at epoch 2 anchors it (its epoch is taken) and pushes
                // under epoch 2; the batch id used before the reset is a new batch.
                var again = TestKeyChain(suite: "e")
                again.epochs = chain.epochs
                try await storage.anchorKeyBags(account: "alice", suite: "e", anchor: again.anchor(through: 2))
                let replayed = try await push(storage, suite: "e", batch: "b1", [sealed("k1", epoch: 2, hlc: 13)])
                #expect(replayed.results.map(\.status) == [.applied])
                let changes = try await storage.changes(account: "alice", suite: "e", since: snapshot.headRev, limit: 10).page()
                #expect(changes.entries.map(\.key) == ["k1"])
                #expect(try await storage.changes(account: "alice", suite: "e", since: 0, limit: 10).page().entries.map(\.key) == ["k1"])
                await expectStorageError(.staleKeyEpoch) { try await push(storage, suite: "e", [sealed("k2", epoch: 1, hlc: 14)]) }

                // A plain suite stays plain after a reset; reset with --keys, its mode is decided again.
                try await push(storage, suite: "p", [op("k", .string("plain"), hlc: 10)])
                #expect(try await storage.resetSuite(account: "alice", suite: "p", keys: false) == 1)
                await expectStorageError(.suiteNotEncrypted) { try await push(storage, suite: "p", [sealed("k", epoch: 1, hlc: 11)]) }
                var plainChain = TestKeyChain(suite: "p")
                await expectStorageError(.suiteNotEncrypted) {
                    try await storage.anchorKeyBags(account: "alice", suite: "p", anchor: plainChain.anchor())
                }
                try await push(storage, suite: "p", [op("k", .string("again"), hlc: 12)])
                #expect(try await storage.resetSuite(account: "alice", suite: "p", keys: true) == 1)
                try await push(storage, suite: "p", [sealed("k", epoch: 1, hlc: 13)])

                // A suite nothing was written to takes no anchor: no token claims a name in advance.
                var fresh = TestKeyChain(suite: "n")
                await expectStorageError(.suiteNotEncrypted) { try await storage.anchorKeyBags(account: "alice", suite: "n", anchor: fresh.anchor()) }
                try await push(storage, suite: "n", [op("k", .string("plain"), hlc: 10)])
            }
        }
    }
}
