import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

/// `groupdefaults-bench sync --encrypt`: what end-to-end encryption costs, each figure beside the
/// same measurement of a plain suite in the same run (same server, same client, same values).
///
/// - Initial sync of 10,000 keys to a fresh device (the snapshot opened and checked, entry by entry).
/// - Set on A → readable on B, both engines in `run()`.
/// - Bytes the server stores per entry (what counts against its quotas: key or key id, and typed
///   JSON or sealed box).
/// - Seal + open of one entry holding a 100-byte string, in process.
/// - A removal's rotation of a suite of 10,000 keys shared with another account.
enum EncryptionCost {
    static func measure(devices: Devices, sandbox: Sandbox, joins: Int, changes: Int) async throws -> [ServerReport.Row] {
        var rows: [ServerReport.Row] = []
        let keyFile = sandbox.root + "/bench.keys"
        try SuiteKeys(recoveryKey: RecoveryKey(), suite: "group.bench.sealed-initial").write(to: keyFile)
        let plainJoin = try await SyncBench.initialSync(devices: devices, suite: "group.bench.plain-initial", keyFile: nil, joins: joins)
        let sealedJoin = try await SyncBench.initialSync(devices: devices, suite: "group.bench.sealed-initial", keyFile: keyFile, joins: joins)
        rows.append(
            ServerReport.Row(
                backend: "embedded",
                measurement: "initial sync, \(ServerFormat.count(Double(SyncBench.keys))) keys, encrypted",
                value: sealedJoin.milliseconds,
                unit: "ms",
                samples: joins,
                reference: "plain, same run: " + ServerFormat.milliseconds(plainJoin.milliseconds),
                ratio: sealedJoin.milliseconds / plainJoin.milliseconds,
                target: "≤ 1.3× plain",
                met: sealedJoin.milliseconds <= 1.3 * plainJoin.milliseconds
            )
        )
        rows.append(
            ServerReport.Row(
                backend: "embedded",
                measurement: "bytes stored per entry, encrypted",
                value: sealedJoin.bytesPerEntry,
                unit: "bytes",
                reference: "plain, same values: \(Int(plainJoin.bytesPerEntry.rounded())) bytes",
                ratio: sealedJoin.bytesPerEntry / plainJoin.bytesPerEntry,
                target: "≤ 1.3× plain",
                met: sealedJoin.bytesPerEntry <= 1.3 * plainJoin.bytesPerEntry,
                detail:
                    "key or key id bytes plus typed JSON or sealed box bytes, as the quota counts them; short values, so the box's fixed 44 bytes and the key name inside it dominate"
            )
        )

        let liveKeys = sandbox.root + "/bench-live.keys"
        try SuiteKeys(recoveryKey: RecoveryKey(), suite: "group.bench.sealed-live").write(to: liveKeys)
        let plain = try await SyncBench.endToEnd(devices: devices, suite: "group.bench.plain-live", keyFile: nil, changes: changes)
        let sealed = try await SyncBench.endToEnd(devices: devices, suite: "group.bench.sealed-live", keyFile: liveKeys, changes: changes)
        rows.append(
            ServerReport.Row(
                backend: "embedded",
                measurement: "set on A → readable on B, encrypted",
                samples: changes,
                p50Ms: sealed.p50 / 1e6,
                p99Ms: sealed.p99 / 1e6,
                reference: "plain, same run: p50 \(ServerFormat.milliseconds(plain.p50 / 1e6)), p99 \(ServerFormat.milliseconds(plain.p99 / 1e6))",
                ratio: sealed.p50 / plain.p50,
                target: "p50 and p99 ≤ 1.3× plain",
                met: sealed.p50 <= 1.3 * plain.p50 && sealed.p99 <= 1.3 * plain.p99
            )
        )

        rows.append(try await removalRotation(devices: devices, sandbox: sandbox))

        let steady = try sealAndOpen(newKeys: false)
        let firstSight = try sealAndOpen(newKeys: true)
        rows.append(
            ServerReport.Row(
                backend: "in process",
                measurement: "seal + open of one entry (100-byte string)",
                value: steady,
                unit: "µs",
                reference: "a key sealed for the first time: " + String(format: "%.2f µs", firstSight),
                target: "≤ 5 µs",
                met: steady <= 5,
                detail: "ChaCha20-Poly1305 (swift-crypto), key id HMAC-SHA256 (remembered per key name after its first use), PADMÉ, "
                    + "checks against the envelope; median of 20 rounds of 10,000"
            )
        )
        return rows
    }

