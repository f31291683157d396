import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// Model-based: two devices, configured for sync, make random sets and deletes offline (before their
/// first sync or after it), then sync in random order and
/// interleavings until neither has anything left to send or receive; both devices and the server
/// must then hold exactly what a reference last-writer-wins model says: per key, the write with the
/// largest (HLC, origin), deletes included (deleted = absent).
///
/// `GROUPDEFAULTS_SYNC_SEEDS` sets how many seeds run per backend (200 by default, half of them again
/// with the suite end-to-end encrypted, and half again with the second device another account's, a
/// `write` member of the suite; `Tools/sync-stress` runs more), `GROUPDEFAULTS_SYNC_FIRST_SEED`
/// the first one. A failure names its seed; the writes
/// of a seed are reproducible, the timing of the concurrent steps is not.
@Suite("Convergence of two devices", .timeLimit(.minutes(ConvergenceSettings.minutes)))
struct ConvergenceTests {
    /// What the two devices are.
    enum Variant: String, Sendable, CaseIterable {
        /// Two devices of one account, a plain suite.
        case plain
        /// Two devices of one account, an end-to-end encrypted suite.
        case encrypted
        /// The owner's device and a device of another account that is a `write` member.
        case shared
    }

    @Test(
        "both devices and the server equal the last-writer-wins model, for every seed (clocks up to 5 minutes apart): plain, end-to-end encrypted, and shared with another account",
        arguments: StorageBackend.allCases,
        Variant.allCases
    )
    func convergence(backend: StorageBackend, variant: Variant) async throws {
        try await SyncServer.with(backend) { server in
            let encrypted = variant == .encrypted
            let member = variant == .shared ? try await ServerTool.createToken(storage: server.storage, account: "bob") : nil
            // Encrypted or shared, half the seeds: the same merge, with every entry sealed and
            // opened, or pushed by two accounts.
            let count = variant != .plain ? max(1, ConvergenceSettings.seedCount / 2) : ConvergenceSettings.seedCount
            let seeds = Array(ConvergenceSettings.firstSeed..<ConvergenceSettings.firstSeed + UInt64(count))
            let failures = await withTaskGroup(of: String?.self) { group in
                var failures: [String] = []
                var next = seeds.makeIterator()
                for _ in 0..<ConvergenceSettings.parallelSeeds {
                    guard let seed = next.next() else { break }
                    group.addTask { await Self.failure(seed: seed, server: server, encrypted: encrypted, member: member) }
                }
                for await failure in group {
                    if let failure { failures.append(failure) }
                    // Stop early once a few seeds failed: their messages say enough.
                    guard failures.count < 5, let seed = next.next() else { continue }
                    group.addTask { await Self.failure(seed: seed, server: server, encrypted: encrypted, member: member) }
                }
                return failures
            }
            for failure in failures { Issue.record(Comment(rawValue: failure)) }
            #expect(failures.isEmpty, "\(failures.count) seed(s) failed on \(backend.rawValue), \(variant.rawValue)")
        }
    }

    /// Runs one seed; nil if it converged to the model, else what went wrong. With `member` (a
    /// token of another account), the second device is that account's.
    static func failure(seed: UInt64, server: SyncServer, encrypted: Bool, member: String? = nil) async -> String? {
        do {
            var scenario = Scenario(seed: seed, server: server, encrypted: encrypted, member: member)
            let problems = try await scenario.run()
            guard !problems.isEmpty else { return nil }
            return "seed \(seed) (\(server.backend.rawValue); rerun with GROUPDEFAULTS_SYNC_FIRST_SEED=\(seed) GROUPDEFAULTS_SYNC_SEEDS=1): "
                + problems.joined(separator: "; ")
        } catch {
            return "seed \(seed) (\(server.backend.rawValue)): \(error)"
        }
    }
}

/// How many seeds, from which, and the time limit.
enum ConvergenceSettings {
    static let environment = ProcessInfo.processInfo.environment
    static let seedCount = environment["GROUPDEFAULTS_SYNC_SEEDS"].flatMap(Int.init) ?? 200
    static let firstSeed = environment["GROUPDEFAULTS_SYNC_FIRST_SEED"].flatMap(UInt64.init) ?? 1
    /// Seeds in flight at once on one server.
    static let parallelSeeds = 4
    /// Generous: 200 seeds per backend take well under a minute; a stress run gets a minute per
    /// 100 seeds more.
    static let minutes = 3 + seedCount / 100
}

