import Dispatch
import Foundation
import Glibc

/// A wait a Ctrl-C (SIGINT) or a `kill` (SIGTERM) ended: thrown by `interruptible(_:)` once the
/// interrupted work has stopped, so that the command can undo or record what it began and say in
/// one line what was left and how to go on.
package struct Interrupted: Error, Sendable, CustomStringConvertible {
    /// The signal that ended the wait: SIGINT or SIGTERM.
    package var signal: Int32

    /// The exit status of a process ended by the signal (128 + its number), as a shell reports it.
    package var exitStatus: Int32 { 128 + signal }

    /// "interrupted" for SIGINT, "terminated" for SIGTERM.
    package var description: String { signal == SIGINT ? "interrupted" : "terminated" }

    /// The failure a command reports after its clean-up: `"interrupted: " + message`, with the
    /// signal's exit status.
    package func failure(_ message: String) -> CommandFailure {
        CommandFailure("\(description): \(message)", status: exitStatus)
    }
}

/// Runs `body`, a command's wait on the network, so that SIGINT and SIGTERM cancel it instead of
/// ending the process: once it has stopped, `Interrupted` is thrown (whatever `body` threw when it
/// was cancelled is dropped). A second signal while the command cleans up ends the process at once
/// (status 128 + its number). Without a signal, `body`'s result or error is returned as it is, and
/// both signals are as they were before.
package func interruptible<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let handler = SignalWatch()
    defer { handler.stop() }
    let outcome: Result<T, any Error> = await withTaskGroup(of: Result<T, any Error>?.self) { group in
        group.addTask {
            do { return .success(try await body()) } catch { return .failure(error) }
        }
        group.addTask {
            for await signal in handler.signals { return .failure(Interrupted(signal: signal)) }
            return nil
        }
        var first: Result<T, any Error>?
        while let next = await group.next() {
            guard let next else { continue }
            if first == nil {
                first = next
                group.cancelAll()
            }
        }
        return first ?? .failure(CancellationError())
    }
    if let signal = handler.received { throw Interrupted(signal: signal) }
    return try outcome.get()
}

/// SIGINT and SIGTERM turned into a stream, while a command waits (`interruptible`).
private final class SignalWatch: @unchecked Sendable {
    let signals: AsyncStream<Int32>
    private let continuation: AsyncStream<Int32>.Continuation
    private let lock = NSLock()
    private var first: Int32?
    private var sources: [any DispatchSourceSignal] = []

    init() {
        (signals, continuation) = AsyncStream.makeStream(of: Int32.self)
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.receive(number) }
            source.resume()
            sources.append(source)
        }
        setSignals([SIGINT, SIGTERM], blocked: false)
    }

    /// The first signal received, if any.
    var received: Int32? { lock.withLock { first } }

    private func receive(_ number: Int32) {
        let again = lock.withLock {
            defer { if first == nil { first = number } }
            return first != nil
        }
        if again { _exit(128 + number) }
        continuation.yield(number)
    }

    /// Stops watching: a later signal ends the process as it would have. One that arrived stays the
    /// command's until it exits (a second one ends it at once).
    func stop() {
        continuation.finish()
        guard received == nil else { return }
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
