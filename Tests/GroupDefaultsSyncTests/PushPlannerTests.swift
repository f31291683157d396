import Foundation
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaults
@testable import GroupDefaultsSync

/// The push planner on its own, against a model of what pushing promises (the sync guide's
/// "What sync promises" and "Limits"): every change a push may carry is sent, in batches within
/// the server's limits; a change it may not carry is set aside, reported once, and sent again
/// only once its key changes; every pending key has its turn, however often others change; a
/// refusal names the change set aside, or makes the batches smaller.
@Suite("PushPlanner")
struct PushPlannerTests {
    /// A device's pending changes as the store keeps them: one per key, in key byte order.
    struct Pending {
        var changes: [ExactName: PendingChange] = [:]
        var clock: UInt64 = 1_000

        mutating func write(_ key: String, _ value: PropertyListValue) {
            clock += 1
            changes[key.exact] = PendingChange(key: key, stamp: Stamp(hlc: HLC(milliseconds: clock, counter: 0), origin: 7), value: value)
        }

        func page(after: String?, limit: Int) -> [PendingChange] {
            let sorted = changes.values.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
            let rest = sorted.filter { change in after.map { $0.utf8.lexicographicallyPrecedes(change.key.utf8) } ?? true }
            return Array(rest.prefix(limit))
        }

        /// The server took these: cleared unless written again since.
        mutating func settle(_ pushed: [(key: String, stamp: Stamp)]) {
            for (key, stamp) in pushed where changes[key.exact]?.stamp == stamp { changes[key.exact] = nil }
        }
    }

    static func encode(_ change: PendingChange) -> PushOp {
        PushOp(key: change.key, value: change.value, hlc: change.stamp.hlc)
    }

    /// What the model says a change is: sendable, or breaking a limit (and which).
    static func breach(_ change: PendingChange, _ limits: SyncLimits) -> SyncErrorCode? {
        guard let value = change.value else { return nil }
        if value.nestingDepth > PropertyListValue.maximumNestingDepth { return .valueTooDeep }
        if let bytes = try? value.typedJSON().count, bytes > limits.maxValueBytes { return .valueTooLarge }
        return nil
    }

    static func deep(_ depth: Int) -> PropertyListValue {
        (0..<depth).reduce(PropertyListValue.integer(1)) { inner, _ in .array([inner]) }
    }

    static func randomValue(_ random: inout SeededGenerator, limits: SyncLimits) -> PropertyListValue {
        switch Int.random(in: 0..<10, using: &random) {
        case 0: .string(String(repeating: "x", count: limits.maxValueBytes + 1))  // too large
        case 1: deep(PropertyListValue.maximumNestingDepth + 1)  // too deep
        case 2, 3: .string(String(repeating: "y", count: Int.random(in: 100...(limits.maxValueBytes / 2), using: &random)))
        default: .integer(Int.random(in: 0...1000, using: &random))
        }
    }

