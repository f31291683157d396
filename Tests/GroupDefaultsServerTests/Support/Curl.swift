import Foundation
import Glibc
import GroupDefaults

/// curl as a real, separate HTTP client (for what the in-process test client cannot do: read an
/// endless event stream as it arrives, speak TLS with a CA file).
final class Curl: @unchecked Sendable {  // the process and pipe are touched from one task at a time
    let process = Process()
    private let output = Pipe()
    private let errors = Pipe()
    private var parser = ServerSentEventParser()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["--silent", "--show-error", "--no-buffer"] + arguments
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// Runs curl to completion: its exit status and output.
    static func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let curl = try Curl(arguments)
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let out = curl.output.fileHandleForReading.readDataToEndOfFile()
                let err = curl.errors.fileHandleForReading.readDataToEndOfFile()
                curl.process.waitUntilExit()
                continuation.resume(returning: (curl.process.terminationStatus, String(decoding: out, as: UTF8.self),
                                                String(decoding: err, as: UTF8.self)))
            }
        }
    }

    /// The next Server-Sent Events of the stream curl prints, at least `count` of them, or fewer if
    /// the stream ends or `timeout` passes first. Comments are counted in `comments`.
    func events(_ count: Int, timeout: Duration = .seconds(10)) async -> [ServerSentEvent] {
        let fd = output.fileHandleForReading.fileDescriptor
        let deadline = ContinuousClock.now + timeout
        var events: [ServerSentEvent] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while events.count < count {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { break }
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000)
            // A short poll on this task's thread: bounded by the deadline, no busy loop.
            guard poll(&pending, 1, max(1, min(milliseconds, 100))) >= 0 else { break }
            if pending.revents == 0 { await Task.yield(); continue }
            let read = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if read <= 0 { break }
            events += parser.feed(buffer[..<read])
        }
        return events
    }

    var comments: Int { parser.comments }

    /// Waits (off the cooperative pool) for curl to exit; its status.
    func waitForExit() async -> Int32 {
        let process = self.process
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                process.waitUntilExit()
                continuation.resume(returning: process.terminationStatus)
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
