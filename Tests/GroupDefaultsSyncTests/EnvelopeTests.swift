import Crypto
import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsSync

/// The sealed-entry envelope, version 1: fixed vectors (a change of format must change them, on
/// purpose), the documented byte layouts checked by hand, and every way an entry can be made not to
/// check out. In process; no server.
@Suite("Sealed entries: the envelope, its keys and the recovery key")
struct EnvelopeTests {
    static let suite = "group.com.example.chat"
    static let recovery = RecoveryKey(secret: Array(0..<16))
    static let keys = SuiteKeys(recoveryKey: recovery, suite: suite)
    static let sealer = EntrySealer(keys: keys)
    static let hlc = HLC(rawValue: 0x0193_5A2B_3C4D_0001)
    static let origin: UInt64 = 998_877_665_544
    static var nonce: ChaChaPoly.Nonce { try! ChaChaPoly.Nonce(data: Array(repeating: UInt8(7), count: 12)) }

    @Test("version 1 vectors: the key id, the recovery key's text and a sealed box are what they were")
    func vectors() throws {
        #expect(Self.recovery.description == EnvelopeVectors.recoveryKeyText)
        #expect(Self.keys.keyID(for: "sound") == EnvelopeVectors.soundKeyID)
        let op = try Self.sealer.seal(key: "sound", value: .string("ring.caf"), hlc: Self.hlc, origin: Self.origin, nonce: Self.nonce)
        #expect(op.key == EnvelopeVectors.soundKeyID)
        #expect(op.sealed?.epoch == 1)
        #expect(Data(op.sealed!.box).base64EncodedString() == EnvelopeVectors.soundBox)
    }

