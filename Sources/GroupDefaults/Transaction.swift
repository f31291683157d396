import Foundation
import Glibc
internal import GroupDefaultsLMDB
import GroupDefaultsWire
import Logging

extension SharedDefaults {
    /// A view of the suite inside `write` (or `read`): every change made through it commits
    /// together when the closure returns, or none does if it throws.
    ///
    /// ```swift
    /// try defaults.write { tx in
    ///     try tx.set(.integer(3), forKey: "badge")
    ///     try tx.removeValue(forKey: "draft")
    /// }
    /// ```
    /// A transaction belongs to the thread that runs the closure; do not keep it or pass it on.
    public final class Transaction {
        let store: SuiteStore
        private(set) var txn: LMDBTransaction
        let isReadOnly: Bool
        /// The stamp of this transaction's changes and the last log sequence number, read from the
        /// log's tail at the first change.
        var clock: (stamp: Stamp, sequence: UInt64)?
        /// Whether a removed key may have a tombstone that a `set` must delete (checked once).
        var tombstonesMayExist: Bool?
        /// Whether the suite is synced, so that each local change is marked pending (read from `meta`
        /// at the first change: another process may have configured sync since the last commit).
        private(set) var isSynced = false
        /// A synced suite's local-only key patterns (read with `isSynced`): their keys are never
        /// marked pending, and pulled entries for them are not applied.
        private var localOnly: [GlobPattern] = []
        /// The buffer to encode a record into: the store's (`SuiteStore.writeBuffer`), reused from
        /// one write to the next. Only a write transaction uses it, on the thread that holds LMDB's
        /// writer lock, before its closure ends (`checkUsable`, `guardWritable`); the addressors
        /// reach the store's memory without a copy or an exclusivity check.
        var scratch: [UInt8] {
            unsafeAddress { UnsafePointer(store.writeBuffer) }
            unsafeMutableAddress { store.writeBuffer }
        }
        /// The conflict journal as this transaction appends to it (loaded at the first entry; trimmed
        /// once, by `trimJournal`).
        var journal: (nextID: UInt64, bounds: SharedDefaults.ConflictJournalBounds, now: UInt64)?
        /// Whether this transaction changed anything (and logged it).
        var changed: Bool { clock != nil }
        /// The sequence numbers this transaction logged, if it logged any.
        var loggedSequences: ClosedRange<UInt64>? {
            guard let clock, clock.sequence >= firstSequence else { return nil }
            return firstSequence...clock.sequence
        }
        private var firstSequence: UInt64 = 0

        /// Whether this transaction stores values (not only removes them): a full store lets
        /// transactions that only remove use its reserve.
        var addsData = false

        /// The thread running the closure, and whether the closure has returned: LMDB reuses a
        /// finished transaction's memory, so a kept `Transaction` must refuse to be used.
        private var thread = pthread_self()
        private var ended = false

        init(store: SuiteStore, txn: LMDBTransaction, isReadOnly: Bool) {
            self.store = store
            self.txn = txn
            self.isReadOnly = isReadOnly
        }

        /// Makes an ended write transaction new again, for `txn` (the store's spare, see
        /// `SuiteStore.write`): every property a write sets goes back to its initial value.
        func renew(_ txn: LMDBTransaction) {
            precondition(ended && !isReadOnly, "only an ended write transaction is renewed")
            self.txn = txn
            thread = pthread_self()
            ended = false
            clock = nil
            tombstonesMayExist = nil
            isSynced = false
            localOnly = []
            journal = nil
            firstSequence = 0
            addsData = false
            clockRecoveredRecords = 0
        }

        /// Called when the closure that received this transaction returns.
        func end() {
            ended = true
            if !isReadOnly && scratch.capacity > SuiteStore.keptBufferCapacity { scratch = [] }
        }

        func checkUsable() throws {
            guard !ended else {
                throw store.error(.transactionMisuse, key: nil, "this transaction ended with its closure; do not keep it")
            }
            guard pthread_equal(thread, pthread_self()) != 0 else {
                throw store.error(.transactionMisuse, key: nil, "a transaction must be used on the thread that runs its closure")
            }
        }