/// The reference: per key, the write with the largest (HLC, origin).
struct LastWriterWinsModel {
    private(set) var latest: [String: SyncEntry] = [:]

    mutating func record(_ write: SyncEntry?) {
        guard let write else { return }  // a removal of a key that was never there: no write
        if let current = latest[write.key], current.stamp >= write.stamp { return }
        latest[write.key] = write
    }

    /// What a device or the server must hold: the keys whose latest write is a value.
    var live: [String: SyncEntry] { latest.filter { !$0.value.isDeleted } }
}

/// One seed: two devices on a fresh suite of the shared server; with `encrypted`, both hold the
/// suite's keys and the server holds only sealed entries (opened here to compare with the model).
struct Scenario {
    let seed: UInt64
    let server: SyncServer
    let encrypted: Bool
    /// A token of another account: the second device is that account's, a `write` member.
    let member: String?
    var random: SeededGenerator

    init(seed: UInt64, server: SyncServer, encrypted: Bool = false, member: String? = nil) {
        self.seed = seed
        self.server = server
        self.encrypted = encrypted
        self.member = member
        random = SeededGenerator(seed: seed)
    }

    mutating func run() async throws -> [String] {
        let suite = "group.convergence\(encrypted ? ".sealed" : member != nil ? ".shared" : "").\(seed)"
        let suiteKeys = encrypted ? SuiteKeys(recoveryKey: RecoveryKey(), suite: suite) : nil
        // Device clocks: the same, one 5 minutes behind, or somewhere in between (a clock ahead of
        // the server's by more than 5 minutes is refused by design, so behind it is).
        let behind = Duration.seconds(-300)
        let offsets: (Duration, Duration) =
            switch seed % 4 {
            case 0: (.zero, .zero)
            case 1: (.zero, behind)
            case 2: (behind, .zero)
            default: (.zero, .milliseconds(-Int64(random.next() % 300_000)))
            }
        let a = try Device(suite, server: server, clockOffset: offsets.0, keys: suiteKeys)
        let b: Device
        if let member {
            // The owner invites, the member accepts: its device pushes to and pulls from the
            // owner's suite.
            let code = InvitationCode()
            _ = try await server.client(suite).createInvitation(invitationID: code.invitationID, role: .write, expiresIn: nil)
            var client = server.client(suite, token: member)
            client.owner = "alice"
            let membership = try await client.acceptInvitation(invitationID: code.invitationID)
            b = try Device(suite, server: server, clockOffset: offsets.1, client: client, shared: membership)
        } else {
            b = try Device(suite, server: server, clockOffset: offsets.1, keys: suiteKeys)
        }
        defer {
            a.remove()
            b.remove()
        }
        let devices = [a, b]
        let keys = (0..<Int.random(in: 2...8, using: &random)).map { $0 == 7 ? "clé \($0)" : "k\($0)" }
        var model = LastWriterWinsModel()

        // Both devices are configured before any write here, so every write competes by last writer
        // wins, also against the joining rule (which only overrides what predates `configure`:
        // JoiningTests). Half the seeds start by syncing once; the others edit offline first and
        // join with those edits pending.
        for key in keys where Bool.random(using: &random) { model.record(try a.set(key, randomValue())) }
        if Bool.random(using: &random) {
            try await a.engine.syncOnce()
            try await b.engine.syncOnce()
        }

        // Offline: random sets and deletes on both devices.
        for _ in 0..<Int.random(in: 1...24, using: &random) { try randomWrite(devices, keys, &model) }

        // Online, in random order, until a round in which both synced and nothing moved.
        var round = 0
        while true {
            round += 1
            guard round <= 40 else { return ["no quiet round after 40 rounds"] }
            var wrote = false
            if round <= 3, Int.random(in: 0..<3, using: &random) == 0 {
                for _ in 0..<Int.random(in: 1...4, using: &random) { try randomWrite(devices, keys, &model) }
                wrote = true
            }
            let reports: [SyncReport]
            switch Int.random(in: 0..<6, using: &random) {
            case 0:
                reports = [try await a.engine.syncOnce(), try await b.engine.syncOnce()]
            case 1:
                reports = [try await b.engine.syncOnce(), try await a.engine.syncOnce()]
            case 2:
                async let first = a.engine.syncOnce()
                async let second = b.engine.syncOnce()
                reports = [try await first, try await second]
            case 3:
                // A device's pull and push at once, while the other syncs.
                let device = devices[Int.random(in: 0...1, using: &random)]
                let other = device === a ? b : a
                async let pushed = device.engine.push()
                async let pulled = device.engine.pull()
                async let synced = other.engine.syncOnce()
                _ = try await (pushed, pulled, synced)
                reports = []  // not a quiet round: one device did not sync whole
            case 4:
                // A write lands while its device syncs: it must stay pending if the push missed it.
                let device = devices[Int.random(in: 0...1, using: &random)]
                let key = keys.randomElement(using: &random)!
                let value: PropertyListValue? = Bool.random(using: &random) ? randomValue() : nil
                async let synced = device.engine.syncOnce()
                model.record(try device.write(key, value))
                _ = try await synced
                wrote = true
                reports = []
            default:
                // One device alone.
                _ = try await devices[Int.random(in: 0...1, using: &random)].engine.syncOnce()
                reports = []
            }
            let quiet = reports.count == 2 && reports.allSatisfy { $0.isInAgreement && $0.applied == 0 && $0.pushed == 0 }
            if quiet && !wrote { break }
        }

        var problems: [String] = []
        let expected = model.live
        for (name, device) in [("A", a), ("B", b)] {
            let diff = differences(try device.entries(), expected)
            if !diff.isEmpty {
                // What the device holds for those keys, tombstones included, and where it stands.
                let held = try Set(try device.entries().keys).symmetricDifference(expected.keys).union(
                    expected.keys.filter { !sameEntry(try device.defaults.syncEntry(forKey: $0), expected[$0]) }
                ).sorted().map {
                    "\($0) = \(try device.defaults.syncEntry(forKey: $0).map { "\($0.value.map { "\($0)" } ?? "tombstone") @\($0.hlc)/\($0.origin)" } ?? "nothing")"
                }
                problems.append(
                    "device \(name) (origin \(device.defaults.origin), cursor \(try device.defaults.syncState().cursor.map(String.init) ?? "none")) differs from the model: "
                        + "\(diff.joined(separator: ", ")); it holds \(held.joined(separator: ", "))"
                )
            }
            let pending = try device.defaults.pendingCount()
            if pending != 0 { problems.append("device \(name) still has \(pending) pending") }
        }
        let onServer = try await server.snapshot(suite, keys: suiteKeys).entries
        let diff = differences(onServer, expected)
        if !diff.isEmpty { problems.append("the server differs from the model: \(diff.joined(separator: ", "))") }
        return problems
    }

