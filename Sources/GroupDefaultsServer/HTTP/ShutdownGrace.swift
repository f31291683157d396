import NIOCore

/// Closes a connection still open `grace` after graceful shutdown began (SIGTERM, SIGINT). Event
/// streams and long-polls end at once then, and a request under way gets its answer; but a client
/// that reads nothing leaves its answer's last bytes unsent, and the server, which waits for every
/// connection's end, would wait for ever (as systemd would, until its own timeout kills it).
final class ShutdownGrace: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    /// How long a connection has to end by itself once graceful shutdown began.
    static let grace = Duration.seconds(10)

    private let grace: TimeAmount
    private var deadline: Scheduled<Void>?

    init(grace: Duration = ShutdownGrace.grace) {
        self.grace = TimeAmount(grace)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent, deadline == nil {
            deadline = context.eventLoop.assumeIsolated().scheduleTask(in: grace) { context.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }
}
