import Foundation
import Glibc
import Synchronization
import SystemCalls

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
/// was cancelled is dropped), or with `keepingFinished`, `body`'s result when it finished anyway
/// (the signal came too late to stop it: a join whose suite was set up stays joined). A second signal while the command cleans up ends the process at once
/// (status 128 + its number). Without a signal, `body`'s result or error is returned as it is, and
/// both signals are as they were before.
package func interruptible<T: Sendable>(
    keepingFinished: Bool = false,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let handler = SignalWatch()
    // Each task's ending, tagged: the body's (true) or the signal's (false).
    let outcome: Result<T, any Error>? = await withTaskGroup(of: (Bool, Result<T, any Error>)?.self) { group in
        group.addTask {
            do { return (true, .success(try await body())) } catch { return (true, .failure(error)) }
        }
        group.addTask {
            for await signal in handler.signals { return (false, .failure(Interrupted(signal: signal))) }
            return nil
        }
        var bodys: Result<T, any Error>?
        var first = true
        while let next = await group.next() {
            guard let (isBody, result) = next else { continue }
            if isBody { bodys = result }
            if first {
                first = false
                group.cancelAll()
            }
        }
        return bodys
    }
    if let signal = handler.stop() {
        // Work that was finished when the signal came is not undone by it: its result stands.
        if keepingFinished, case .success(let value)? = outcome { return value }
        throw Interrupted(signal: signal)
    }
    return try (outcome ?? .failure(CancellationError())).get()
}

/// SIGINT and SIGTERM turned into a stream, while a command waits (`interruptible`).
///
/// A `sigaction` handler notes the first signal (a second one ends the process at once) and writes
/// its number to a pipe that a thread of its own reads into the stream. The handler is in place
/// before `init` returns. A dispatch signal source is not used: on Linux it installs its handler
/// later, on dispatch's own thread, and a signal that came in between was ignored (measured: a
/// `share` stopped with SIGINT as soon as it began to wait waited on).
private final class SignalWatch: @unchecked Sendable {
    let signals: AsyncStream<Int32>
    private let continuation: AsyncStream<Int32>.Continuation
    private let pipeRead: Int32
    private let pipeWrite: Int32

    init() {
        (signals, continuation) = AsyncStream.makeStream(of: Int32.self)
        var ends: [Int32] = [-1, -1]
        if pipe(&ends) != 0 {
            // Without a pipe the signals stay as they were: a Ctrl-C ends the command at once.
            (pipeRead, pipeWrite) = (-1, -1)
            return
        }
        (pipeRead, pipeWrite) = (ends[0], ends[1])
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }  // a process the command starts gets neither
        firstSignal.store(0, ordering: .sequentiallyConsistent)
        signalPipeWrite.store(pipeWrite, ordering: .sequentiallyConsistent)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { number in
            // Async-signal-safe only: atomics, write, _exit.
            let (noted, _) = firstSignal.compareExchange(expected: 0, desired: number, ordering: .sequentiallyConsistent)
            if !noted { _exit(128 + number) }
            var byte = UInt8(truncatingIfNeeded: number)
            _ = write(signalPipeWrite.load(ordering: .sequentiallyConsistent), &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        for number in [SIGINT, SIGTERM] { sigaction(number, &action, nil) }
        setSignals([SIGINT, SIGTERM], blocked: false)
        let thread = Thread { [pipeRead, continuation] in
            var byte: UInt8 = 0
            while true {
                guard SystemCall.retryingEINTR({ read(pipeRead, &byte, 1) }) == 1 else { break }
                continuation.yield(Int32(byte))
            }
            close(pipeRead)
        }
        thread.name = "interruption signals"
        thread.start()
    }

    /// Stops watching and returns the signal that arrived, if any. With none, both signals are as
    /// they were (a later one ends the process); one that arrived stays the command's until it
    /// exits (a second one ends it at once).
    func stop() -> Int32? {
        continuation.finish()
        guard pipeWrite >= 0, received == nil else { return received }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
        close(pipeWrite)  // the reading thread sees the end and closes its side
        return received  // one that came just before the handler was taken down
    }

    private var received: Int32? {
        let number = firstSignal.load(ordering: .sequentiallyConsistent)
        return number == 0 ? nil : number
    }
}

/// The first SIGINT or SIGTERM `SignalWatch`'s handler saw (0: none), and the pipe it writes to: a
/// signal handler can capture nothing, so it reads them here.
private let firstSignal = Atomic<Int32>(0)
private let signalPipeWrite = Atomic<Int32>(-1)