        /// The value stored under `key` (registered defaults are not consulted).
        public func value(forKey key: String) throws -> PropertyListValue? {
            try record(forKey: key)?.value
        }

        /// The value stored under `key` with the stamp (HLC, origin) of the write that stored it.
        public func record(forKey key: String) throws -> (value: PropertyListValue, stamp: Stamp)? {
            try checkUsable()
            try store.validate(key: key)
            return try withKeyBytes(key) { k in
                do {
                    guard let raw = try txn.get(.values, k) else { return nil }
                    return try StoredRecord.decode(raw)
                } catch {
                    throw store.translate(error, key: key)
                }
            }
        }

        /// Stores `value` under `key`.
        public func set(_ value: PropertyListValue, forKey key: String) throws {
            try checkUsable()
            try store.validate(key: key)
            try store.validate(newKey: key)
            guard value.fitsNestingLimit else { throw store.error(.unsupportedValue, key: key, SuiteStore.tooDeep) }
            let stamp = try beginChange()
            addsData = true
            let pending = marksPending(key)
            StoredRecord.encode(value, stamp: stamp, pending: pending, into: &scratch)
            guard scratch.count - StoredRecord.headerSize <= store.maximumValueSize else {
                throw store.error(
                    .valueTooLarge,
                    key: key,
                    "the value takes \(scratch.count - StoredRecord.headerSize) bytes encoded; the limit is "
                        + "\(store.maximumValueSize) (Configuration.maximumValueSize); nothing was changed"
                )
            }
            try perform(key: key) {
                try scratch.withUnsafeBytes { record in
                    try withKeyBytes(key) { k in
                        try txn.put(.values, k, record)
                        if try mayHaveTombstones() { try txn.delete(.tombstones, k) }
                        if pending { try PendingIndex.set(true, key: k, in: txn) }
                    }
                    try appendLog(.set, key: key, storedRecord: record)
                }
            }
        }

        /// Removes the value stored under `key`, leaving a tombstone for sync. Removing a key that is
        /// not stored does nothing.
        public func removeValue(forKey key: String) throws {
            try checkUsable()
            try store.validate(key: key)
            try guardWritable()
            try perform(key: key) {
                try withKeyBytes(key) { k in
                    guard try txn.get(.values, k) != nil else { return }
                    let stamp = try beginChange()
                    try txn.delete(.values, k)
                    let pending = marksPending(key)
                    try StoredRecord.encodeTombstone(stamp, pending: pending).withUnsafeBytes { try txn.put(.tombstones, k, $0) }
                    if pending { try PendingIndex.set(true, key: k, in: txn) }
                    tombstonesMayExist = true
                    try appendLog(.removed, key: key)
                }
            }
        }

        /// Removes every stored value (each leaves a tombstone).
        public func removeAll() throws {
            try checkUsable()
            try guardWritable()
            try perform(key: nil) {
                guard try txn.count(.values) > 0 else { return }
                let stamp = try beginChange()
                let tombstone = StoredRecord.encodeTombstone(stamp, pending: isSynced)
                let localTombstone = StoredRecord.encodeTombstone(stamp, pending: false)
                var removed: [[UInt8]] = []
                try txn.forEach(.values) { key, _ in
                    removed.append(Array(key))
                    return true
                }
                for key in removed {
                    let pending = isSynced && (localOnly.isEmpty || marksPending(String(decoding: key, as: UTF8.self)))
                    try key.withUnsafeBytes { k in
                        try (pending ? tombstone : localTombstone).withUnsafeBytes { try txn.put(.tombstones, k, $0) }
                        if pending { try PendingIndex.set(true, key: k, in: txn) }
                    }
                }
                try txn.empty(.values)
                tombstonesMayExist = true
                try appendLog(.cleared, key: "")
            }
        }

        /// How far the change log's numbers jump at a restore: more than a durability interval of
        /// commits could have used.
        static let restoreSequenceGap: UInt64 = 1 << 32

