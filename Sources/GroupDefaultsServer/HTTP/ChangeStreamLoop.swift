import GroupDefaultsWire
import Hummingbird
import NIOCore

/// The loop of a Server-Sent Events stream of one suite's changes: the sync API's event stream
/// (`EventStream`) and the console's live tail. It writes `retry:`, then turn after turn: the
/// turn's events, and when it has nothing more, a wait for the next push, at most `heartbeat` long,
/// after which a quiet suite gets a heartbeat comment. A turn that `ends` (a refusal) ends the
/// stream after its text; so do graceful shutdown and cancellation. A connection that holds its
/// stream itself runs the same turns without a task between them (`ParkedEventStream`).
///
/// It runs as long as the stream, in the connection's task, whose memory for async frames only
/// grows (see `ChildTaskResponder`), so each step is a call of its own whose frame goes when the
/// step returns: the turn's work (in a child task), a write, the wait. Written as one closure, the
/// loop's frames took a slab of the task's memory more: with `ChildTaskResponder`, 23.3 → 21.4 KiB
/// per parked event stream (VmRSS over 1,000 streams); either change alone saved nothing, as the
/// connection's task keeps the larger of the request's and the stream's chains of frames.
struct ChangeStreamLoop: Sendable {
    let storage: any SyncStore
    let account: String
    let suite: String
    let heartbeat: Duration
    /// How long a client waits before it reconnects, in milliseconds.
    let retryMilliseconds: Int
    /// One turn's work: what to write of the changes after `since`. Runs in a child task. A
    /// `quiet` turn is a parked stream's heartbeat on a store whose watches hear every writer
    /// (`ParkedEventStream`): nothing woke the stream since it parked after `since`, and its watch
    /// stays in place, so the turn need not read the changes; it checks what no change signals (the
    /// token, the member's access, a key rotation due) and writes what it found, or nothing (then
    /// the heartbeat is written).
    let turn: @Sendable (_ since: UInt64, _ quiet: Bool) async throws -> StreamTurn

    /// Writes the stream from after revision `start` until a turn ends it, the wait is ended, or
    /// the task is cancelled.
    func run(from start: UInt64, writer: inout any ResponseBodyWriter) async throws {
        var cursor = start
        try await write(opening, to: &writer)
        while !Task.isCancelled {
            let turn = try await self.turn(since: cursor)
            if !turn.text.isEmpty { try await write(turn.text, to: &writer) }
            if turn.ends { break }
            if !turn.text.isEmpty { cursor = turn.head }  // the last event's revision
            if turn.hasMore { continue }
            let waited = try await wait(after: turn.head)
            if waited == .ended { break }
            if waited == .quiet { try await write(Self.heartbeatComment, to: &writer) }
        }
        try await writer.finish(nil)
    }

    /// What a stream writes first: how long its client waits before it reconnects.
    var opening: String { "retry: \(retryMilliseconds)\n\n" }

    /// What a quiet stream writes after `heartbeat` without a write.
    static let heartbeatComment = ServerSentEvent.comment("heartbeat")

    @inline(never)
    private func turn(since: UInt64) async throws -> StreamTurn {
        let turn = self.turn
        return try await inChildTask { try await turn(since, false) }
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
        let ended = await storage.waitForChangeUntilShutdown(account: account, suite: suite, after: head, timeout: heartbeat)
        if ended || Task.isCancelled { return .ended }
        let storage = self.storage
        let account = self.account
        let suite = self.suite
        let quiet = try await inChildTask { try await storage.headRevision(account: account, suite: suite) <= head }
        return quiet ? .quiet : .changed
    }
}

/// What one turn of a change stream writes, and where it leaves the stream.
struct StreamTurn: Sendable {
    /// The events (or the refusal) to write; empty when there is nothing new.
    var text: String
    /// The stream ends after `text` (a refusal).
    var ends: Bool
    /// The page's last revision: its last event's, or the suite's head when it had none.
    var head: UInt64 = 0
    /// More changes follow at once.
    var hasMore = false
}
