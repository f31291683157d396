import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request body does not arrive in full in time: within the head timeout
/// plus one second per `minimumBytesPerSecond` of the body (its `Content-Length`, or the largest
/// body the server takes when none is given), from the moment its head arrived. So a body that
/// arrives at least that fast always makes it, and a client that sends a head and then its body a
/// byte now and then (which restarts the idle timeout with every byte) holds the connection, and
/// its file descriptor, for a bounded time whatever it announced, before anything authenticated
/// it. A request without a body ends with its head, and nothing waits.
///
/// It sits after the HTTP decoder, beside `RequestHeadDeadline`, on the connection's event loop.
final class RequestBodyDeadline: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// The slowest a body may arrive, on average, once the grace of the head timeout is spent:
    /// 32 KiB/s (a 1 MiB push takes 32 s more).
    static let minimumBytesPerSecond = 32 << 10

    private let grace: Duration
    private let maxBodyBytes: Int
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(grace: Duration, maxBodyBytes: Int) {
        self.grace = grace
        self.maxBodyBytes = maxBodyBytes
    }

    /// How long a body of `length` bytes (nil: not announced) may take after its head.
    static func allowance(grace: Duration, length: Int?, maxBodyBytes: Int) -> Duration {
        let bytes = min(max(length ?? maxBodyBytes, 0), maxBodyBytes)
        return grace + .milliseconds(Int64(bytes) * 1000 / Int64(minimumBytesPerSecond))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            let length = head.headerFields[.contentLength].flatMap { Int($0) }
            start(Self.allowance(grace: grace, length: length, maxBodyBytes: maxBodyBytes))
        case .body: break
        case .end:
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    private func start(_ allowance: Duration) {
        guard let context else { return }
        deadline?.cancel()
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(allowance)) { [weak self] in
            self?.deadline = nil
            self?.context?.close(promise: nil)
        }
    }
}