    @Test("random pending changes: batches within the limits, what cannot go set aside and journaled once, the rest all sent", arguments: 1...40)
    func model(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let limits = SyncLimits(maxValueBytes: 4096, maxOpsPerBatch: Int.random(in: 1...20, using: &random), maxBodyBytes: 9000)
        var pending = Pending()
        let keys = (0..<Int.random(in: 1...600, using: &random)).map { "k\($0)" }
        for key in keys { pending.write(key, Self.randomValue(&random, limits: limits)) }
        var planner = PushPlanner()
        var journaled: [ExactName: Stamp] = [:]
        var rounds = 0
        while true {
            rounds += 1
            #expect(rounds < 2 * keys.count + 10, "seed \(seed): pushing does not end")
            if rounds >= 2 * keys.count + 10 { return }
            // Now and then a key is written again between batches.
            if Bool.random(using: &random), let key = keys.randomElement(using: &random) {
                pending.write(key, Self.randomValue(&random, limits: limits))
            }
            planner.forgetChanged(stillPending: pending.changes.mapValues(\.stamp))
            let snapshot = pending
            let batch = try planner.nextBatch(
                limits: limits,
                now: .now,
                page: { after in snapshot.page(after: after, limit: PushPlanner.pageSize) },
                encode: { Self.encode($0) }
            )
            for change in planner.takeNewlySetAside() {
                let original = try #require(pending.changes[change.key.exact])
                #expect(
                    Self.breach(original, limits) == change.error.code,
                    "seed \(seed): \(change.key) set aside as \(String(describing: change.error.code))"
                )
                #expect(journaled[change.key.exact] != change.stamp, "seed \(seed): \(change.key) journaled twice for one stamp")
                journaled[change.key.exact] = change.stamp
            }
            guard let batch else { break }
            #expect(batch.ops.count <= limits.maxOpsPerBatch)
            #expect(PushPlanner.envelopeBytes + batch.ops.map { $0.count + 1 }.reduce(0, +) <= limits.maxBodyBytes)
            #expect(Set(batch.pushed.map(\.key.exact)).count == batch.pushed.count, "a key twice in one batch")
            for (key, stamp) in batch.pushed {
                let change = try #require(pending.changes[key.exact])
                #expect(change.stamp == stamp)
                #expect(Self.breach(change, limits) == nil, "seed \(seed): \(key) breaks a limit and was sent")
            }
            pending.settle(batch.pushed)
        }
        // Nothing left but what a push may not carry, each set aside, and reported.
        for change in pending.changes.values {
            #expect(Self.breach(change, limits) != nil, "seed \(seed): \(change.key) was never sent")
            #expect(planner.setAside[change.key.exact]?.stamp == change.stamp)
        }
        #expect(planner.rejected.count == pending.changes.count)
    }

    @Test("a key written again after every batch does not keep the others waiting")
    func everyKeyHasItsTurn() throws {
        let limits = SyncLimits(maxOpsPerBatch: 3)
        var pending = Pending()
        for index in 0..<10 { pending.write("k\(index)", .integer(index)) }
        var planner = PushPlanner()
        var sent: Set<String> = []
        for round in 0..<4 {  // 10 keys, 3 a batch: all within 4 batches
            let snapshot = pending
            let batch = try planner.nextBatch(
                limits: limits,
                now: .now,
                page: { snapshot.page(after: $0, limit: PushPlanner.pageSize) },
                encode: { Self.encode($0) }
            )
            let pushed = try #require(batch).pushed
            sent.formUnion(pushed.map(\.key))
            pending.settle(pushed)
            pending.write("k0", .integer(100 + round))  // the first key, changed again and again
        }
        #expect(sent == Set((0..<10).map { "k\($0)" }))
    }

    @Test("a change set aside is sent again once its key changes; a clock's refusal after 30 seconds")
    func setAsideUntilChanged() throws {
        var pending = Pending()
        pending.write("a", .integer(1))
        var planner = PushPlanner()
        let start = ContinuousClock.now
        let change = try #require(pending.changes["a"])
        let refused = PushResponse(
            headRev: 1,
            results: [PushResult(key: "a", status: .refused, winner: nil, error: .valueTooLarge, detail: "too large")],
            serverTime: ""
        )
        let (settled, _) = planner.settle(refused, pushed: [("a", change.stamp)], now: start)
        #expect(settled.isEmpty && planner.takeNewlySetAside().map(\.key) == ["a"] && planner.rejected.first?.code == .valueTooLarge)
        func next(_ now: ContinuousClock.Instant) throws -> PushPlanner.Batch? {
            let snapshot = pending
            return try planner.nextBatch(limits: SyncLimits(), now: now, page: { snapshot.page(after: $0, limit: 256) }, encode: { Self.encode($0) })
        }
        #expect(try next(start + .seconds(3600)) == nil, "sent again before its key changed")
        pending.write("a", .integer(2))
        planner.forgetChanged(stillPending: pending.changes.mapValues(\.stamp))
        #expect(try next(start)?.pushed.map(\.key) == ["a"])

        // A clock's refusal: tried again after 30 seconds, unchanged.
        let stamp = try #require(pending.changes["a"]).stamp
        planner.setAside("a", stamp: stamp, SyncError(.rejected, code: .clockSkew, "ahead"), now: start)
        #expect(planner.takeNewlySetAside().map(\.key) == ["a"])
        planner.setAside("a", stamp: stamp, SyncError(.rejected, code: .clockSkew, "ahead"), now: start)
        #expect(planner.takeNewlySetAside().isEmpty, "journaled twice")
        #expect(try next(start + .seconds(29)) == nil)
        #expect(try next(start + .seconds(31))?.pushed.map(\.key) == ["a"])
    }

    @Test("a change set aside before a page read fails is still handed over to be journaled, once")
    func setAsideSurvivesAThrow() throws {
        var pending = Pending()
        pending.write("a", .string(String(repeating: "x", count: 5000)))  // too large
        for index in 0..<300 { pending.write("b\(index)", .integer(index)) }
        var planner = PushPlanner()
        let snapshot = pending
        #expect(throws: SyncError.self) {
            _ = try planner.nextBatch(
                limits: SyncLimits(maxValueBytes: 4096),
                now: .now,
                page: { after throws(SyncError) in
                    if after != nil { throw SyncError(.local, "the disk failed") }
                    return snapshot.page(after: nil, limit: PushPlanner.pageSize)
                },
                encode: { Self.encode($0) }
            )
        }
        #expect(planner.takeNewlySetAside().map(\.key) == ["a"])
        #expect(planner.takeNewlySetAside().isEmpty)
    }

    @Test("a refusal that names a key sets that change aside; one that names none halves the batch until the culprit is alone")
    func refusals() {
        var planner = PushPlanner()
        let stamp = { (n: UInt64) in Stamp(hlc: HLC(milliseconds: n, counter: 0), origin: 1) }
        let pushed = (0..<8).map { ("k\($0)", stamp(UInt64($0 + 1))) }
        let ids = pushed.map { "id-\($0.0)" }
        planner.settle(refusal: SyncError(.rejected, code: .quotaExceeded, "full"), pushed: pushed, keyIDs: ids, now: .now)
        #expect(planner.cap == 4 && planner.takeNewlySetAside().isEmpty)
        planner.settle(refusal: SyncError(.rejected, code: .batchTooLarge, "big"), pushed: Array(pushed.prefix(4)), keyIDs: ids, now: .now)
        #expect(planner.cap == 2 && planner.takeNewlySetAside().isEmpty)
        // Named by its id as the server saw it (an encrypted suite's key id): set aside by name.
        planner.settle(refusal: SyncError(.rejected, code: .quotaExceeded, "full", key: "id-k5"), pushed: pushed, keyIDs: ids, now: .now)
        let named = planner.takeNewlySetAside()
        #expect(named.map(\.key) == ["k5"] && named.first?.stamp == stamp(6) && planner.setAside["k5"] != nil)
        // Alone: the one change is the culprit.
        planner.settle(refusal: SyncError(.rejected, code: .quotaExceeded, "full"), pushed: [pushed[2]], keyIDs: [ids[2]], now: .now)
        #expect(planner.takeNewlySetAside().map(\.key) == ["k2"])
        planner.settle(refusal: SyncError(.rejected, code: .idempotencyMismatch, "id"), pushed: pushed, keyIDs: ids, now: .now)
        #expect(planner.takeNewlySetAside().isEmpty)
    }

    @Test("what a refused push means for the batch, by code")
    func outcomes() {
        let error = { (code: SyncErrorCode) in SyncError(.rejected, code: code, "no") }
        #expect(PushPlanner.outcome(of: error(.suiteEncrypted), isShared: false) == .dropBatchAndThrow)
        #expect(PushPlanner.outcome(of: error(.valueTooLarge), isShared: false) == .settle)
        #expect(PushPlanner.outcome(of: error(.insufficientRole), isShared: true) == .becomeReadMember)
        #expect(PushPlanner.outcome(of: error(.insufficientRole), isShared: false) == .rethrow)
        #expect(PushPlanner.outcome(of: error(.staleKeyEpoch), isShared: false) == .sealAgain)
        #expect(PushPlanner.outcome(of: error(.clockSkew), isShared: false) == .retryLater)
        #expect(PushPlanner.staleEpochFailure(error(.staleKeyEpoch), mine: 3, serverEpoch: 3) == nil)
        #expect(PushPlanner.staleEpochFailure(error(.staleKeyEpoch), mine: 4, serverEpoch: 3)?.remedy == .rotateAgain)
        #expect(PushPlanner.staleEpochFailure(error(.staleKeyEpoch), mine: 6, serverEpoch: 3)?.remedy == .pairFromThisDevice)
        #expect(PushPlanner.staleEpochFailure(error(.staleKeyEpoch), mine: 2, serverEpoch: 3)?.remedy == .pairAgain)
    }
}
