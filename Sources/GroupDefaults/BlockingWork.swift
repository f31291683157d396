import Dispatch

/// Runs blocking work (an LMDB transaction, which may wait for the writer lock another process
/// holds) on a Dispatch thread, so that no thread of Swift's cooperative pool is blocked.
enum BlockingWork {
    /// Concurrent: transactions of different suites run side by side; LMDB's writer lock serialises
    /// writes to one suite, and readers never wait.
    private static let queue: DispatchQueue = {
        let queue = DispatchQueue(label: "GroupDefaults.blocking", attributes: .concurrent)
        queue.setSpecific(key: marker, value: ())
        return queue
    }()
    private static let marker = DispatchSpecificKey<Void>()

    /// Whether the caller runs on the blocking-work queue (for tests).
    static var isCurrent: Bool { DispatchQueue.getSpecific(key: marker) != nil }

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
