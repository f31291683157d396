import Foundation
internal import GroupDefaultsLMDB
import GroupDefaultsWire

extension SharedDefaults {
    /// A local value (or deletion) that sync replaced, kept in the suite's conflict journal; or, in
    /// an end-to-end encrypted suite, an entry sync refused from the server (`refusal`).
    ///
    /// Sync decides each key by last writer wins, and a device joining a suite takes the server's
    /// values over what it held before sync was turned on. Whenever that replaces a local change
    /// that had not reached the server yet, or a value the join overrode, the replaced one is kept
    /// here, in the same transaction: nothing overwritten vanishes. The journal is never synced;
    /// `restore(_:conflict:)` writes a kept value back.
    public struct Conflict: Sendable, Hashable, Identifiable {
        /// The entry's number in this suite's journal: larger is newer.
        public let id: UInt64
        /// The key whose value was replaced.
        public let key: String
        /// The value that was replaced; nil when what was replaced was a deletion.
        public let value: PropertyListValue?
        /// The stamp of the replaced write (its HLC, and the store that made it).
        public let stamp: Stamp
        /// The stamp of the write that replaced it (the origin is the device that made it).
        public let replacedBy: Stamp
        /// When sync replaced it, on this machine's clock.
        public let replacedAt: Date
        /// For an entry sync refused from the server (it did not open, opened to something other
        /// than its envelope said, was older than what this device had, or was stamped far ahead
        /// of this machine's clock), or a local change sync could not push (refused by the server,
        /// or one this device cannot send, such as a value nested too deeply): why. Its `key` is
        /// the key's name, or its key id when it did not open; `stamp` is what it claimed; `value`
        /// is nil and `replacedBy` zero. Nil for a replaced local value.
        public let refusal: String?

        /// Whether what was replaced was a deletion.
        public var isDeletion: Bool { value == nil && refusal == nil }
        /// Whether this records something sync refused (an entry from the server, or a local change
        /// it could not push), not a replaced local value.
        public var isRefused: Bool { refusal != nil }
    }

    /// How much of the conflict journal a suite keeps: an entry goes when it is older than
    /// `maximumAge` or when `maximumCount` newer ones follow it.
    public struct ConflictJournalBounds: Sendable, Hashable {
        /// How many entries are kept at most (1,000 unless set).
        public var maximumCount: Int
        /// How long an entry is kept (30 days unless set); whole seconds count.
        public var maximumAge: Duration

        /// The bounds of a suite that never set its own: 1,000 entries, 30 days.
        public static let standard = ConflictJournalBounds(maximumCount: 1000, maximumAge: .seconds(30 * 86_400))

        /// Bounds of `maximumCount` entries and `maximumAge`.
        public init(maximumCount: Int, maximumAge: Duration) {
            self.maximumCount = maximumCount
            self.maximumAge = maximumAge
        }
    }

    /// The values sync replaced in this suite, newest first (see `Conflict`).
    ///
    /// - Parameter key: Only this key's; nil for every key's.
    /// - Throws: `SharedDefaultsError` (`corruptFile` for a damaged entry, or a read failure).
    public func conflicts(forKey key: String? = nil) throws -> [Conflict] {
        try read { tx in try tx.perform(key: key) { try tx.conflicts(forKey: key) } }
    }

    /// Writes a value sync replaced back into the suite as a new local change: in a synced suite it
    /// is pushed like any write and, being the newest, wins everywhere. Restoring a kept deletion
    /// removes the key. The journal keeps the entry.
    ///
    /// ```swift
    /// if let lost = try defaults.conflicts(forKey: "sound").first { try defaults.restore("sound", conflict: lost.id) }
    /// ```
    /// - Parameters:
    ///   - key: The key to restore.
    ///   - id: The journal entry to restore; nil for the newest one kept for `key`.
    /// - Returns: The entry restored.
    /// - Throws: `SharedDefaultsError` with code `conflictNotFound` if the journal holds nothing for
    ///   `key` (or no entry `id` for it, or `id` records a refused entry); nothing changes then.
    @discardableResult
    public func restore(_ key: String, conflict id: UInt64? = nil) throws -> Conflict {
        try write { tx in
            let entry = try tx.perform(key: key) { () throws -> Conflict? in
                guard let id else { return try tx.conflicts(forKey: key).first { !$0.isRefused } }
                return try tx.conflict(id: id)
            }
            if let entry, entry.isRefused {
                throw store.error(
                    .conflictNotFound,
                    key: key,
                    "conflict \(entry.id) records something sync refused (\(entry.refusal ?? "")), not a value sync replaced; nothing was changed"
                )
            }
            guard let entry, entry.key.isSameName(as: key) else {
                let what = id.map { "conflict \($0) of key '\(key)'" } ?? "replaced value of key '\(key)'"
                throw store.error(.conflictNotFound, key: key, "the conflict journal holds no \(what); nothing was changed")
            }
            if let value = entry.value { try tx.set(value, forKey: key) } else { try tx.removeValue(forKey: key) }
            return entry
        }
    }

    /// The bounds of this suite's conflict journal (`ConflictJournalBounds.standard` unless set).
    public func conflictJournalBounds() throws -> ConflictJournalBounds {
        try read { tx in try tx.perform(key: nil) { try tx.journalBounds() } }
    }

    /// Sets how much of the conflict journal this suite keeps, for every process; entries beyond
    /// the new bounds go at once. The journal keeps at least one entry, for some time: a value sync
    /// replaces is never lost without a trace.
    ///
    /// - Throws: `SharedDefaultsError` with code `unsupportedValue` for a count below 1 or an age
    ///   of zero or less (nothing is changed).
    public func setConflictJournalBounds(_ bounds: ConflictJournalBounds) throws {
        guard bounds.maximumCount >= 1, bounds.maximumAge > .zero else {
            throw store.error(
                .unsupportedValue,
                key: nil,
                "the conflict journal keeps at least 1 entry, for some time (a replaced value is never lost without a trace); nothing was changed"
            )
        }
        try write { tx in
            try tx.perform(key: nil) { try tx.setJournalBounds(bounds) }
        }
    }
}
