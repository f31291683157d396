import Dispatch

/// Runs blocking work (an LMDB transaction, which may wait for the writer lock another process
/// holds) on a Dispatch thread, so that no thread of Swift's cooperative pool is blocked.
enum BlockingWork {
    /// Concurrent: transactions of different suites run side by side; LMDB's writer lock serialises
    /// writes to one suite, and readers never wait.
    private static let queue = DispatchQueue(label: "GroupDefaults.blocking", attributes: .concurrent)

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try work() }) }
        }
    }
}