    @Test("the box opens with ChaCha20-Poly1305 and the documented associated data, to the documented plaintext")
    func documentedLayout() throws {
        let op = try Self.sealer.seal(key: "sound", value: .string("ring.caf"), hlc: Self.hlc, origin: Self.origin)
        // The sealing key as documented: HKDF-SHA256 of the recovery secret.
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Array(0..<16) as [UInt8]),
            salt: Data("GroupDefaults sealed entries v1".utf8),
            info: Data("sealing, epoch 1\0\(Self.suite)".utf8),
            outputByteCount: 32
        )
        var ad: [UInt8] = [1]
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { ad += $0 } }
        append(UInt16(Self.suite.utf8.count))
        ad += Self.suite.utf8
        append(UInt16(op.key.utf8.count))
        ad += op.key.utf8
        append(Self.hlc.rawValue)
        append(Self.origin)
        ad.append(0)
        append(UInt32(1))
        let plaintext = Array(try ChaChaPoly.open(ChaChaPoly.SealedBox(combined: op.sealed!.box), using: key, authenticating: ad))
        #expect(plaintext[0] == 1)
        let length = Int(UInt32(plaintext[1]) << 24 | UInt32(plaintext[2]) << 16 | UInt32(plaintext[3]) << 8 | UInt32(plaintext[4]))
        #expect(Array(plaintext[5..<7]) == [0, 5])
        #expect(String(decoding: plaintext[7..<12], as: UTF8.self) == "sound")
        #expect(plaintext[20] == 0)  // flags: not a deletion
        #expect(plaintext[(5 + length)...].allSatisfy { $0 == 0 }, "padding is zeros")
        #expect(plaintext.count == EntrySealer.padme(5 + length))
        #expect(op.sealed!.box.count == plaintext.count + 28)
    }

    @Test("PADMÉ adds at most 12 % and leaves only the top bits of a length free")
    func padding() {
        #expect(EntrySealer.padme(100) == 104)
        #expect(EntrySealer.padme(1000) == 1024)
        #expect(EntrySealer.padme(9) == 10)
        for length in 2...5000 {
            let padded = EntrySealer.padme(length)
            #expect(padded >= length && Double(padded - length) <= Double(length) * 0.12, "\(length) → \(padded)")
        }
    }

    @Test("an entry opens to its key, value and stamp; a deletion is sealed too")
    func roundTrip() throws {
        for value in [PropertyListValue.string("ring.caf"), .dictionary(["a": .array([.integer(-3), .bool(true)])]), nil] {
            let op = try Self.sealer.seal(key: "clé", value: value, hlc: Self.hlc, origin: Self.origin)
            #expect(op.isDeleted == (value == nil))
            let entry = SyncEntry(keyID: op.key, sealed: op.sealed!, deleted: op.isDeleted, hlc: op.hlc, origin: Self.origin, rev: 9)
            let opened = try Self.sealer.open(entry)
            #expect(opened == SyncEntry(key: "clé", value: value, hlc: Self.hlc, origin: Self.origin, rev: 9))
        }
    }

    @Test("a flipped byte, a swap between keys, a changed HLC, origin, deletion flag or epoch, a plain entry: each refused")
    func tampering() throws {
        func sealed(_ key: String, _ value: PropertyListValue?) throws -> SyncEntry {
            let op = try Self.sealer.seal(key: key, value: value, hlc: Self.hlc, origin: Self.origin)
            return SyncEntry(keyID: op.key, sealed: op.sealed!, deleted: op.isDeleted, hlc: op.hlc, origin: Self.origin)
        }
        let sound = try sealed("sound", .string("ring.caf"))
        let volume = try sealed("volume", .double(0.8))
        func refusal(_ entry: SyncEntry) -> EntrySealer.Refusal? {
            do {
                _ = try Self.sealer.open(entry)
                return nil
            } catch { return error }
        }
        var flipped = sound
        flipped.sealed!.box[20] ^= 1
        #expect(refusal(flipped) == .doesNotOpen)
        var swapped = sound
        swapped.sealed = volume.sealed
        #expect(refusal(swapped) == .doesNotOpen)
        var later = sound
        later.hlc = HLC(rawValue: Self.hlc.rawValue + 1)
        #expect(refusal(later) == .doesNotOpen)
        var otherOrigin = sound
        otherOrigin.origin += 1
        #expect(refusal(otherOrigin) == .doesNotOpen)
        var deleted = sound
        deleted.isDeleted = true
        #expect(refusal(deleted) == .doesNotOpen)
        var otherEpoch = sound
        otherEpoch.sealed!.epoch = 2
        #expect(refusal(otherEpoch) == .unknownEpoch(2))
        #expect(refusal(SyncEntry(key: "sound", value: .string("evil"), hlc: Self.hlc, origin: Self.origin)) == .notSealed)
        // Another suite's keys (same recovery key) open nothing of this one's.
        let elsewhere = EntrySealer(keys: SuiteKeys(recoveryKey: Self.recovery, suite: "group.other"))
        #expect(throws: EntrySealer.Refusal.self) { try elsewhere.open(sound) }
        #expect(refusal(sound) == nil)
    }

    @Test("a recovery key reads back in any case and grouping; a typo, a wrong length or a foreign character is named")
    func recoveryKeys() throws {
        let key = RecoveryKey()
        let text = key.description
        #expect(text.count == 34 && text.split(separator: "-").count == 7)
        #expect(try RecoveryKey(parsing: text) == key)
        #expect(try RecoveryKey(parsing: " " + text.lowercased().replacingOccurrences(of: "-", with: " ") + " ") == key)
        #expect(try RecoveryKey(parsing: text.replacingOccurrences(of: "0", with: "O").replacingOccurrences(of: "1", with: "l")) == key)
        var typo = Array(text)
        typo[5] = typo[5] == "A" ? "B" : "A"
        #expect { try RecoveryKey(parsing: String(typo)) } throws: { "\($0)".contains("mistyped") }
        #expect { try RecoveryKey(parsing: String(text.dropLast(2))) } throws: { "\($0)".contains("28 characters") }
        #expect { try RecoveryKey(parsing: "U" + text.dropFirst()) } throws: { "\($0)".contains("'U'") }
        #expect(SuiteKeys(recoveryKey: key, suite: Self.suite).keyID(for: "sound") != Self.keys.keyID(for: "sound"))
    }

    @Test("the key file is written 0600, read back, and refused when loose, damaged or another suite's; no key is ever described")
    func keyFile() throws {
        try withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("suite.keys").path
            try Self.keys.write(to: path)
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
            let read = try SuiteKeys.read(from: path, suite: Self.suite)
            #expect(read.keyID(for: "sound") == Self.keys.keyID(for: "sound"))
            #expect("\(read)" == "keys of \(Self.suite) (epoch 1)")
            #expect { try SuiteKeys.read(from: path, suite: "group.other") } throws: { "\($0)".contains("not of group.other") }
            chmod(path, 0o640)
            #expect { try SuiteKeys.read(from: path, suite: Self.suite) } throws: { "\($0)".contains("chmod 600") }
            chmod(path, 0o600)
            try Data("{}".utf8).write(to: URL(fileURLWithPath: path))
            #expect { try SuiteKeys.read(from: path, suite: Self.suite) } throws: { "\($0)".contains("damaged") }
        }
    }

    @Test(
        "the recovery key opens a key bag only if the owner key or the recovery key signed it; a planted one, and one signed by the epoch before alone (as a member could), are passed over"
    )
    func signedKeyBags() throws {
        func bags(_ signed: [UInt32: SignedKeyBag]) -> KeyBags {
            KeyBags(
                epochs: Dictionary(uniqueKeysWithValues: signed.map { (String($0.key), $0.value.bundle!) }),
                signatures: Dictionary(uniqueKeysWithValues: signed.compactMap { bag in bag.value.signature.map { (String(bag.key), $0) } }),
                ownerSignatures: Dictionary(uniqueKeysWithValues: signed.compactMap { bag in bag.value.ownerSignature.map { (String(bag.key), $0) } })
            )
        }
        let second = try Self.keys.rotated()
        let third = try second.rotated()
        let chain: [UInt32: SignedKeyBag] = [2: try second.signedKeyBag(epoch: 2), 3: try third.signedKeyBag(epoch: 3)]
        let recovered = SuiteKeys(recoveryKey: Self.recovery, suite: Self.suite, keyBags: bags(chain))
        #expect(recovered.currentEpoch == 3)
        let opened = try #require(recovered.epochs[3])
        let made = try #require(third.epochs[3])
        #expect(opened.withUnsafeBytes { Data($0) } == made.withUnsafeBytes { Data($0) })

        // Someone without the keys (a token, the server) seals a key of its own to the recovery
        // key's public half, which every key file holds, and signs it with a key of its own.
        let planted = SuiteKeys(
            suite: Self.suite,
            names: Self.keys.names,
            epochs: [1: SymmetricKey(size: .bits256), 2: SymmetricKey(size: .bits256)],
            recoveryPublicKey: Self.keys.recoveryPublicKey,
            recoveryVerifyKey: nil,
            sharing: nil
        )
        let forged = try planted.signedKeyBag(epoch: 2)
        #expect(SuiteKeys(recoveryKey: Self.recovery, suite: Self.suite, keyBags: bags([UInt32(2): forged])).currentEpoch == 1)
        var unsigned = chain[2]!
        unsigned.signature = nil
        #expect(SuiteKeys(recoveryKey: Self.recovery, suite: Self.suite, keyBags: bags([UInt32(2): unsigned])).currentEpoch == 1)
        // A signature over other bytes: epoch 2's true bag, with the signature of the forged one.
        var swapped = chain[2]!
        swapped.signature = forged.signature
        swapped.ownerSignature = chain[3]!.ownerSignature  // the owner's, of epoch 3's bag
        #expect(SuiteKeys(recoveryKey: Self.recovery, suite: Self.suite, keyBags: bags([UInt32(2): swapped])).currentEpoch == 1)

        // A member (or one removed) holds epoch 1's key, not the owner key: its bag is signed by the
        // epoch before alone, which the server would take, and a device set up from the recovery
        // key passes it over.
        let member = try Self.keys.with(sharing: try #require(Self.keys.sharing).forMember).rotated()
        let byMember = try member.signedKeyBag(epoch: 2)
        #expect(byMember.ownerSignature == nil && byMember.signature != nil)
        #expect(SuiteKeys(recoveryKey: Self.recovery, suite: Self.suite, keyBags: bags([UInt32(2): byMember])).currentEpoch == 1)
        var unowned = chain[2]!
        unowned.ownerSignature = nil
        #expect(SuiteKeys(recoveryKey: Self.recovery, suite: Self.suite, keyBags: bags([UInt32(2): unowned])).currentEpoch == 1)

        // Without epoch 2's key, only the recovery key signs epoch 3's bag; such a bag opens too.
        let skipping = try Self.keys.rotated(after: 2)
        #expect { try skipping.signedKeyBag(epoch: 3) } throws: { "\($0)".contains("--recovery-key-file") }
        let byRecovery = try skipping.signedKeyBag(epoch: 3, recoveryKey: Self.recovery)
        let past = SuiteKeys(recoveryKey: Self.recovery, suite: Self.suite, keyBags: bags([UInt32(2): forged, 3: byRecovery]))
        #expect(past.currentEpoch == 3 && past.epochs[2] == nil)

        // The anchor: epoch 1's verify key, which the recovery key derives, and the recovery key's.
        let anchor = try third.anchor(serverBags: bags(chain))
        #expect(anchor.bags.keys.sorted() == ["1", "2", "3"])
        #expect(anchor.bags["2"]?.bundle == chain[2]?.bundle, "the server's own bags are signed, not new ones")
        #expect(recovered.matches(anchor: anchor))
        #expect(!SuiteKeys(recoveryKey: RecoveryKey(), suite: Self.suite).matches(anchor: anchor))
    }
}
