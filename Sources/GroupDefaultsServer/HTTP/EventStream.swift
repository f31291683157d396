import Foundation
import GroupDefaultsWire
import Hummingbird
import Metrics
import NIOCore
import ServiceLifecycle

/// `GET /v1/suites/{suite}/events`: the suite's changes as Server-Sent Events, `id:` = revision.
///
/// The stream starts after `Last-Event-ID` (or `?since=`, else the head: only what comes next),
/// sends every change as one event per entry (data: the entry's JSON), waits for the next push
/// with `waitForChange`, and writes a heartbeat comment after `eventHeartbeat` of quiet (15 s by
/// default). It re-checks the
/// token before each wait, so a revoked or expired token ends the stream (an `unauthorized` event,
/// then the end); graceful shutdown ends it cleanly too.
struct EventStream: Sendable {
    let storage: any SyncStorage
    let authenticator: Authenticator
    let configuration: ServerConfiguration
    let activity: ConsoleActivity
    /// Called at each turn of the stream (each change, each heartbeat): the device is still there.
    var onTurn: @Sendable () async -> Void = {}

    /// The stream for `token` on `suite`; it holds `slot` until it ends.
    func response(token: StoredToken, suite: String, request: Request, slot: StreamSlots.Slot) async throws -> Response {
        let start: UInt64
        if let lastID = request.headers[.init("Last-Event-ID")!] ?? request.uri.queryParameters["since"].map(String.init) {
            guard !lastID.isEmpty, lastID.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let value = UInt64(lastID) else {
                throw APIError.malformed("Last-Event-ID (or since) must be a revision, a non-negative decimal integer")
            }
            start = value
        } else {
            start = try await storage.headRevision(account: token.account, suite: suite)
        }
        // An expired cursor is an error before the stream starts, as for `changes`.
        _ = try await storage.changes(account: token.account, suite: suite, since: start, limit: 1)

        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        let loop = StreamLoop(storage: storage, authenticator: authenticator, token: token, suite: suite,
                              pageSize: configuration.maxPageSize, heartbeat: configuration.eventHeartbeat, onTurn: onTurn)
        let activity = self.activity
        let body = ResponseBody { writer in
            defer { withExtendedLifetime(slot) {} }
            let openStreams = ServerMetrics.openEventStreams
            openStreams.increment()
            activity.streams(+1)
            defer {
                openStreams.decrement()
                activity.streams(-1)
            }
            try await loop.run(from: start, writer: &writer)
        }
        return Response(status: .ok, headers: headers, body: body)
    }
}

/// The loop of one stream. It runs as long as the stream, in the connection's task, whose memory
/// for async frames only grows (see `ChildTaskResponder`), so each step is a call of its own whose
/// frame goes when the step returns: a turn's work (in a child task), a write, the wait. Written as
/// one closure, the loop's frames took a slab of the task's memory more: with `ChildTaskResponder`,
/// 23.3 → 21.4 KiB per parked stream (heaptrack and VmRSS); either change alone saved nothing, as
/// the connection's task keeps the larger of the request's and the stream's chains of frames.
private struct StreamLoop: Sendable {
    let storage: any SyncStorage
    let authenticator: Authenticator
    let token: StoredToken
    let suite: String
    let pageSize: Int
    let heartbeat: Duration
    let onTurn: @Sendable () async -> Void

    func run(from start: UInt64, writer: inout any ResponseBodyWriter) async throws {
        var cursor = start
        try await writer.write(ByteBuffer(string: "retry: 2000\n\n"))  // how long a client waits to reconnect
        while !Task.isCancelled {
            let turn = try await self.turn(since: cursor)
            if !turn.text.isEmpty { try await write(turn.text, to: &writer) }
            if turn.ends { break }
            if !turn.text.isEmpty { cursor = turn.head }  // the last event's revision
            if turn.hasMore { continue }
            let waited = try await wait(after: turn.head)
            if waited == .ended { break }
            if waited == .quiet { try await write(ServerSentEvent.comment("heartbeat"), to: &writer) }
        }
        try await writer.finish(nil)
    }

    /// The turn's work (token check, page read, encoding), in a child task.
    @inline(never)
    private func turn(since: UInt64) async throws -> Turn {
        let loop = self
        return try await inChildTask { () async throws -> Turn in
            await loop.onTurn()
            guard await loop.authenticator.isStillValid(loop.token) else {
                return Turn(text: try SyncStreamEvent.refusal(.unauthorized, detail: "the token was revoked or expired").serverSentEvent().encoded,
                            ends: true)
            }
            let page: ChangesPage
            do {
                page = try await loop.storage.changes(account: loop.token.account, suite: loop.suite, since: since, limit: loop.pageSize)
            } catch let error as SyncStorageError where error.code == .cursorExpired {
                return Turn(text: try SyncStreamEvent.refusal(.cursorExpired, detail: error.detail).serverSentEvent().encoded, ends: true)
            }
            var text = ""
            for entry in page.entries {
                text += try SyncStreamEvent.entry(entry, revision: entry.rev).serverSentEvent().encoded
            }
            return Turn(text: text, ends: false, head: page.lastRev, hasMore: page.hasMore)
        }
    }

    @inline(never)
    private func write(_ text: String, to writer: inout any ResponseBodyWriter) async throws {
        try await writer.write(ByteBuffer(string: text))
    }

    private enum WaitOutcome { case ended, changed, quiet }

    /// Waits for a push after `head`, at most the heartbeat's time (then `quiet` if the head has not
    /// moved); graceful shutdown or cancellation end it.
    @inline(never)
    private func wait(after head: UInt64) async throws -> WaitOutcome {
        let ended = await storage.waitForChangeUntilShutdown(account: token.account, suite: suite, after: head, timeout: heartbeat)
        if ended || Task.isCancelled { return .ended }
        let storage = self.storage, account = token.account, suite = self.suite
        let quiet = try await inChildTask { try await storage.headRevision(account: account, suite: suite) <= head }
        return quiet ? .quiet : .changed
    }
}

/// What one turn of a stream writes, and where it leaves the stream.
private struct Turn: Sendable {
    /// The events (or the refusal) to write; empty when there is nothing new.
    var text: String
    /// The stream ends after `text` (a refusal).
    var ends: Bool
    /// The page's last revision: its last event's, or the suite's head when it had none.
    var head: UInt64 = 0
    /// More changes follow at once.
    var hasMore = false
}
