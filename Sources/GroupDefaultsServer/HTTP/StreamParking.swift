import Metrics
import Synchronization

/// Where the event stream route leaves its stream for the connection to hold without a task
/// (`ParkedEventStream`). The connection puts one in the context of a request it handles itself
/// (`ConnectionDispatch`); without one, the route streams in the request's task as any response.
package final class StreamParking: Sendable {
    private let stream = Mutex<ParkableStream?>(nil)

    /// Leaves `stream` for the connection.
    func hold(_ stream: ParkableStream) {
        self.stream.withLock { $0 = stream }
    }

    /// The stream left here, if the route left one; taken out.
    func take() -> ParkableStream? {
        stream.withLock { stream in
            defer { stream = nil }
            return stream
        }
    }
}

/// An event stream that has passed its route's checks, ready to run: its loop (the turn and its
/// rules), the revision it starts after, and what it holds while it is open.
struct ParkableStream: Sendable {
    let loop: ChangeStreamLoop
    let start: UInt64
    let open: OpenStream
}

/// What an open event stream holds: its token's slot (`StreamSlots`), and its place in the open
/// streams' gauge (and the held streams' one, for a stream its connection holds) and the console's
/// count; all given back when this is released.
final class OpenStream: Sendable {
    private let slot: StreamSlots.Slot
    private let activity: ConsoleActivity
    private let isHeld: Bool

    init(slot: StreamSlots.Slot, activity: ConsoleActivity, held: Bool) {
        self.slot = slot
        self.activity = activity
        self.isHeld = held
        ServerMetrics.openEventStreams.increment()
        if held { ServerMetrics.heldEventStreams.increment() }
        activity.streams(+1)
    }

    deinit {
        ServerMetrics.openEventStreams.decrement()
        if isHeld { ServerMetrics.heldEventStreams.decrement() }
        activity.streams(-1)
    }
}
