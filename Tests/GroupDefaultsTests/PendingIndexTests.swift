import Foundation
import GroupDefaultsLMDB
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaults

// The pending changes of a synced suite, against a model written from what sync promises (the
// guide's docs/guide/sync.md and the hooks' documentation), not from the code: a local change is pending
// until the server acknowledges that very stamp; a pulled entry that wins replaces it; local-only
// keys are never pending, and a key that stops being local-only in a suite that joined the
// server's is uploaded; turning sync off forgets every mark; values stored before sync was turned
// on are not pending. The pending changes are read from an index (`PendingIndex`), which this
// checks against the promise after every step, across reopenings and the upgrade of an older file.

private let serverURL = "https://sync.example.com"

/// What the user is promised about pending changes.
private struct PendingModel {
    /// Per key: true while it holds a value, false once it holds a removal (a tombstone).
    var holds: [String: Bool] = [:]
    var pending: Set<String> = []
    var synced = false
    /// Whether the suite has a cursor (it joined the server's state).
    var joined = false
    /// Whether `l*` is local-only (`configure --exclude`).
    var excludesL = false

    func isLocal(_ key: String) -> Bool { excludesL && key.hasPrefix("l") }
    func marks(_ key: String) -> Bool { synced && !isLocal(key) }
}

private enum Step: CaseIterable {
    case set, remove, removeAll, acknowledge, acknowledgeStale, remoteNewer, remoteNewerRemoval, remoteOlder, toggleLocal, disable,
        enable, markEverything, reopen
}

@Suite("The pending index: pending changes as sync promises them")
struct PendingIndexTests {
    static let keys = ["a", "b", "c", "d", "l1", "l2"]

