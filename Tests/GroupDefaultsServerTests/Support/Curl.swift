import Foundation
import Glibc
import GroupDefaultsWire
import ServerLaunching
import TestSupport

/// curl as a real, separate HTTP client (for what the in-process test client cannot do: read an
/// endless event stream as it arrives, speak TLS with a CA file).
final class Curl: @unchecked Sendable {  // one reader at a time: a task, or the dispatch thread it waits on
    let process = SpawnedProcess()
    private let output = Pipe()
    private let errors = Pipe()
    private var parser = ServerSentEventParser()
    /// Events parsed and not yet returned.
    private var pending: [ServerSentEvent] = []

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["--silent", "--show-error", "--no-buffer"] + arguments
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// Runs curl to completion: its exit status and output.
    static func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await BuiltExecutable.run(URL(fileURLWithPath: "/usr/bin/curl"), ["--silent", "--show-error", "--no-buffer"] + arguments)
    }

    /// The next Server-Sent Events of the stream curl prints, at least `count` of them, or fewer if
    /// the stream ends or `timeout` passes first. Comments are counted in `comments`.
    func events(_ count: Int, timeout: Duration = .seconds(10)) async -> [ServerSentEvent] {
        await timedEvents(count, timeout: timeout).events
    }

    /// As `events`, with the moment the `count`-th event was parsed (nil if it did not arrive).
    func timedEvents(_ count: Int, timeout: Duration = .seconds(10)) async -> (events: [ServerSentEvent], parsed: ContinuousClock.Instant?) {
        let parsed = await read(timeout: timeout) { $0.pending.count >= count }
        defer { pending.removeAll() }
        return (pending, parsed)
    }

    /// Reads until the next comment (a heartbeat) arrives; false if the stream ends or `timeout`
    /// passes first. Events read meanwhile are kept for `events`.
    func nextComment(timeout: Duration = .seconds(10)) async -> Bool {
        let seen = parser.comments
        return await read(timeout: timeout) { $0.parser.comments > seen } != nil
    }

    /// Reads curl's output until `done` holds, on a thread of its own (blocking in poll, off the
    /// cooperative pool, so that the moment of arrival is taken as it happens): that moment, or
    /// nil if the stream ended or `timeout` passed first.
    private func read(timeout: Duration, until done: @escaping @Sendable (Curl) -> Bool) async -> ContinuousClock.Instant? {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: self.readBlocking(timeout: timeout, until: done))
            }
        }
    }

    private func readBlocking(timeout: Duration, until done: (Curl) -> Bool) -> ContinuousClock.Instant? {
        let fd = output.fileHandleForReading.fileDescriptor
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if done(self) { return ContinuousClock.now }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return nil }
            var readable = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000)
            let ready = poll(&readable, 1, max(1, milliseconds))
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else { return nil }
            if readable.revents == 0 { continue }
            let read = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if read <= 0 { return nil }
            pending += parser.feed(buffer[..<read])
        }
    }

    var comments: Int { parser.comments }

    /// Waits (holding no thread) for curl to exit; its status.
    func waitForExit() async -> Int32 {
        await process.exited()
        return process.terminationStatus
    }

    deinit {
        process.signalIfRunning(SIGKILL)
    }
}
