import Foundation

/// An event of a suite's change stream (`GET /v1/suites/{suite}/events`), as the server writes it
/// and the client reads it.
///
/// ```text
/// id: 42
/// data: {"hlc":"…","key":"sound","origin":"…","rev":42,"value":{"string":"ring.caf"}}
///
/// event: cursor_expired
/// data: revision 3 is older than the suite's oldest valid revision
/// ```
/// An entry is a default-type event whose `id` is its revision; the server ends the stream with a
/// refusal event, named by its error code, when the token stops working (`unauthorized`) or the
/// cursor expired (`cursor_expired`). The owner's stream of an end-to-end encrypted shared suite
/// says when a removal made a key rotation due (`event: rotation_due`, the `KeyRotationDue` as
/// its data), so that the owner's running devices rotate at once.
public enum SyncStreamEvent: Sendable, Hashable {
    /// One key's new state, and the revision to resume after.
    case entry(SyncEntry, revision: UInt64?)
    /// The server refused to go on, and why.
    case refusal(SyncErrorCode, detail: String)
    /// A key rotation is due since a member that held the suite's keys was removed (the owner's
    /// stream only); the stream goes on.
    case rotationDue(KeyRotationDue)

    /// The name of a `rotationDue` event.
    public static let rotationDueName = "rotation_due"

    /// The event as a server-sent event.
    public func serverSentEvent() throws -> ServerSentEvent {
        switch self {
        case .entry(let entry, let revision):
            var json = WireJSON()
            json.sortedEntry(
                key: entry.key,
                typedJSON: try entry.value?.typedJSON(),
                sealed: entry.sealed,
                deleted: entry.isDeleted,
                stamp: entry.stamp,
                rev: entry.rev,
                account: entry.account,
                unavailable: entry.unavailable
            )
            return ServerSentEvent(id: revision.map(String.init), data: String(decoding: json.bytes, as: UTF8.self))
        case .refusal(let code, let detail):
            return ServerSentEvent(event: code.rawValue, data: detail)
        case .rotationDue(let due):
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return ServerSentEvent(event: Self.rotationDueName, data: String(decoding: try encoder.encode(due), as: UTF8.self))
        }
    }

    /// Writes the event of an entry at `revision` as `serverSentEvent()` encodes it, byte for byte,
    /// the entry's JSON written by `entry` (one line: JSON escapes line breaks): the server's event
    /// stream, with the entries' values copied as stored.
    package static func writeEntry<Failure: Error>(
        revision: UInt64,
        into json: inout WireJSON,
        _ entry: (inout WireJSON) throws(Failure) -> Void
    ) throws(Failure) {
        json.raw("id: ")
        json.integer(revision)
        json.raw("\ndata: ")
        try entry(&json)
        json.raw("\n\n")
    }

    /// Reads a server-sent event: nil for one to ignore (an empty or unknown kind of event).
    ///
    /// An entry whose value this device cannot take (nested too deeply, not typed JSON) is read as
    /// one that says so (`SyncEntry.unavailable`, `OverDeepValues`).
    ///
    /// - Throws: `DecodingError` if an entry event's data is not an entry (or a `rotation_due`
    ///   event's not a `KeyRotationDue`).
    public init?(_ event: ServerSentEvent) throws {
        switch event.event {
        case nil, "message":
            guard !event.data.isEmpty else { return nil }
            self = .entry(
                try JSONDecoder().decode(SyncEntry.self, from: Data(OverDeepValues.replaced(in: Array(event.data.utf8)))),
                revision: event.id.flatMap(UInt64.init)
            )
        case Self.rotationDueName?:
            self = .rotationDue(try JSONDecoder().decode(KeyRotationDue.self, from: Data(event.data.utf8)))
        case let name?:
            let code = SyncErrorCode(rawValue: name)
            guard code == .unauthorized || code == .cursorExpired || code == .suiteReset else { return nil }
            self = .refusal(code, detail: event.data)
        }
    }
}