    @Test("random local writes, acknowledgements, pulls and settings keep the pending changes the model's", arguments: 0..<40)
    func modelBased(seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed) &+ 0x9E1D)
        try withTemporaryDirectory { dir in
            var defaults: SharedDefaults? = try openSuite(dir)
            var model = PendingModel()
            // Remote entries are newer than everything before them: each one second later, from a
            // minute ahead (within the five minutes a stamp may run ahead).
            var remoteOffset: Int64 = 60_000
            for stepNumber in 0..<120 {
                let suite = defaults!
                let step = Step.allCases.randomElement(using: &random)!
                let key = Self.keys.randomElement(using: &random)!
                switch step {
                case .set:
                    suite.set("v\(stepNumber)", forKey: key)
                    model.holds[key] = true
                    if model.marks(key) { model.pending.insert(key) }
                case .remove:
                    suite.removeObject(forKey: key)
                    if model.holds[key] == true {
                        model.holds[key] = false
                        if model.marks(key) { model.pending.insert(key) }
                    }
                case .removeAll:
                    try suite.write { try $0.removeAll() }
                    for (held, hasValue) in model.holds where hasValue {
                        model.holds[held] = false
                        if model.marks(held) { model.pending.insert(held) }
                    }
                case .acknowledge:
                    let acknowledged = try suite.pendingChanges().filter { _ in Bool.random(using: &random) }
                    try suite.clearPending(acknowledged.map { ($0.key, $0.stamp) })
                    model.pending.subtract(acknowledged.map(\.key))
                case .acknowledgeStale:
                    // The server acknowledges a stamp the key no longer carries: it stays pending.
                    guard let old = try suite.syncEntry(forKey: key)?.stamp else { continue }
                    suite.set("w\(stepNumber)", forKey: key)
                    model.holds[key] = true
                    if model.marks(key) { model.pending.insert(key) }
                    try suite.clearPending([(key, old)])
                case .remoteNewer, .remoteNewerRemoval:
                    remoteOffset += 1000
                    let value: PropertyListValue? = step == .remoteNewer ? .string("r\(stepNumber)") : nil
                    let now = HLC.wallClockMilliseconds()
                    let entry = SyncEntry(key: key, value: value, hlc: HLC(milliseconds: now + UInt64(remoteOffset), counter: 0), origin: 0xD0D0)
                    try suite.applyRemote([entry], cursor: UInt64(stepNumber + 1))
                    model.joined = true
                    if !model.isLocal(key) {
                        model.holds[key] = value != nil
                        model.pending.remove(key)
                    }
                case .remoteOlder:
                    let entry = SyncEntry(key: key, value: .string("old"), hlc: HLC(milliseconds: 1_000, counter: 0), origin: 0xD0D0)
                    try suite.applyRemote([entry], cursor: UInt64(stepNumber + 1))
                    model.joined = true
                    if !model.isLocal(key), model.holds[key] == nil { model.holds[key] = true }
                case .toggleLocal:
                    guard model.synced else { continue }
                    try suite.enableSync(server: serverURL, localOnly: model.excludesL ? [] : ["l*"])
                    let before = model
                    model.excludesL.toggle()
                    for held in Self.keys {
                        if model.isLocal(held), !before.isLocal(held) { model.pending.remove(held) }
                        if before.isLocal(held), !model.isLocal(held), model.joined, model.holds[held] == true { model.pending.insert(held) }
                    }
                case .disable:
                    guard model.synced else { continue }
                    try suite.disableSync()
                    model.pending = []
                    model.synced = false
                    model.joined = false
                    model.excludesL = false
                case .enable:
                    guard !model.synced else { continue }
                    try suite.enableSync(server: serverURL)
                    model.synced = true
                case .markEverything:
                    guard model.synced else { continue }
                    try suite.markEverythingPending()
                    for held in model.holds.keys where !model.isLocal(held) { model.pending.insert(held) }
                case .reopen:
                    defaults = nil
                    defaults = try openSuite(dir)
                }
                let context = "seed \(seed), step \(stepNumber) (\(step) \(key))"
                guard try Self.agrees(defaults!, model, context) else { return }
            }
        }
    }

    /// Whether the store's pending changes are the model's: the same keys, counted alike, oldest
    /// first, each with its key's stamp and what it holds. Records an issue when they are not.
    private static func agrees(_ defaults: SharedDefaults, _ model: PendingModel, _ context: String) throws -> Bool {
        let changes = try defaults.pendingChanges()
        var problems: [String] = []
        if Set(changes.map(\.key)) != model.pending { problems.append("pending \(changes.map(\.key).sorted()), promised \(model.pending.sorted())") }
        if changes.count != model.pending.count { problems.append("\(changes.count) changes for \(model.pending.count) keys") }
        let count = try defaults.pendingCount()
        if count != model.pending.count { problems.append("counted \(count)") }
        if !zip(changes, changes.dropFirst()).allSatisfy({ $0.stamp <= $1.stamp }) { problems.append("not oldest first") }
        for change in changes {
            if try defaults.syncEntry(forKey: change.key)?.stamp != change.stamp { problems.append("\(change.key): not the key's stamp") }
            if (change.value != nil) != model.holds[change.key] { problems.append("\(change.key): not what the key holds") }
        }
        // The pages the engine batches from: every pending change once, in the keys' byte order.
        var paged: [PendingChange] = []
        while let page = Optional(try defaults.pendingChanges(after: paged.last?.key, limit: 2)), !page.isEmpty { paged += page }
        let inKeyOrder = changes.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
        if paged != inKeyOrder { problems.append("pages \(paged.map(\.key)), in key order \(inKeyOrder.map(\.key))") }
        #expect(problems.isEmpty, "\(context): \(problems.joined(separator: "; "))")
        return problems.isEmpty
    }

    @Test("a suite written before the index (layout 1) reads its pending changes at once and is indexed by its first write")
    func olderLayout() throws {
        try withTemporaryDirectory { dir in
            do {
                let defaults = try Self.syncedSuite(dir, holding: ["a", "b", "c"])
                defaults.removeObject(forKey: "c")
                try defaults.clearPending(try defaults.pendingChanges().filter { $0.key == "a" }.map { ($0.key, $0.stamp) })
                // What a file of layout 1 is: the marks in the records, no index.
                try defaults.store.environment.write(sync: true) { txn in
                    try txn.empty(.pending)
                    try withUnsafeBytes(of: UInt32(1).littleEndian) { try txn.put(.meta, MetaKey.format, $0) }
                }
            }
            let defaults = try openSuite(dir)
            #expect(try Self.layout(defaults) == 1, "opening writes nothing")
            #expect(try defaults.pendingCount() == 2)
            #expect(try defaults.pendingChanges().map(\.key) == ["b", "c"])
            defaults.set("w", forKey: "d")
            #expect(try Self.layout(defaults) == SuiteStore.layoutVersion)
            #expect(try defaults.store.environment.read { try $0.count(.pending) } == 3, "the index holds the marks")
            #expect(try defaults.pendingChanges().map(\.key) == ["b", "c", "d"])
            try defaults.clearPending(try defaults.pendingChanges().map { ($0.key, $0.stamp) })
            #expect(try defaults.pendingCount() == 0)
        }
    }

    @Test("an index entry whose key holds no pending change (damage) is skipped, never pushed, and goes when sync is turned off")
    func indexNamesOnlyMarkedRecords() throws {
        try withTemporaryDirectory { dir in
            let defaults = try Self.syncedSuite(dir, holding: ["a", "settled"])
            try defaults.clearPending(try defaults.pendingChanges().filter { $0.key == "settled" }.map { ($0.key, $0.stamp) })
            try Self.editIndex(defaults, adding: ["ghost", "settled"])
            #expect(try defaults.pendingChanges().map(\.key) == ["a"])
            #expect(try defaults.pendingCount() == 1)
            try defaults.disableSync()
            #expect(try defaults.store.environment.read { try $0.count(.pending) } == 0)
        }
    }

    @Test(
        "changes marked without an index entry (a process of an older version) are indexed when the engine starts, and cleared when sync is turned off"
    )
    func markedByAnOlderVersion() throws {
        try withTemporaryDirectory { dir in
            let defaults = try Self.syncedSuite(dir, holding: ["a", "b"])
            // What an older process that opened the file before the upgrade leaves: the mark, no entry.
            try Self.editIndex(defaults, removing: ["b"])
            #expect(try defaults.pendingChanges().map(\.key) == ["a"], "the index is what a push reads")
            #expect(try defaults.indexUnindexedPending() == 1)
            #expect(try defaults.pendingChanges().map(\.key) == ["a", "b"])
            #expect(try defaults.indexUnindexedPending() == 0, "nothing left to index")

            try Self.editIndex(defaults, removing: ["b"])
            try defaults.disableSync()
            try defaults.enableSync(server: serverURL)
            #expect(try defaults.indexUnindexedPending() == 0, "turning sync off cleared the mark the index lacked")
            #expect(try defaults.pendingCount() == 0)
        }
    }

    /// A suite synced with the test server that holds `keys`, each changed locally (pending).
    private static func syncedSuite(_ dir: URL, holding keys: [String]) throws -> SharedDefaults {
        let defaults = try openSuite(dir)
        try defaults.enableSync(server: serverURL)
        for key in keys { defaults.set("value of \(key)", forKey: key) }
        return defaults
    }

    /// Adds entries to, or removes them from, the pending index alone, as damage or a process of
    /// an older version leaves it.
    private static func editIndex(_ defaults: SharedDefaults, adding added: [String] = [], removing removed: [String] = []) throws {
        try defaults.store.environment.write(sync: true) { txn in
            for key in added { try withKeyBytes(key) { try txn.insert(.pending, $0, UnsafeRawBufferPointer(start: nil, count: 0)) } }
            for key in removed { _ = try withKeyBytes(key) { try txn.delete(.pending, $0) } }
        }
    }

    private static func layout(_ defaults: SharedDefaults) throws -> UInt32 {
        try defaults.store.environment.read { txn in
            UInt32(littleEndian: try #require(try txn.get(.meta, MetaKey.format)).loadUnaligned(as: UInt32.self))
        }
    }
}
