import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request body does not keep arriving: from its head on, the body must
/// have arrived at `minimumBytesPerSecond` once the grace (the head timeout) is spent, that is, by
/// `grace` plus one second per `minimumBytesPerSecond` bytes received so far, the client's time
/// (`allowance(grace:received:)`). So a body that arrives at least that fast always makes it, and
/// its announced length within the grace plus a second per 32 KiB; a head followed by no body, or a
/// byte now and then (which restarts the idle timeout with every byte), is closed once the grace
/// is spent, whatever length it announced, before anything authenticated it. A request without a
/// body ends with its head, and nothing waits.
///
/// Only the client's time counts: the time when the server asked for more bytes (a `read` passed
/// on towards the socket) and none had arrived yet. While the server does not read (its handler
/// busy before it takes the body: backpressure holds the reads back), the clock stands still.
///
/// It sits after the HTTP decoder, beside `RequestHeadDeadline`, on the connection's event loop.
final class RequestBodyDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The slowest a body may arrive, on average, once the grace of the head timeout is spent:
    /// 32 KiB/s (a 1 MiB push takes 32 s more).
    static let minimumBytesPerSecond = 32 << 10

    /// A body under way: what arrived and how much of the client's time it took.
    private struct Body {
        var received = 0
        /// The client's time spent before the current wait.
        var spent: TimeAmount = .zero
        /// When the current wait for the client began: nil while the server is not reading.
        var waitingSince: NIODeadline?
    }

    private let grace: TimeAmount
    private var body: Body?
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(grace: Duration) {
        self.grace = TimeAmount(grace)
    }

    /// How much of the client's time a body may have taken when `received` bytes of it arrived.
    static func allowance(grace: TimeAmount, received: Int) -> TimeAmount {
        grace + .milliseconds(Int64(received) * 1000 / Int64(minimumBytesPerSecond))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
        body = nil
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            // Read now: the client's time runs from here until this read is complete.
            stop()
            body = Body(waitingSince: .now())
        case .body(let bytes):
            body?.received += bytes.readableBytes
        case .end:
            stop()
            body = nil
        }
        context.fireChannelRead(data)
    }

    /// A read is complete: the server's time until it asks for more.
    func channelReadComplete(context: ChannelHandlerContext) {
        pause()
        context.fireChannelReadComplete()
    }

    /// The server asks for more bytes: the client's time runs until they arrive.
    func read(context: ChannelHandlerContext) {
        if var waiting = body, waiting.waitingSince == nil {
            waiting.waitingSince = .now()
            body = waiting
            schedule()
        }
        context.read()
    }

    /// Stops the client's clock, keeping the time it spent.
    private func pause() {
        guard var waiting = body, let since = waiting.waitingSince else { return }
        waiting.spent = waiting.spent + (.now() - since)
        waiting.waitingSince = nil
        body = waiting
        stop()
    }

    /// Closes the connection when the client's time is spent, unless bytes arrive first (the read
    /// completes, which pauses the clock and cancels this).
    private func schedule() {
        guard let context, let waiting = body, let since = waiting.waitingSince else { return }
        stop()
        let left = Self.allowance(grace: grace, received: waiting.received) - waiting.spent
        deadline = context.eventLoop.assumeIsolated().scheduleTask(deadline: since + left) { [weak self] in
            self?.deadline = nil
            self?.context?.close(promise: nil)
        }
    }

    private func stop() {
        deadline?.cancel()
        deadline = nil
    }
}
