import CommandLineSupport
package import Foundation
import Glibc
package import ServerLaunching
package import Testing

/// A process that runs while the test writes to its stdin and reads its stdout line by line; its
/// stderr goes to a file, read once it has ended. Waiting for a line or for the end holds no thread
/// of Swift's cooperative pool: the reads that wait run on a serial queue of the process's own.
package final class RunningProcess: @unchecked Sendable {  // used by one test task at a time
    /// What the child's SIGINT and SIGTERM are when it starts.
    package enum TerminationSignals {
        /// Unblocked, as in a process started from a shell (the test runner's threads block them).
        case unblocked
        /// Blocked.
        case blocked
        /// As the starting thread has them.
        case inherited
    }

    /// The child.
    package let process = SpawnedProcess()
    private let input = Pipe()
    private let output = Pipe()
    private let stderrFile: URL
    private let removesStderrFile: Bool
    private var buffer: [UInt8] = []
    private var atEnd = false
    private var inputClosed = false
    /// Where the reads that wait run, one at a time: a serial queue of its own, which gets a thread
    /// of its own when it needs one.
    private let reader = DispatchQueue(label: "RunningProcess.reader")

    /// Starts `executable ARGUMENTS…`. `environment` replaces this process's when given; stderr goes
    /// to `stderrFile`, or to a temporary file removed with this object. A child inherits the signal
    /// mask of the thread that starts it: `terminationSignals` says what its SIGINT and SIGTERM are.
    package init(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String]? = nil,
        stderrFile: URL? = nil,
        terminationSignals: TerminationSignals = .unblocked
    ) throws {
        self.stderrFile =
            stderrFile
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("process-stderr-\(UUID().uuidString)")
        removesStderrFile = stderrFile == nil
        _ = FileManager.default.createFile(atPath: self.stderrFile.path, contents: nil)
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: self.stderrFile)
        let saved: sigset_t? =
            switch terminationSignals {
            case .unblocked: setSignals([SIGINT, SIGTERM], blocked: false)
            case .blocked: setSignals([SIGINT, SIGTERM], blocked: true)
            case .inherited: nil
            }
        defer {
            if var saved { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        }
        try process.run()
    }

    deinit {
        if removesStderrFile { try? FileManager.default.removeItem(at: stderrFile) }
    }

    /// Writes to the process's stdin.
    package func send(_ text: String) {
        input.fileHandleForWriting.write(Data(text.utf8))
    }

    /// Closes the process's stdin (once).
    package func closeInput() {
        guard !inputClosed else { return }
        inputClosed = true
        try? input.fileHandleForWriting.close()
    }

    /// The next line of stdout; nil if stdout ends, or no whole line arrives within `timeout`.
    package func nextLine(timeout: Duration = .seconds(60)) async -> String? {
        await withCheckedContinuation { continuation in
            reader.async { continuation.resume(returning: self.readLine(timeout: timeout)) }
        }
    }

    /// `nextLine`, blocking the calling thread: `reader`'s, never one of the cooperative pool's or
    /// of the shared dispatch queues (which, on Linux, draw on as few threads as there are cores).
    private func readLine(timeout: Duration) -> String? {
        let deadline = ContinuousClock.now + timeout
        let fd = output.fileHandleForReading.fileDescriptor
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            if atEnd { return nil }
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return nil }
            let milliseconds = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000 + 1
            var pending = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pending, 1, Int32(clamping: milliseconds))
            if ready < 0 {
                if errno == EINTR { continue }
                return nil
            }
            guard ready > 0 else { continue }
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count <= 0 {
                atEnd = true
            } else {
                buffer += chunk[..<count]
            }
        }
    }

    /// Reads lines until one satisfies `predicate` and returns it; nil if stdout ends or the time
    /// runs out first. Lines after it are kept for the next read and for `finish`.
    package func firstLine(timeout: Duration = .seconds(60), where predicate: (String) -> Bool) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while let line = await nextLine(timeout: deadline - ContinuousClock.now) {
            if predicate(line) { return line }
        }
        return nil
    }

    /// Reads lines until one satisfies `predicate`; false if stdout ends or the time runs out first.
    package func waitForLine(timeout: Duration = .seconds(60), where predicate: (String) -> Bool) async -> Bool {
        await firstLine(timeout: timeout, where: predicate) != nil
    }

    /// Sends `signal` to the process, if it still runs.
    package func signal(_ signal: Int32) {
        process.signalIfRunning(signal)
    }

    /// Reads stdout (kept for `finish`) until it ends, which it does when the process exits;
    /// false if it has not ended within `timeout`.
    package func waitForEnd(timeout: Duration = .seconds(20)) async -> Bool {
        var lines: [String] = []
        let deadline = ContinuousClock.now + timeout
        while let line = await nextLine(timeout: deadline - ContinuousClock.now) { lines.append(line) }
        let ended = atEnd
        // Put the lines back, for `finish`.
        buffer = Array(lines.map { $0 + "\n" }.joined().utf8) + buffer
        return ended
    }

    /// Sends `signal` and collects the result once the process has ended; nil (after recording
    /// an issue) if it is still running `timeout` later. `stop` then kills it.
    package func end(with signal: Int32, timeout: Duration = .seconds(20), sourceLocation: SourceLocation = #_sourceLocation) async -> ProcessResult?
    {
        self.signal(signal)
        guard await waitForEnd(timeout: timeout) else {
            Issue.record("still running \(timeout) after signal \(signal)", sourceLocation: sourceLocation)
            return nil
        }
        return await finish()
    }

    /// Closes stdin, waits for the process to end, and collects the rest of stdout and stderr. A
    /// process still running `timeLimit` later is killed (SIGKILL) and an issue recorded, so that a
    /// command that waits forever fails its test instead of hanging the run.
    package func finish(timeLimit: Duration = .seconds(300), sourceLocation: SourceLocation = #_sourceLocation) async -> ProcessResult {
        closeInput()
        if !(await waitForEnd(timeout: timeLimit)) {
            Issue.record("still running \(timeLimit) after its input closed; killed", sourceLocation: sourceLocation)
            signal(SIGKILL)
            // Killed, the child's stdout ends (unless a grandchild still holds it).
            _ = await waitForEnd(timeout: .seconds(20))
        }
        let rest = buffer
        buffer = []
        atEnd = true
        await process.exited()
        let stderr = (try? Data(contentsOf: stderrFile)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return ProcessResult(status: process.terminationStatus, reason: process.terminationReason, stdoutData: Data(rest), stderr: stderr)
    }

    /// For `defer`: kills the process if a failed test left it running (its reaper thread reaps
    /// it), and closes its stdin.
    package func stop() {
        signal(SIGKILL)
        closeInput()
    }
}
