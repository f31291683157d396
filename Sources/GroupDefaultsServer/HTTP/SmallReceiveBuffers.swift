import NIOCore

/// Starts each connection with a 512-byte receive buffer instead of NIO's 2 KiB (growing as NIO
/// sees larger reads, up to 64 KiB), then leaves the pipeline. A connection keeps its receive
/// buffer for as long as it is open: most of them carry event streams, long-polls and small
/// requests, and the difference is about 1.5 KiB of every open stream.
final class SmallReceiveBuffers: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never

    func handlerAdded(context: ChannelHandlerContext) {
        let allocator = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 512, maximum: 65_536)
        try? context.channel.syncOptions?.setOption(ChannelOptions.recvAllocator, value: allocator)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
