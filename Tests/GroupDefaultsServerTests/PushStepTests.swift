import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import PropertyBased
import Synchronization
import TestSupport
import Testing

/// The push step on its own, as a model of a suite: the state a backend would persist, kept in
/// memory. Random pushes go through it and through each backend, which must answer alike.
struct PushModel {
    var held: [ExactName: StoredEntry] = [:]
    var counters = PushStep.Counters(head: 0, keys: 0, bytes: 0)
    var batches: [String: (digest: [UInt8], response: PushResponse)] = [:]

    /// What a push gets: a response, or a refusal's code.
    enum Answer: Equatable {
        case response(PushResponse)
        case refused(SyncErrorCode)
    }

    mutating func push(_ request: PushRequest, quota: SuiteQuota) throws -> Answer {
        let prepared = try PreparedPush(request)
        let batchKey = "\(request.deviceID)/\(request.batchID)"
        let recorded = batches[batchKey].map { record in PushStep.RecordedBatch(digest: record.digest) { record.response } }
        do {
            switch try PushStep.run(
                prepared,
                suite: "s",
                held: held,
                counters: counters,
                recorded: recorded,
                quota: quota,
                serverTime: PushStepTests.serverTime
            ) {
            case .replayed(let response):
                return .response(response)
            case .applied(let applied):
                for entry in applied.writes { held[entry.key.exact] = entry }
                counters = applied.counters
                batches[batchKey] = (prepared.digest, applied.response)
                return .response(applied.response)
            }
        } catch let error as SyncStorageError {
            return .refused(error.code)
        }
    }

    /// Every entry, tombstones included, in UTF-8 key order (what a snapshot lists).
    func entries() throws -> [SyncEntry] {
        try held.values.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }.map { try $0.syncEntry() }
    }
}

/// A random run of pushes to one suite: few keys, devices, batch ids and HLCs, so that conflicts,
/// ties broken by origin, replays, reused batch ids and quota refusals all happen; the quotas change
/// between pushes (an operator lowering a limit), so that suites end up over them.
struct PushScript: Sendable, CustomStringConvertible {
    var pushes: [(request: PushRequest, quota: SuiteQuota)]

    /// `é` in both spellings: two keys, equal Swift strings.
    static let keys = ["a", "b", "c", "caf\u{E9}", "cafe\u{301}", "a.b"]

    static let generator = Generator<PushScript, Shrink.None<PushScript>> { rng in
        var pushes: [(request: PushRequest, quota: SuiteQuota)] = []
        for _ in 0..<Int.random(in: 1...12, using: &rng) {
            if !pushes.isEmpty, Int.random(in: 0..<8, using: &rng) == 0 {
                pushes.append(pushes.randomElement(using: &rng)!)  // a retry of an earlier batch
                continue
            }
            let ops = (0..<Int.random(in: 1...4, using: &rng)).map { _ in
                let value: PropertyListValue? =
                    switch Int.random(in: 0..<4, using: &rng) {
                    case 0: nil
                    case 1: .integer(Int.random(in: -5...5, using: &rng))
                    default: .string(String(repeating: "x", count: Int.random(in: 0...12, using: &rng)))
                    }
                return PushOp(
                    key: keys.randomElement(using: &rng)!,
                    value: value,
                    hlc: HLC(rawValue: UInt64.random(in: 1...8, using: &rng))
                )
            }
            let request = PushRequest(
                deviceID: UInt64.random(in: 1...3, using: &rng),
                batchID: "b\(Int.random(in: 0 ..< 4, using: &rng))",
                ops: ops
            )
            let quota = SuiteQuota(maxKeys: Int.random(in: 1...5, using: &rng), maxBytes: Int.random(in: 10...80, using: &rng))
            pushes.append((request, quota))
        }
        return PushScript(pushes: pushes)
    }

    var description: String {
        pushes.map { push, quota in
            "[\(quota.maxKeys) keys, \(quota.maxBytes) bytes] device \(push.deviceID) \(push.batchID): "
                + push.ops.map { "\($0.key)@\($0.hlc)=\($0.value.map { "\($0)" } ?? "deleted")" }
                .joined(separator: ", ")
        }.joined(separator: " | ")
    }
}

@Suite("Push step", .timeLimit(.minutes(2)))
struct PushStepTests {
    static let serverTime = "2026-11-25T10:00:00.000Z"

    @Test("random pushes: each backend answers as the push step does, and ends holding what it holds", arguments: StorageBackend.allCases)
    func backendsMatchTheStep(backend: StorageBackend) async throws {
        try await backend.withStorage { storage in
            let run = Counter()
            await propertyCheck(count: 60, input: PushScript.generator) { script in
                // One account per run: accounts are apart, so runs do not see each other.
                let account = "run\(run.next())"
                var model = PushModel()
                for (request, quota) in script.pushes {
                    let expected = try model.push(request, quota: quota)
                    let actual: PushModel.Answer
                    do {
                        actual = .response(
                            try await storage.push(
                                account: account,
                                suite: "s",
                                request: request,
                                quota: quota,
                                serverTime: Self.serverTime
                            )
                        )
                    } catch let error as SyncStorageError {
                        actual = .refused(error.code)
                    }
                    #expect(actual == expected, "\(script)")
                }
                let snapshot = try await storage.snapshot(account: account, suite: "s", after: nil, limit: 100).page()
                #expect(snapshot.entries == (try model.entries()), "\(script)")
                #expect(snapshot.headRev == model.counters.head)
                let listed = try await storage.suites(account: account).suites.first
                #expect((listed?.keys ?? 0) == model.counters.keys, "\(script)")
                let changes = try await storage.changes(account: account, suite: "s", since: 0, limit: 100).page()
                #expect(changes.entries.map(\.rev) == (try model.entries()).compactMap(\.rev).sorted())
            }
        }
    }