    /// A set (two times in three) or a delete of a random key on a random device, recorded in the
    /// model with the stamp the device gave it.
    private mutating func randomWrite(_ devices: [Device], _ keys: [String], _ model: inout LastWriterWinsModel) throws {
        let device = devices[Int.random(in: 0...1, using: &random)]
        let key = keys.randomElement(using: &random)!
        let value: PropertyListValue? = Int.random(in: 0..<3, using: &random) == 0 ? nil : randomValue()
        model.record(try device.write(key, value))
    }

    /// A random value of any kind (dates in whole seconds).
    private mutating func randomValue(depth: Int = 0) -> PropertyListValue {
        switch Int.random(in: 0..<(depth < 2 ? 9 : 7), using: &random) {
        case 0: return .string(["ring.caf", "bell.aiff", "", "é😀", "line\nbreak"].randomElement(using: &random)! + String(random.next() % 1000))
        case 1: return .integer(Int(truncatingIfNeeded: random.next()))
        case 2: return .double(Double(Int64(truncatingIfNeeded: random.next() >> 11)) / 1024)
        case 3: return .bool(Bool.random(using: &random))
        case 4: return .data(Data((0..<Int.random(in: 0...12, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }))
        case 5: return .date(Date(timeIntervalSince1970: TimeInterval(Int.random(in: 0...2_000_000_000, using: &random))))
        case 6: return .string(String(repeating: "x", count: Int.random(in: 0...64, using: &random)))
        case 7: return .array((0..<Int.random(in: 0...3, using: &random)).map { _ in randomValue(depth: depth + 1) })
        default:
            var dictionary: [String: PropertyListValue] = [:]
            for index in 0..<Int.random(in: 0...3, using: &random) { dictionary["d\(index)"] = randomValue(depth: depth + 1) }
            return .dictionary(dictionary)
        }
    }
}
