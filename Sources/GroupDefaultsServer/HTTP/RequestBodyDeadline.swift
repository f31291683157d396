import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request body does not keep arriving (`BodyPace`): from its head on,
/// the body must have arrived at `BodyPace.minimumBytesPerSecond` once the grace (the head timeout)
/// is spent, that is, within `grace` plus one second per 32 KiB received so far, of the client's
/// time. So a body that arrives at least that fast always makes it, its announced length within
/// the grace plus a second per 32 KiB; a head followed by no body, or by a byte now and then (which
/// restarts the idle timeout with every byte), is closed once the grace is spent, whatever length
/// it announced, before anything authenticated it. A request without a body ends with its head,
/// and nothing waits.
///
/// Only the client's time counts: from when the server asks for more bytes (a `read` passes on
/// towards the socket) until they arrive (the read completes). While the server does not read
/// (its handler is busy before it takes the body, and the async channel's backpressure holds the
/// reads back), the clock stands still.
///
/// It sits after the HTTP decoder, beside `RequestHeadDeadline`, on the connection's event loop.
final class RequestBodyDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let grace: Duration
    private var body: BodyPace?
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(grace: Duration) {
        self.grace = grace
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
            body = BodyPace(grace: grace, waitingSince: .now)
        case .body(let bytes):
            body?.arrived(bytes.readableBytes)
        case .end:
            stop()
            body = nil
        }
        context.fireChannelRead(data)
    }

    /// A read is complete: the server's time until it asks for more.
    func channelReadComplete(context: ChannelHandlerContext) {
        if body != nil {
            body?.pause(at: .now)
            stop()
        }
        context.fireChannelReadComplete()
    }

    /// The server asks for more bytes: the client's time runs until they arrive. Closes the
    /// connection when it is spent, unless bytes arrive first (the read completes, which pauses
    /// the clock and cancels this).
    func read(context: ChannelHandlerContext) {
        if var waiting = body, !waiting.isWaiting {
            let now = ContinuousClock.now
            waiting.resume(at: now)
            body = waiting
            stop()
            if let end = waiting.deadline {
                deadline = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(max(.zero, end - now))) { [weak self] in
                    self?.deadline = nil
                    self?.context?.close(promise: nil)
                }
            }
        }
        context.read()
    }

    private func stop() {
        deadline?.cancel()
        deadline = nil
    }
}

/// The pace a request body must keep (`RequestBodyDeadline`): by the client's time (while the
/// server waits for it), `grace` plus one second per `minimumBytesPerSecond` bytes arrived.
package struct BodyPace: Sendable {
    /// The slowest a body may arrive, on average, once the grace is spent: 32 KiB/s (a 1 MiB push
    /// takes 32 s more).
    package static let minimumBytesPerSecond = 32 << 10

    /// The client's time allowed before the first byte, and the slack after.
    package let grace: Duration
    /// The body's bytes arrived so far.
    package private(set) var received = 0
    /// The client's time spent before the current wait.
    private var spent: Duration = .zero
    /// When the current wait for the client began: nil while the server is not reading.
    private var waitingSince: ContinuousClock.Instant?

    /// A body whose head arrived, the server waiting for it since `waitingSince` (nil: not yet).
    package init(grace: Duration, waitingSince: ContinuousClock.Instant?) {
        self.grace = grace
        self.waitingSince = waitingSince
    }

    /// How much of the client's time a body may have taken when `received` bytes of it arrived.
    package static func allowance(grace: Duration, received: Int) -> Duration {
        grace + .milliseconds(Int64(received) * 1000 / Int64(minimumBytesPerSecond))
    }

    /// Whether the server waits for the client now.
    package var isWaiting: Bool { waitingSince != nil }

    /// When the client's time is spent if nothing more arrives; nil while the server does not
    /// wait for it.
    package var deadline: ContinuousClock.Instant? {
        waitingSince.map { $0 + (Self.allowance(grace: grace, received: received) - spent) }
    }

    /// `bytes` of the body arrived.
    package mutating func arrived(_ bytes: Int) { received += bytes }

    /// The server stops waiting for the client (it has what it read): the clock stands still.
    package mutating func pause(at now: ContinuousClock.Instant) {
        guard let since = waitingSince else { return }
        spent += now - since
        waitingSince = nil
    }

    /// The server waits for the client again: the clock runs.
    package mutating func resume(at now: ContinuousClock.Instant) {
        if waitingSince == nil { waitingSince = now }
    }
}
