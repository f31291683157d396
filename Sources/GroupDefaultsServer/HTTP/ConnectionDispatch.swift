import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// The server's HTTP/1 connections: Hummingbird's (`HTTP1Channel`), except that a connection whose
/// first request is a sync event stream holds that stream itself, with no task
/// (`ParkedEventStream`). Hummingbird gives every connection a task that lives as long as the
/// connection; here that task waits for the first request's head (`ConnectionDispatch`), then
/// either runs Hummingbird's connection as usual or ends, leaving the stream to the pipeline.
///
/// The pipeline up to the dispatch is the one `HTTP1Channel.setup` makes (the HTTP codec with the
/// configuration's decoder limits, the conversion to HTTP types, the additional handlers); the
/// dispatch then adds the rest of it (the connection state handler and the async channel) for
/// Hummingbird's requests. A stream on a connection that carried other requests first runs in
/// Hummingbird's task, as before (`EventStream`).
struct StreamHoldingHTTP1Channel: ServerChildChannel {
    let http1: HTTP1Channel
    let respond: ParkedEventStream.Respond
    let serverName: String

    /// A connection, and Hummingbird's side of it once its first request is Hummingbird's.
    struct Value: ServerChildChannelValue {
        let channel: any Channel
        /// nil: the connection holds an event stream itself, or closed before a request.
        let hummingbird: EventLoopFuture<NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>?>
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let decoder = http1.configuration.httpDecoder
            var limits = NIOHTTPDecoderLimitConfiguration()
            limits.maxHeaderFieldSize = decoder.maxHeaderFieldSize
            limits.maxHeaderListSize = decoder.maxHeaderListSize
            limits.maxHeaderFieldCount = decoder.maxHeaderFieldCount
            let pipeline = channel.pipeline.syncOperations
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false,
                withErrorHandling: false,
                withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(),
                withDecoderLimitConfiguration: limits
            )
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandlers(http1.configuration.additionalChannelHandlers())
            let decided = channel.eventLoop.makePromise(of: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>?.self)
            try pipeline.addHandler(
                ConnectionDispatch(
                    decided: decided,
                    idleTimeout: http1.configuration.idleTimeout.map { Duration($0) },
                    logger: logger,
                    parked: { [respond, serverName] head in ParkedEventStream(head: head, respond: respond, serverName: serverName) }
                )
            )
            return Value(channel: channel, hummingbird: decided.futureResult)
        }
    }

    func handle(value: Value, logger: Logger) async {
        guard let asyncChannel = try? await value.hummingbird.get() else {
            // Held by the connection, or closed: this task waits for the close with nothing else
            // in it (a few hundred bytes), so that graceful shutdown, which waits for these tasks,
            // waits for the stream's clean end too.
            try? await value.channel.closeFuture.get()
            return
        }
        await http1.handle(value: asyncChannel, logger: logger)
    }
}

/// Sends a connection's first request either to Hummingbird (it adds what Hummingbird's pipeline
/// has after this point, passes the head on and leaves) or, for an event stream, to a
/// `ParkedEventStream` that it puts in its place.
final class ConnectionDispatch: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let decided: EventLoopPromise<NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>?>
    private var isDecided = false
    private let idleTimeout: Duration?
    private let logger: Logger
    private let parked: (HTTPRequest) -> ParkedEventStream

    init(
        decided: EventLoopPromise<NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>?>,
        idleTimeout: Duration?,
        logger: Logger,
        parked: @escaping (HTTPRequest) -> ParkedEventStream
    ) {
        self.decided = decided
        self.idleTimeout = idleTimeout
        self.logger = logger
        self.parked = parked
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !isDecided else { return context.fireChannelRead(data) }
        guard case .head(let head) = unwrapInboundIn(data), ParkedEventStream.takes(head) else {
            toHummingbird(context)
            context.fireChannelRead(data)
            return leave(context)
        }
        do {
            try context.pipeline.syncOperations.addHandler(parked(head), position: .after(self))
        } catch {
            return settle(nil, closing: context)
        }
        settle(nil)
        leave(context)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !isDecided else { return context.fireErrorCaught(error) }
        // A request that does not parse: Hummingbird answers it (400) and closes.
        toHummingbird(context)
        context.fireErrorCaught(error)
        leave(context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        settle(nil)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        settle(nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Graceful shutdown, or a client that half-closed, before any request: nothing to finish.
        if !isDecided, event is ChannelShouldQuiesceEvent || (event as? ChannelEvent) == .inputClosed {
            return settle(nil, closing: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Adds Hummingbird's connection state handler and async channel after this handler.
    private func toHummingbird(_ context: ChannelHandlerContext) {
        do {
            try context.pipeline.syncOperations.addHandler(HTTPConnectionStateHandler(idleTimeout: idleTimeout, logger: logger))
            let asyncChannel = try NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>(
                wrappingChannelSynchronously: context.channel,
                configuration: .init(isOutboundHalfClosureEnabled: true)
            )
            settle(asyncChannel)
        } catch {
            settle(nil, closing: context)
        }
    }

    private func settle(_ asyncChannel: NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>?, closing context: ChannelHandlerContext? = nil) {
        if !isDecided {
            isDecided = true
            decided.succeed(asyncChannel)
        }
        context?.close(promise: nil)
    }

    private func leave(_ context: ChannelHandlerContext) {
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
