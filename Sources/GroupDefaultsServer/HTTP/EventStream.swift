import Foundation
import GroupDefaultsWire
import Hummingbird
import Metrics
import NIOCore
import ServiceLifecycle
import Synchronization

/// `GET /v1/suites/{suite}/events`: the suite's changes as Server-Sent Events, `id:` = revision.
///
/// The stream starts after `Last-Event-ID` (or `?since=`; one past the suite's head, after the head;
/// without either, the head: only what comes next),
/// sends every change as one event per entry (data: the entry's JSON), waits for the next push
/// with `waitForChange`, and writes a heartbeat comment after `eventHeartbeat` of quiet (15 s by
/// default). It re-checks the
/// token before each wait, so a revoked or expired token ends the stream (an `unauthorized` event,
/// then the end), and for a shared suite the membership, so that a removed member's stream ends
/// (a `not_a_member` event; a removal wakes the suite's streams); graceful shutdown ends it cleanly too.
/// The owner's stream says when a key rotation becomes due (`KeyRotationDue`, a `rotation_due`
/// event, looked up at each turn without entries: a removal wakes the stream without any), once
/// per rotation due, so that the owner's running devices rotate at once rather than at their
/// next connection.
struct EventStream: Sendable {
    let storage: any SyncStore & SharingStore
    let authenticator: Authenticator
    let configuration: ServerConfiguration
    let activity: ConsoleActivity
    /// Called at each turn of the stream (each change, each heartbeat): the device is still there.
    var onTurn: @Sendable () async -> Void = {}

    /// The stream for `access`'s token on its suite; it holds `slot` until it ends. With `parking`
    /// (the connection holds streams itself), the stream is left there and the response is its
    /// head alone; otherwise the response's body runs the stream.
    func response(access: SuiteAccess, request: Request, slot: StreamSlots.Slot, parking: StreamParking?) async throws -> Response {
        let (token, owner, suite) = (access.token, access.owner, access.suite)
        let head = try await storage.headRevision(account: owner, suite: suite)
        let start: UInt64
        if let lastID = request.headers[.init("Last-Event-ID")!] ?? request.uri.queryParameters["since"].map(String.init) {
            guard !lastID.isEmpty, lastID.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = UInt64(lastID) else {
                throw APIError.malformed("Last-Event-ID (or since) must be a revision, a non-negative decimal integer")
            }
            // One past the head (a server restored from an older backup) resumes at the head, where
            // `changes` answers `last_rev`: the revisions written from now on are all new to the client.
            start = min(value, head)
        } else {
            start = head
        }
        // An expired cursor is an error before the stream starts, as for `changes`.
        _ = try await storage.changes(account: owner, suite: suite, since: start, limit: 1)

        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        let storage = self.storage
        let authenticator = self.authenticator
        let pageSize = configuration.maxPageSize
        let valueLimit = configuration.limits.maxValueBytes
        let onTurn = self.onTurn
        let announced = access.role == .owner ? AnnouncedRotation() : nil
        let paging = TurnPaging(most: pageSize)
        let loop = ChangeStreamLoop(
            storage: storage,
            account: owner,
            suite: suite,
            heartbeat: configuration.eventHeartbeat,
            retryMilliseconds: 2000
        ) { since, quiet in
            await onTurn()
            guard await authenticator.isStillValid(token) else {
                return StreamTurn(
                    text: try SyncStreamEvent.refusal(.unauthorized, detail: "the token was revoked or expired").serverSentEvent().encoded,
                    ends: true
                )
            }
            guard await access.isStillAllowed(storage) else {
                return StreamTurn(
                    text: try SyncStreamEvent.refusal(.notAMember, detail: "\(owner)'s suite '\(suite)' is no longer shared with this account")
                        .serverSentEvent().encoded,
                    ends: true
                )
            }
            if quiet {  // a parked stream's heartbeat: no change was signalled, none is read
                guard let announced, let due = try? await storage.rotationDue(owner: owner, suite: suite), announced.isNew(due) else {
                    return StreamTurn(text: "", ends: false, head: since)
                }
                return StreamTurn(text: try SyncStreamEvent.rotationDue(due).serverSentEvent().encoded, ends: false, head: since)
            }
            let page: StoredChanges
            do {
                page = try await storage.changes(account: owner, suite: suite, since: since, limit: paging.limit)
            } catch let error as SyncStorageError where error.code == .cursorExpired || error.code == .suiteReset {
                return StreamTurn(text: try SyncStreamEvent.refusal(error.code, detail: error.detail).serverSentEvent().encoded, ends: true)
            }
            // A turn writes at most about `turnBytes` (and at least one entry): the next turn goes on
            // after the last one written. A client that reads nothing holds one turn's text.
            var events = WireJSON(capacity: min(page.entries.count * 190, EventStream.turnBytes))
            var written = 0
            for entry in page.entries where written == 0 || events.bytes.count < EventStream.turnBytes {
                SyncStreamEvent.writeEntry(revision: entry.rev, into: &events) { entry.write(into: &$0, valueLimit: valueLimit) }
                written += 1
            }
            var text = String(decoding: events.bytes, as: UTF8.self)
            if page.entries.isEmpty, let announced, let due = try? await storage.rotationDue(owner: owner, suite: suite),
                announced.isNew(due)
            {
                text = try SyncStreamEvent.rotationDue(due).serverSentEvent().encoded
            }
            paging.turned(fetched: page.entries.count, written: written, hasMore: page.hasMore)
            if written < page.entries.count {
                return StreamTurn(text: text, ends: false, head: page.entries[written - 1].rev, hasMore: true)
            }
            return StreamTurn(text: text, ends: false, head: page.lastRev, hasMore: page.hasMore)
        }
        let activity = self.activity
        if let parking {
            parking.hold(ParkableStream(loop: loop, start: start, open: OpenStream(slot: slot, activity: activity, held: true)))
            return Response(status: .ok, headers: headers, body: ResponseBody { _ in })  // no length: the stream follows
        }
        let body = ResponseBody { writer in
            let open = OpenStream(slot: slot, activity: activity, held: false)
            defer { withExtendedLifetime(open) {} }
            try await loop.run(from: start, writer: &writer)
        }
        return Response(status: .ok, headers: headers, body: body)
    }
}

