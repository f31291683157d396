import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// Keys are their bytes (issue 46): two spellings of a key that Swift's `String ==` takes for one
/// (`é`, `e\u{301}`; `Å`, ANGSTROM SIGN; KELVIN SIGN, `K`) or that look alike, pushed from one
/// device, arrive on another as two keys, each with its value, in a plain and an encrypted suite.
@Suite struct KeyIdentitySyncTests {
    /// One pair of each kind, each key made unique within the suite by the pair's index.
    static let pairs = LookAlikeNames.keyPairs.enumerated().map { ("\($0)" + $1.0, "\($0)" + $1.1) }

    @Test("both spellings pushed from one device arrive on the other as two keys", arguments: [false, true])
    func bothSpellingsSync(encrypted: Bool) async throws {
        try await SyncServer.with(.lmdb) { server in
            let suite = "group.keys.\(encrypted ? "sealed" : "plain")"
            let keys = encrypted ? SuiteKeys(recoveryKey: RecoveryKey(), suite: suite) : nil
            let a = try Device(suite, server: server, keys: keys)
            let b = try Device(suite, server: server, keys: keys)
            defer {
                a.remove()
                b.remove()
            }
            var written: [(key: String, value: PropertyListValue)] = []
            for (index, (first, second)) in Self.pairs.enumerated() {
                written += [(first, .integer(2 * index)), (second, .integer(2 * index + 1))]
            }
            for (key, value) in written { try a.set(key, value) }
            #expect(try await a.engine.syncOnce().pushed == written.count)
            try await b.engine.syncOnce()
            let received = try b.defaults.storedValues()
            #expect(received.count == written.count)
            for (key, value) in written {
                #expect(received.first { $0.key.isSameName(as: key) }?.value == value, "\(key.unicodeScalars.map(\.value))")
            }
            // Removing one spelling on B leaves the other on A.
            let (first, second) = Self.pairs[0]
            try b.write(first, nil)
            try await b.engine.syncOnce()
            try await a.engine.syncOnce()
            #expect(a.defaults.value(forKey: first) == nil)
            #expect(a.defaults.value(forKey: second) == .integer(1))
        }
    }
}
