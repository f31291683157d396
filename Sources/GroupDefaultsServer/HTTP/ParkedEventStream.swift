import Glibc
import HTTPTypes
import Hummingbird
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// An event stream that its connection holds itself (`ConnectionDispatch`): the request goes
/// through the server's routes in a task of its own (every check of the route, the token's slot,
/// the middlewares), and the route leaves the stream here (`StreamParking`). From then on the
/// stream runs its loop's turns (`ChangeStreamLoop`: the same turn, rules and heartbeat as a stream
/// that a request's task runs) with no task between them: a parked stream is this handler, a watch
/// on the suite's head (`SyncStore.watchForChange`) and a timer on the connection's event loop for
/// the heartbeat; each turn runs in a short task that ends with it. On a store whose watches hear
/// every writer (PostgreSQL), the heartbeat's turn is a quiet one: the watch stays in place, so it
/// reads no changes (a stream's idle turns cost a query each, not three); a wake during it is
/// acted on after it. On the embedded store the heartbeat's turn reads the changes, which finds
/// what a command run beside the server wrote.
///
/// Hummingbird's request metrics count such a stream's request until its answer starts;
/// `groupdefaults_event_streams_open` and `groupdefaults_event_streams_held` count it until it ends.
///
/// Why: a task keeps the memory of its deepest chain of calls for as long as it lives, and a
/// connection's task (Hummingbird's) lives as long as the connection. Held here, an open stream
/// costs the connection's channel and pipeline and a few small records.
///
/// The stream ends as a task-run one does: a turn's refusal (revoked token, removed member, expired
/// cursor) ends it after its event; graceful shutdown ends it cleanly (Hummingbird's quiesce event,
/// which is not passed on); a failed turn or write closes the connection. The connection closes
/// when the stream ends (every answer here says `Connection: close`): what a client sends after
/// its request is read and dropped, parsed or not; past `droppedLimit` the stream ends (cleanly,
/// as at shutdown).
final class ParkedEventStream: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// Answers a request with the server's routes, the context carrying `parking`; never throws
    /// (an error is its response).
    typealias Respond = @Sendable (_ request: Request, _ parking: StreamParking, _ channel: any Channel) async -> Response

    private enum State { case answering, turning, parked, closed }

    /// The request's head, until its answer starts.
    private var head: HTTPRequest?
    private let respond: Respond
    private let serverName: String
    private var context: ChannelHandlerContext?
    private var state = State.answering
    private var stream: ParkableStream?
    private var cursor: UInt64 = 0
    private var watch: ChangeWatch?
    private var heartbeatTimer: Scheduled<Void>?
    /// Which park a wake belongs to: the wake of an earlier one, cancelled but already on its way, is ignored.
    private var parkNumber = 0
    /// The turn under way is the heartbeat's, the park's watch still in place.
    private var quietTurn = false
    /// What the park's watch reported during a quiet turn (it is out of the table then), acted on after it.
    private var wakeDuringQuietTurn: ChangeWatch.Wake?
    private var lastWrite = NIODeadline.now()
    /// The stream ends after the answer or the turn under way (graceful shutdown, or a client that
    /// sent more than `droppedLimit`).
    private var ending = false
    /// Bytes of body, and requests, the client sent: nothing here reads them.
    private var dropped = 0
    /// The most a client may send that is dropped before the connection closes: a stream's request
    /// has no body, and its client sends nothing more.
    static let droppedLimit = 64 * 1024

    init(head: HTTPRequest, respond: @escaping Respond, serverName: String) {
        self.head = head
        self.respond = respond
        self.serverName = serverName
    }

    /// Whether `head` asks for a sync event stream (`GET /v1/suites/{suite}/events`), which a
    /// connection can hold itself. Only a hint: the routes decide what the request is.
    static func takes(_ head: HTTPRequest) -> Bool {
        guard head.method == .get, let path = head.path else { return false }
        let target = path.utf8.split(separator: UInt8(ascii: "?"), maxSplits: 1, omittingEmptySubsequences: false)[0]
        let parts = target.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        return parts.count == 5 && parts[0].isEmpty && parts[1].elementsEqual("v1".utf8) && parts[2].elementsEqual("suites".utf8)
            && !parts[3].isEmpty && parts[4].elementsEqual("events".utf8)
    }

    // MARK: The request

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        guard let head else { return }
        self.head = nil
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let (respond, channel, serverName) = (self.respond, context.channel, self.serverName)
        Task {
            let parking = StreamParking()
            let response = await respond(Request(head: head, body: RequestBody(buffer: ByteBuffer())), parking, channel)
            let answer = await Answer(response, stream: parking.take(), serverName: serverName)
            channel.eventLoop.execute { bound.value.answered(answer) }
        }
    }

    /// The route's answer, read in full: a stream left in its parking, or a whole response (an
    /// error's: its body is small).
    private struct Answer: Sendable {
        var head: HTTPResponse
        var body: ByteBuffer
        var stream: ParkableStream?

        init(_ response: Response, stream: ParkableStream?, serverName: String) async {
            var headers = response.headers
            headers[.date] = HTTPDate.now()
            headers[.server] = serverName
            headers[.connection] = "close"  // the connection ends with its answer
            let collector = BodyCollector()
            do {
                // A stream's body is empty; writing it runs what the middlewares do when a body ends.
                try await response.body.write(collector.writer)
            } catch {
                let head = HTTPResponse(status: .internalServerError, headerFields: [.contentLength: "0", .connection: "close"])
                self.init(head: head, body: ByteBuffer(), stream: nil)
                return
            }
            if stream == nil { headers[.contentLength] = String(collector.buffer.readableBytes) }
            self.init(head: HTTPResponse(status: response.status, headerFields: headers), body: collector.buffer, stream: stream)
        }

        private init(head: HTTPResponse, body: ByteBuffer, stream: ParkableStream?) {
            self.head = head
            self.body = body
            self.stream = stream
        }
    }

    private func answered(_ answer: Answer) {
        guard state == .answering, let context else { return }  // closed meanwhile: the stream goes with `answer`
        context.write(wrapOutboundOut(.head(answer.head)), promise: nil)
        guard let stream = answer.stream, answer.head.status == .ok, !ending else {
            if answer.body.readableBytes > 0 { context.write(wrapOutboundOut(.body(answer.body)), promise: nil) }
            return end()
        }
        self.stream = stream
        cursor = stream.start
        state = .turning
        write(stream.loop.opening) { $0.turn() }
    }

    // MARK: Turns and parks

    private func turn(quiet: Bool = false) {
        guard state == .turning, let stream, let context else { return }
        quietTurn = quiet
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        let (turn, since) = (stream.loop.turn, cursor)
        Task {
            let result: Result<StreamTurn, any Error>
            do { result = .success(try await turn(since, quiet)) } catch { result = .failure(error) }
            eventLoop.execute { bound.value.turned(result) }
        }
    }

    private func turned(_ result: Result<StreamTurn, any Error>) {
        guard state == .turning, let stream else { return }
        guard case .success(let turn) = result else { return close() }  // as a task-run stream's failed turn
        var text = turn.text
        if text.isEmpty, NIODeadline.now() >= lastWrite + TimeAmount(stream.loop.heartbeat) {
            text = ChangeStreamLoop.heartbeatComment
        }
        if text.isEmpty { return after(turn) }
        write(text) { $0.after(turn) }
    }

    private func after(_ turn: StreamTurn) {
        guard state == .turning else { return }
        if turn.ends || ending { return end() }
        if !turn.text.isEmpty { cursor = turn.head }  // the last event's revision
        if quietTurn {
            quietTurn = false
            guard let wake = wakeDuringQuietTurn else {  // parked again, on the same watch
                state = .parked
                return scheduleHeartbeat(park: parkNumber)
            }
            wakeDuringQuietTurn = nil
            watch = nil
            return wake == .ended ? end() : self.turn()
        }
        if turn.hasMore { return self.turn() }
        park(after: turn.head)
    }

    /// Waits, with no task, for a change past `head` or the heartbeat's time, whichever comes first.
    private func park(after head: UInt64) {
        guard let stream, let context else { return }
        state = .parked
        parkNumber += 1
        let number = parkNumber
        let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
        let eventLoop = context.eventLoop
        watch = stream.loop.storage.watchForChange(account: stream.loop.account, suite: stream.loop.suite, after: head) { wake in
            eventLoop.execute { bound.value.woke(wake, park: number) }
        }
        scheduleHeartbeat(park: number)
    }

    /// The heartbeat's turn at its time: a quiet one, the watch left in place, where watches hear
    /// every writer (`SyncStore.watchesHearEveryWriter`); else a full one, as a change's.
    private func scheduleHeartbeat(park number: Int) {
        guard let stream, let context else { return }
        heartbeatTimer = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastWrite + TimeAmount(stream.loop.heartbeat)) { [self] in
            guard state == .parked, number == parkNumber, let stream = self.stream else { return }
            guard stream.loop.storage.watchesHearEveryWriter else { return woke(.changed, park: number) }  // a full turn
            heartbeatTimer = nil
            state = .turning
            turn(quiet: true)
        }
    }

    private func woke(_ wake: ChangeWatch.Wake, park number: Int) {
        guard number == parkNumber else { return }
        if state == .turning, quietTurn {
            wakeDuringQuietTurn = wake
            return
        }
        guard state == .parked else { return }
        unpark()
        if wake == .ended { return end() }
        state = .turning
        turn()
    }

    private func unpark() {
        watch?.cancel()
        watch = nil
        heartbeatTimer?.cancel()
        heartbeatTimer = nil
    }

    // MARK: Writing and ending

    private func write(_ text: String, then next: @escaping (ParkedEventStream) -> Void) {
        guard let context else { return }
        lastWrite = .now()
        // The next step waits for the write: a slow reader holds its stream back, not the server's memory.
        context.writeAndFlush(wrapOutboundOut(.body(ByteBuffer(string: text)))).assumeIsolated().whenComplete { [self] result in
            if case .failure = result { return close() }
            next(self)
        }
    }

    /// Ends the response, then closes the connection.
    private func end() {
        guard state != .closed, let context else { return }
        release()
        context.writeAndFlush(wrapOutboundOut(.end(nil))).assumeIsolated().whenComplete { _ in context.close(promise: nil) }
    }

    private func close() {
        guard state != .closed else { return }
        release()
        context?.close(promise: nil)
    }

    /// The stream's watch, timer, slot and gauges go.
    private func release() {
        state = .closed
        unpark()
        stream = nil
    }

    // MARK: Events

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The request's end, and anything a client sends after it: dropped, within a bound.
        switch unwrapInboundIn(data) {
        case .head: dropped += 1024
        case .body(let bytes): dropped += bytes.readableBytes
        case .end: break
        }
        if dropped > Self.droppedLimit { endSoon() }
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
        self.context = nil
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Bytes after the request that do not parse are dropped as the rest: the decoder's error,
        // then each later read as data it received in its error state. Any other error ends the
        // connection.
        switch error {
        case is HTTPParserError:
            return
        case ByteToMessageDecoderError.dataReceivedInErrorState(_, let bytes):
            dropped += bytes.readableBytes
            if dropped > Self.droppedLimit { endSoon() }
        default:
            close()
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is ChannelShouldQuiesceEvent else { return context.fireUserInboundEventTriggered(event) }
        // Graceful shutdown (`ShutdownGrace`, before this handler, closes what has not ended in time).
        endSoon()
    }

    /// Ends the stream cleanly, now or after what is under way (the answer, or a turn and its write).
    private func endSoon() {
        switch state {
        case .parked:
            unpark()
            end()
        case .answering, .turning:
            ending = true
        case .closed:
            break
        }
    }
}

/// Collects a response's body into one buffer.
private final class BodyCollector: @unchecked Sendable {
    // Written by one task, read after it: `Answer.init` awaits the writes and then reads.
    var buffer = ByteBuffer()

    var writer: Writer { Writer(collector: self) }

    struct Writer: ResponseBodyWriter {
        let collector: BodyCollector

        mutating func write(_ buffer: ByteBuffer) async throws {
            var buffer = buffer
            collector.buffer.writeBuffer(&buffer)
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}

/// The `Date` header's form (RFC 9110's IMF-fixdate), for responses Hummingbird does not write.
enum HTTPDate {
    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// Now, as `Tue, 01 Dec 2026 10:23:18 GMT`.
    static func now() -> String {
        var seconds = time(nil)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