extension EventStream {
    /// About the most one turn of a stream writes at once: a page of changes can hold a thousand
    /// entries of up to the largest value each, and a stream whose client reads nothing keeps its
    /// turn's text until the connection closes.
    static let turnBytes = 256 * 1024
}

/// How many entries a stream's next turn reads: a few at first, twice as many after each full page
/// it wrote whole, up to the server's page size; after a page cut at `EventStream.turnBytes`, as
/// many as that turn wrote. So a turn reads about what it writes, also for large values (a page of
/// the largest values would take hundreds of MiB, for each stream catching up at once).
private final class TurnPaging: Sendable {
    private let current: Mutex<Int>
    private let most: Int

    init(most: Int) {
        self.most = max(1, most)
        current = Mutex(min(4, self.most))
    }

    /// The next turn's limit.
    var limit: Int { current.withLock { $0 } }

    /// A turn read `fetched` entries (`hasMore`: the storage had more) and wrote the first `written`.
    func turned(fetched: Int, written: Int, hasMore: Bool) {
        current.withLock { limit in
            if written < fetched {
                limit = max(1, written)
            } else if hasMore {
                limit = min(limit * 2, most)
            }
        }
    }
}

/// The key rotation an owner's stream last announced (`EventStream`): each is said once.
private final class AnnouncedRotation: Sendable {
    private let last = Mutex<KeyRotationDue?>(nil)

    /// Whether `due` is not the one last announced; it is from now on.
    func isNew(_ due: KeyRotationDue) -> Bool {
        last.withLock { last in
            guard last != due else { return false }
            last = due
            return true
        }
    }
}