        /// Records that opening put the suite back to its last durability point (made at
        /// `pointTime`, milliseconds since 1970): a `restored` change for observers, the time for
        /// `info()`, and, for a synced suite, no cursor, so that its next sync reads the server's
        /// whole state (what this device pushed after the point comes back from there).
        func recordRestore(pointTime: UInt64) throws {
            try perform(key: nil) {
                _ = try beginChange()
                // Numbers given out after the point were lost with the writes: the log jumps past any
                // of them, so that an observer resuming from one gets `reset` rather than later changes
                // under a number it took for another.
                clock?.sequence += Self.restoreSequenceGap
                firstSequence = (clock?.sequence ?? 0) + 1
                try appendLog(.restored, key: "")
                var record = [UInt8]()
                BinaryCodec.appendFixed(store.wallClockMilliseconds(), into: &record)
                BinaryCodec.appendFixed(pointTime, into: &record)
                try record.withUnsafeBytes { try txn.put(.meta, MetaKey.lastRestore, $0) }
                if isSynced { _ = try txn.delete(.meta, MetaKey.syncCursor) }
            }
        }

        /// The stored keys, in byte order.
        public var keys: [String] {
            get throws {
                try checkUsable()
                var keys: [String] = []
                try perform(key: nil) {
                    try txn.forEach(.values) { key, _ in
                        keys.append(String(decoding: key, as: UTF8.self))
                        return true
                    }
                }
                return keys
            }
        }

        /// Every stored key and value; a value that fails to decode is passed to `damaged` and
        /// skipped.
        func forEachRecord(_ body: (String, Result<(value: PropertyListValue, stamp: Stamp), SharedDefaultsError>) throws -> Void) throws {
            try checkUsable()
            try perform(key: nil) {
                try txn.forEach(.values) { rawKey, raw in
                    let key = String(decoding: rawKey, as: UTF8.self)
                    do {
                        try body(key, .success(StoredRecord.decode(raw)))
                    } catch let error as CorruptBytes {
                        try body(key, .failure(store.translate(error, key: key) as! SharedDefaultsError))
                    }
                    return true
                }
            }
        }

        // MARK: Change bookkeeping

        func guardWritable() throws {
            if isReadOnly {
                throw store.error(.readOnlyTransaction, key: nil, "this transaction is read-only; use write { } to change the suite")
            }
        }

        private func mayHaveTombstones() throws -> Bool {
            if let tombstonesMayExist { return tombstonesMayExist }
            let exist = try txn.count(.tombstones) > 0
            tombstonesMayExist = exist
            return exist
        }

        /// The stamp for this transaction's changes: one HLC, after every HLC this store has used.
        /// With `receiving`, the HLC is also past that remote one (HLC's receive rule).
        func beginChange(receiving remote: HLC? = nil) throws -> Stamp {
            try guardWritable()
            if let clock { return clock.stamp }
            let (tail, synced) = try perform(key: nil) {
                (try ChangeLog.tail(txn), try txn.get(.meta, MetaKey.syncServer) != nil)
            }
            if synced { localOnly = try perform(key: nil) { try localOnlyPatterns() } }
            let wallClock = store.wallClockMilliseconds()
            var last = tail.hlc
            if last.isAhead(of: wallClock) {
                last = try perform(key: nil) { try recoverClock(from: last, wallClock: wallClock) }
            }
            let hlc =
                try remote.map { remote in
                    do { return try last.received(remote, wallClock: wallClock) } catch {
                        throw store.error(.clockSkew, key: nil, "\(error); nothing was applied")
                    }
                } ?? last.advanced(toWallClock: wallClock)
            let stamp = Stamp(hlc: hlc, origin: store.origin)
            clock = (stamp, tail.sequence)
            firstSequence = tail.sequence + 1
            isSynced = synced
            return stamp
        }