    @Test(
        "keys are their bytes: each look-alike pair, in one batch or two, is two keys with their own values",
        arguments: StorageBackend.allCases
    )
    func keysInTwoSpellings(backend: StorageBackend) async throws {
        try await backend.withStorage { storage in
            let quota = SuiteQuota(maxKeys: 1000, maxBytes: 1 << 20)
            for (index, pair) in LookAlikeNames.pairs.enumerated() {
                let suite = "s\(index)"
                let both = PushRequest(
                    deviceID: 7,
                    batchID: "both",
                    ops: [
                        PushOp(key: pair.0, value: .integer(1), hlc: HLC(rawValue: 1 << 40)),
                        PushOp(key: pair.1, value: .integer(2), hlc: HLC(rawValue: 1 << 40 + 1)),
                    ]
                )
                let response = try await storage.push(account: "a", suite: suite, request: both, quota: quota, serverTime: Self.serverTime)
                #expect(response.results.map(\.status) == [.applied, .applied], "\(pair)")
                let alone = PushRequest(
                    deviceID: 7,
                    batchID: "alone",
                    ops: [PushOp(key: pair.1, value: .integer(3), hlc: HLC(rawValue: 1 << 41))]
                )
                _ = try await storage.push(account: "a", suite: suite, request: alone, quota: quota, serverTime: Self.serverTime)
                let snapshot = try await storage.snapshot(account: "a", suite: suite, after: nil, limit: 100).page()
                let held = Dictionary(uniqueKeysWithValues: snapshot.entries.map { ($0.key.exact, $0.value) })
                #expect(held == [pair.0.exact: .integer(1), pair.1.exact: .integer(3)], "\(pair)")
                let history = try await storage.history(account: "a", suite: suite, key: pair.0)
                #expect(history.map(\.entry.key.exact) == [pair.0.exact], "\(pair)")
            }
        }
    }

    @Test("the step keeps the promises of a push: last writer wins, one revision per applied op, idempotent batches, quotas refuse only growth")
    func stepKeepsItsPromises() async {
        await propertyCheck(count: 300, input: PushScript.generator) { script in
            var model = PushModel()
            // What a user is promised, written apart from the step: per key the largest stamp of an
            // accepted push wins; a batch id repeats its answer for the same ops and is refused for
            // others; a push is refused for a quota only if it would leave the suite over it and
            // larger on that count.
            var promised: [ExactName: (stamp: Stamp, value: PropertyListValue?)] = [:]
            var answered: [String: (ops: [PushOp], answer: PushModel.Answer)] = [:]
            var head: UInt64 = 0
            func size(_ state: [ExactName: (stamp: Stamp, value: PropertyListValue?)]) throws -> (keys: Int, bytes: Int) {
                let live = state.filter { $0.value.value != nil }
                return (live.count, try live.reduce(0) { $0 + $1.key.text.utf8.count + (try $1.value.value!.typedJSON().count) })
            }
            for (request, quota) in script.pushes {
                let answer = try model.push(request, quota: quota)
                let batchKey = "\(request.deviceID)/\(request.batchID)"
                if let earlier = answered[batchKey] {
                    #expect(answer == (earlier.ops == request.ops ? earlier.answer : .refused(.idempotencyMismatch)), "\(script)")
                    continue
                }
                var next = promised
                var applied: UInt64 = 0
                for op in request.ops {
                    let stamp = Stamp(hlc: op.hlc, origin: op.origin ?? request.deviceID)
                    if next[op.key.exact].map({ stamp > $0.stamp }) ?? true {
                        next[op.key.exact] = (stamp, op.value)
                        applied += 1
                    }
                }
                let (before, after) = (try size(promised), try size(next))
                let overKeys = after.keys > quota.maxKeys && after.keys > before.keys
                let overBytes = after.bytes > quota.maxBytes && after.bytes > before.bytes
                if overKeys || overBytes {
                    #expect(answer == .refused(.quotaExceeded), "\(script)")
                    continue
                }
                guard case .response(let response) = answer else {
                    Issue.record("refused: \(answer) — \(script)")
                    continue
                }
                promised = next
                answered[batchKey] = (request.ops, answer)
                head += applied
                #expect(response.headRev == head)
                #expect(response.results.map(\.status).filter { $0 == .applied }.count == Int(applied))
                for result in response.results {
                    #expect(result.winner?.stamp == promised[result.key.exact]?.stamp, "\(script)")
                    #expect(result.winner?.value == promised[result.key.exact]?.value, "\(script)")
                }
            }
            let (keys, bytes) = try size(promised)
            #expect(model.counters.keys == keys && model.counters.bytes == bytes, "\(script)")
            #expect(Set(model.held.keys) == Set(promised.keys))
        }
    }
}

/// Numbers 0, 1, 2, … handed out across tasks.
final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int {
        value.withLock { count in
            defer { count += 1 }
            return count
        }
    }
}
