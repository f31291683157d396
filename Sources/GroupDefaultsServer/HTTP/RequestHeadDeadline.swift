import HTTPTypes
import NIOCore
import NIOHTTPTypes

/// Closes a connection whose request head does not arrive in full within `timeout`: from the
/// moment the connection opens, and, between requests on a kept-alive connection, from the first
/// byte of the next request. A client that sends half a header and then nothing (or a byte now and
/// then) cannot hold a connection, and its file descriptor, for longer than that. A connection
/// that is quiet between requests is left to the idle timeout (Hummingbird's
/// `HTTP1Channel.Configuration.idleTimeout`); one answering a request (an event stream, a
/// long-poll) is neither.
///
/// It sits after the HTTP decoder, where it sees each request's head arrive and each answer end,
/// and puts a companion before everything else in the pipeline (`FirstByte`) that tells it when
/// bytes arrive. Both run on the connection's event loop.
final class RequestHeadDeadline: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let timeout: TimeAmount
    /// Between a request's answer and the next request's head.
    private var betweenRequests = false
    private var headArrived = false
    private var deadline: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(timeout: Duration) {
        self.timeout = TimeAmount(timeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        do {
            try context.pipeline.syncOperations.addHandler(FirstByte(owner: self), position: .first)
        } catch {
            context.close(promise: nil)
        }
        start()  // the first request's head is due from now
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .head = unwrapInboundIn(data) {
            headArrived = true
            betweenRequests = false
            deadline?.cancel()
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            betweenRequests = true
            headArrived = false
        }
        context.write(data, promise: promise)
    }

    /// Bytes arrived: between requests, they start the next head's deadline.
    fileprivate func bytesArrived() {
        if betweenRequests && !headArrived && deadline == nil { start() }
        betweenRequests = false
    }

    private func start() {
        guard let context, deadline == nil else { return }
        deadline = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) { [weak self] in
            guard let self, !self.headArrived else { return }
            self.context?.close(promise: nil)
        }
    }

    /// Sees the connection's bytes as they arrive, before any decoding (TLS included), and tells
    /// its owner.
    private final class FirstByte: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        private weak var owner: RequestHeadDeadline?

        init(owner: RequestHeadDeadline) { self.owner = owner }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            owner?.bytesArrived()
            context.fireChannelRead(data)
        }
    }
}