        /// Brings the store's clock back from `last`, an HLC more than `HLC.maximumDrift` ahead of
        /// the wall clock: this machine's clock was wrong when it stamped something (or an entry
        /// from such a clock was taken), and every later write would carry that future stamp, which
        /// servers and other devices refuse. Each record stamped that far ahead is stamped again:
        /// a pending one (a local change not yet pushed, made while the clock was wrong) with a
        /// fresh tick of the corrected clock, so that it is pushed and competes as the latest write
        /// it is; one that is not pending (already on the server, or taken from it) with HLC zero,
        /// so that any later write of its key wins over it. Values are kept as they are; a damaged
        /// record is left as it is (reading it reports the damage). Said once, in the log, and
        /// recorded in `meta`, so that until a change moves the log's tail the next transactions
        /// take the recovered clock without looking again. Returns the clock's new reading, the
        /// last stamp it gave.
        private func recoverClock(from last: HLC, wallClock: UInt64) throws -> HLC {
            if let raw = try txn.get(.meta, MetaKey.clockRecovery), raw.count == 16,
                UInt64(littleEndian: raw.loadUnaligned(as: UInt64.self)) == last.rawValue
            {
                let recovered = HLC(rawValue: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
                return max(recovered, HLC(milliseconds: wallClock, counter: 0))
            }
            var clock = HLC(milliseconds: wallClock, counter: 0)
            var rewritten: [(database: Database, key: [UInt8], record: [UInt8])] = []
            var damaged = 0
            for database in [Database.values, .tombstones] {
                try txn.forEach(database) { key, raw in
                    let stamp: Stamp
                    var value: PropertyListValue?
                    do {
                        if database == .values {
                            let record = try StoredRecord.decode(raw)
                            (stamp, value) = (record.stamp, record.value)
                        } else {
                            stamp = try StoredRecord.decodeTombstone(raw)
                        }
                    } catch {
                        damaged += 1
                        return true
                    }
                    guard stamp.hlc.isAhead(of: wallClock) else { return true }
                    let pending = StoredRecord.isPending(raw)
                    if pending { clock = clock.advanced(toWallClock: wallClock) }
                    let new = Stamp(hlc: pending ? clock : .zero, origin: stamp.origin)
                    let record =
                        value.map { StoredRecord.encode($0, stamp: new, pending: pending) }
                        ?? StoredRecord.encodeTombstone(new, pending: pending)
                    rewritten.append((database, Array(key), record))
                    return true
                }
            }
            for (database, key, record) in rewritten {
                try key.withUnsafeBytes { k in try record.withUnsafeBytes { try txn.put(database, k, $0) } }
            }
            var marker: [UInt8] = []
            withUnsafeBytes(of: last.rawValue.littleEndian) { marker += $0 }
            withUnsafeBytes(of: clock.rawValue.littleEndian) { marker += $0 }
            try marker.withUnsafeBytes { try txn.put(.meta, MetaKey.clockRecovery, $0) }
            clockRecoveredRecords = rewritten.count
            let ahead = (last.milliseconds - wallClock) / 1000
            store.logger.warning(
                """
                the suite's clock was \(ahead) s ahead of this machine's (a clock that was wrong when it stamped a write): \
                it starts again from the machine's clock; \(rewritten.count) record(s) stamped in the future were stamped again\
                \(damaged > 0 ? "; \(damaged) damaged record(s) left as they are" : "")
                """,
                metadata: ["suite": "\(store.location.suiteName)"]
            )
            return clock
        }

        /// How many records this transaction stamped again because the store's clock had run ahead
        /// (`recoverClock`); 0 when it had not.
        private(set) var clockRecoveredRecords = 0

        /// Whether a local change of `key` is marked pending: the suite is synced and the key is not
        /// local-only. (Valid after `beginChange`.)
        private func marksPending(_ key: String) -> Bool {
            isSynced && !isLocalOnly(key)
        }

        /// Whether `key` matches one of the synced suite's local-only patterns. (Valid after
        /// `beginChange`.)
        func isLocalOnly(_ key: String) -> Bool {
            !localOnly.isEmpty && localOnly.contains { $0.matches(key) }
        }

        /// Logs a change under the next sequence number; a remote change with its own origin; a `set`
        /// with the record it stored (`storedRecord`), which the log keeps if it is small.
        func appendLog(
            _ kind: ChangeLog.Kind,
            key: String,
            storedRecord: UnsafeRawBufferPointer? = nil,
            remoteOrigin: UInt64? = nil,
            isConflict: Bool = false
        ) throws {
            guard var clock else { preconditionFailure("appendLog before beginChange") }
            clock.sequence += 1
            self.clock = clock
            var stamp = clock.stamp
            if let remoteOrigin { stamp.origin = remoteOrigin }
            try ChangeLog.append(
                txn,
                sequence: clock.sequence,
                kind: kind,
                isRemote: remoteOrigin != nil,
                isConflict: isConflict,
                stamp: stamp,
                key: key,
                storedRecord: storedRecord
            )
            try ChangeLog.trim(txn, last: clock.sequence, retention: store.logRetention)
        }

        /// Runs `body`, its LMDB and format errors translated into `SharedDefaultsError`s about `key`.
        func perform<T>(key: String?, _ body: () throws -> T) throws -> T {
            do {
                return try body()
            } catch {
                throw store.translate(error, key: key)
            }
        }
    }
}

@available(*, unavailable)
extension SharedDefaults.Transaction: Sendable {}

extension SuiteStore {
    /// Refuses keys LMDB cannot store: empty, or longer than its key limit.
    func validate(key: String) throws {
        if let reason = Self.keyRefusal(key, limit: environment.maximumKeySize) { throw error(.invalidKey, key: key, reason) }
    }