    /// A removal's rotation of an encrypted suite of 10,000 keys shared with another account:
    /// `unshare` on the owner's device (the removal, a new epoch sealed for the owner's devices and
    /// the remaining members, every entry sealed again and pushed), beside the suite's first upload
    /// from that device in the same run. The member joins with an invitation (the keys handed over
    /// in process) and syncs before it is removed.
    static func removalRotation(devices: Devices, sandbox: Sandbox) async throws -> ServerReport.Row {
        let suite = "group.bench.sealed-shared"
        let keyFile = sandbox.root + "/bench-shared.keys"
        try SuiteKeys(recoveryKey: RecoveryKey(), suite: suite).write(to: keyFile)
        let owner = try devices.make("shared-owner", suite: suite, keyFile: keyFile)
        try await owner.defaults.write { tx in
            for index in 0..<SyncBench.keys { try tx.set(SyncBench.value(index), forKey: String(format: "setting.%05d", index)) }
        }
        let uploadStart = Clock.nanoseconds()
        let uploaded = try await owner.engine.syncOnce()
        let upload = Double(Clock.nanoseconds() - uploadStart) / 1e6
        guard uploaded.pushed == SyncBench.keys else { throw BenchError("the upload of \(SyncBench.keys) keys: \(uploaded)") }

        let (code, invitation) = try await owner.engine.sharing.share(role: .write)
        async let handed = owner.engine.sharing.handOverKeys(code: code, invitation: invitation)
        let directory = URL(fileURLWithPath: "\(devices.root)/devices/shared-member")
        let joined = try await SyncSetup(server: devices.server, tokenFile: devices.memberTokenFile)
            .join(invitation: code, localName: suite, directory: directory)
        let member = try (await handed).acceptedBy ?? joined.membership.account ?? ""
        let memberDefaults = try SharedDefaults(existingSuiteName: suite, directory: directory)
        let synced = try await SyncEngine(configured: memberDefaults, http: devices.http).syncOnce()
        guard synced.applied == SyncBench.keys else { throw BenchError("the member got \(synced.applied) of \(SyncBench.keys) keys") }

        let start = Clock.nanoseconds()
        let rotation = try await owner.engine.sharing.unshare(account: member)
        let rotated = Double(Clock.nanoseconds() - start) / 1e6
        guard rotation?.resealed == SyncBench.keys else { throw BenchError("the rotation sealed \(rotation?.resealed ?? 0) entries again") }
        return ServerReport.Row(
            backend: "embedded",
            measurement: "a removal's rotation (unshare), \(ServerFormat.count(Double(SyncBench.keys))) keys, encrypted",
            value: rotated,
            unit: "ms",
            samples: 1,
            reference: "the suite's first upload, same device and run: " + ServerFormat.milliseconds(upload),
            ratio: rotated / upload,
            target: "≤ 2× the first upload",
            met: rotated <= 2 * upload,
            detail: "removal, new key sealed for the owner and the remaining members, snapshot read and opened, every entry sealed again and pushed"
        )
    }

    /// Microseconds for one seal and one open, the median of 20 rounds: of one key again and again
    /// (a suite's steady state), or of 10,000 keys each seen for the first time (`newKeys`).
    static func sealAndOpen(newKeys: Bool) throws -> Double {
        let value = PropertyListValue.string(String(repeating: "x", count: 100))
        let hlc = HLC(rawValue: HLC.wallClockMilliseconds() << 16)
        let names = (0..<10_000).map { newKeys ? "notification.sound.\($0)" : "notification.sound" }
        var rounds: [Double] = []
        for _ in 0..<20 {
            let sealer = EntrySealer(keys: SuiteKeys(recoveryKey: RecoveryKey(), suite: "group.bench.seal"))
            let start = Clock.nanoseconds()
            for name in names {
                let op = try sealer.seal(key: name, value: value, hlc: hlc, origin: 42)
                let entry = SyncEntry(keyID: op.key, sealed: op.sealed!, deleted: false, hlc: hlc, origin: 42)
                guard try sealer.open(entry).value == value else { throw BenchError("an entry did not open to its value") }
            }
            rounds.append(Double(Clock.nanoseconds() - start) / 10_000 / 1000)
        }
        return median(rounds)
    }
}
