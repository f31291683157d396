import Crypto
import Foundation
import GroupDefaults
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsSync

/// What a device does with the key of a rotation it began, by what the server's key bags say: the
/// rules of `SuiteKeys.sealingEpoch` and `settlingRotation(with:)`, written from the promise that
/// nothing is sealed under a key that may never be the suite's, and that a key another owner
/// device's rotation beat is dropped. In process; no server.
@Suite("Key rotation: a rotation begun here, settled by the server's key bags")
struct RotationSettlingTests {
    static let suite = "group.com.example.chat"
    static let recovery = RecoveryKey(secret: Array(0..<16))
    static let hlc = HLC(rawValue: 0x0193_5A2B_3C4D_0001)

    /// Keys at epoch 1, rotated here to epoch 2 with a bag signed and not known to be stored; and
    /// the same suite rotated to epoch 2 on another device (another key).
    static func begun() throws -> (mine: SuiteKeys, theirs: SuiteKeys, bag: SignedKeyBag, other: SignedKeyBag) {
        let base = SuiteKeys(recoveryKey: recovery, suite: suite)
        let rotated = try base.rotated(after: 1)
        let theirs = try base.rotated(after: 1)
        let bag = try rotated.signedKeyBag(epoch: 2)
        let other = try theirs.signedKeyBag(epoch: 2)
        let mine = rotated.with(pendingBag: PendingKeyBag(epoch: 2, key: rotated.epochs[2]!, bag: bag))
        return (mine, theirs, bag, other)
    }

    static func bags(_ epoch2: SignedKeyBag?) -> KeyBags {
        KeyBags(epochs: epoch2?.bundle.map { ["2": $0] } ?? [:])
    }

    @Test(
        "while its bag is not known stored, new entries are sealed under the epoch before, and its epoch is unsettled"
    )
    func unsettledSealsUnderTheEpochBefore() throws {
        let (mine, _, _, _) = try Self.begun()
        #expect(mine.currentEpoch == 2)
        #expect(mine.sealingEpoch == 1)
        #expect(mine.isUnsettled(2) && !mine.isUnsettled(1) && !mine.isUnsettled(nil))
        let op = try EntrySealer(keys: mine).seal(key: "sound", value: .string("bell.caf"), hlc: Self.hlc, origin: 7)
        #expect(op.sealed?.epoch == 1)
        #expect(mine.settlingRotation(with: Self.bags(nil)) == nil, "a server with no bag for the epoch tells nothing")
    }

    @Test("the server holds this device's bag: marked stored, the key kept, entries sealed under the new epoch")
    func storedBagIsKept() throws {
        let (mine, _, bag, _) = try Self.begun()
        let settled = try #require(mine.settlingRotation(with: Self.bags(bag)))
        #expect(settled.pendingBag?.stored == true)
        #expect(settled.epochs[2] == mine.epochs[2])
        #expect(settled.sealingEpoch == 2 && !settled.isUnsettled(2))
        #expect(settled.settlingRotation(with: Self.bags(bag)) == nil, "settled once")
        let op = try EntrySealer(keys: settled).seal(key: "sound", value: nil, hlc: Self.hlc, origin: 7)
        #expect(op.sealed?.epoch == 2)
        // A run whose put was refused took the key out of the epochs and kept the bag: the server
        // holding that very bag makes the key the suite's again.
        let refused = mine.with(epochs: mine.epochs.filter { $0.key < 2 })
        let known = try #require(refused.settlingRotation(with: Self.bags(bag)))
        #expect(known.epochs[2] == mine.epochs[2] && known.sealingEpoch == 2)
    }

    @Test(
        "the server holds a bag for the epoch that this device cannot tie to its key, and its own was never known stored: its key for it is dropped with its bag"
    )
    func lostRotationIsDropped() throws {
        let (mine, theirs, _, other) = try Self.begun()
        #expect(theirs.epochs[2] != mine.epochs[2])
        let settled = try #require(mine.settlingRotation(with: Self.bags(other)))
        #expect(settled.pendingBag == nil)
        #expect(settled.epochs[2] == nil && settled.currentEpoch == 1 && settled.sealingEpoch == 1)
        // A server past the epoch, with another's bag for it, tells the same.
        var later = Self.bags(other)
        later.epochs["3"] = "a later bag"
        #expect(try #require(mine.settlingRotation(with: later)).epochs[2] == nil)
    }

    @Test("a key known stored is kept whatever bag the server shows for its epoch later (one put again after a restore, or a forgery)")
    func storedKeyIsKept() throws {
        let (mine, _, bag, other) = try Self.begun()
        let stored = try #require(mine.settlingRotation(with: Self.bags(bag)))
        #expect(stored.settlingRotation(with: Self.bags(other)) == nil)
        #expect(stored.settlingRotation(with: KeyBags(epochs: ["2": "not a bag", "3": "nor this"])) == nil)
    }

    @Test("the key file keeps whether the bag is known stored")
    func storedFlagIsKeptInTheKeyFile() throws {
        let (mine, _, bag, _) = try Self.begun()
        let settled = try #require(mine.settlingRotation(with: Self.bags(bag)))
        try withTemporaryDirectory { dir in
            let file = dir.appendingPathComponent("keys").path
            try mine.write(to: file)
            #expect(try SuiteKeys.read(from: file, suite: Self.suite).pendingBag?.stored == false)
            try settled.write(to: file)
            let read = try SuiteKeys.read(from: file, suite: Self.suite)
            #expect(read.pendingBag?.stored == true && read.sealingEpoch == 2)
        }
    }
}