    /// Refuses a key that no new value may take (`NameKind.key`: a control character); a key stored
    /// before that rule is still read and removed.
    func validate(newKey key: String) throws {
        if let reason = NameKind.key.problem(with: key) { throw error(.invalidKey, key: key, reason) }
    }

    /// Why `key` cannot be stored under LMDB's key `limit`, or nil.
    static func keyRefusal(_ key: String, limit: Int) -> String? {
        let count = key.utf8.count
        if count == 0 { return "a key must not be empty" }
        if count > limit { return "the key is \(count) bytes of UTF-8; LMDB's limit is \(limit) bytes" }
        return nil
    }

    /// Why a value nested too deeply is refused.
    static let tooDeep = "the value nests arrays and dictionaries more than \(PropertyListValue.maximumNestingDepth) levels deep; nothing was changed"
}

extension SharedDefaults {
    /// Checks, without opening or creating suite `suiteName`, that `value` can be stored under
    /// `key` as `set` checks it: the key's length, the value's nesting and its encoded size against
    /// `maximumValueSize` (the configuration's the suite is opened with; the default's unless
    /// given). A tool checks its input with it before it creates a suite, so that a refused write
    /// leaves no suite behind.
    ///
    /// - Throws: `SharedDefaultsError` (`invalidKey`, `unsupportedValue`, `valueTooLarge`), naming
    ///   the suite and key.
    public static func checkStorable(
        _ value: PropertyListValue?,
        forKey key: String,
        suiteName: String,
        maximumValueSize: Int = Configuration().maximumValueSize
    ) throws {
        if let reason = SuiteStore.keyRefusal(key, limit: Environment.keySizeLimit) ?? (value == nil ? nil : NameKind.key.problem(with: key)) {
            throw SharedDefaultsError(.invalidKey, suite: suiteName, path: suiteName, key: key, reason)
        }
        guard let value else { return }
        if !value.fitsNestingLimit {
            throw SharedDefaultsError(.unsupportedValue, suite: suiteName, path: suiteName, key: key, SuiteStore.tooDeep)
        }
        let size = BinaryCodec.encode(value).count
        if size > maximumValueSize {
            throw SharedDefaultsError(
                .valueTooLarge,
                suite: suiteName,
                path: suiteName,
                key: key,
                "the value takes \(size) bytes encoded; the limit is \(maximumValueSize) (Configuration.maximumValueSize); nothing was changed"
            )
        }
    }
}
