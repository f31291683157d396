import Foundation
import Glibc
import SystemCalls

/// Runs a child process with posix_spawn and waits for it: the sandbox re-exec, the cold-start
/// children and the change-notification children.
enum Spawn {
    struct Result {
        /// The exit code, or 128 + the signal that ended the child.
        var status: Int32
        var output: String
        /// From just before posix_spawn to just after waitpid returned.
        var wallNanoseconds: Int64
    }

    /// This executable, so that the benchmark can re-run itself.
    static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return CommandLine.arguments[0] }
        return String(cBuffer: buffer)
    }

    /// Runs `path` with `arguments` and this process's environment plus `environment`. With
    /// `captureOutput` the child's stdout is collected; otherwise it shares ours. SIGINT and
    /// SIGTERM are unblocked in the child whatever this process blocks.
    static func run(
        _ path: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        captureOutput: Bool
    ) throws -> Result {
        try start(path, arguments, environment: environment, captureOutput: captureOutput).wait()
    }

    /// Starts `path` as `run` does, without waiting for it: read its lines as it prints them
    /// (`readLine`), then `wait`.
    static func start(
        _ path: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        captureOutput: Bool
    ) throws -> Child {
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp =
            ProcessInfo.processInfo.environment.merging(environment) { $1 }
            .map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }

        var pipeEnds: [Int32] = [-1, -1]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if captureOutput {
            guard pipe(&pipeEnds) == 0 else { throw BenchError("pipe: \(String(cString: strerror(errno)))") }
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], STDOUT_FILENO)
            posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
            posix_spawn_file_actions_addclose(&actions, pipeEnds[1])
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))

        var pid = pid_t()
        let start = Clock.nanoseconds()
        let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
        if captureOutput { close(pipeEnds[1]) }
        guard spawned == 0 else {
            if captureOutput { close(pipeEnds[0]) }
            throw BenchError("cannot run \(path): \(String(cString: strerror(spawned)))")
        }
        return Child(pid: pid, output: captureOutput ? pipeEnds[0] : -1, start: start)
    }

    /// A running child. One that is released without `wait` is killed (SIGKILL, by its pid) and
    /// reaped, so that a failed run leaves no child behind.
    final class Child {
        let pid: pid_t
        private var outputFD: Int32
        private let start: Int64
        private var buffered: [UInt8] = []
        private var reaped = false

        fileprivate init(pid: pid_t, output: Int32, start: Int64) {
            self.pid = pid
            outputFD = output
            self.start = start
        }

        deinit {
            if !reaped {
                kill(pid, SIGKILL)
                _ = SystemCall.wait(for: pid)
            }
            if outputFD >= 0 { close(outputFD) }
        }

        /// The next line the child prints (without its newline); nil once it closed its stdout.
        func readLine() -> String? {
            while true {
                if let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffered[..<newline], as: UTF8.self)
                    buffered.removeSubrange(...newline)
                    return line
                }
                guard fill() else {
                    guard !buffered.isEmpty else { return nil }
                    defer { buffered.removeAll() }
                    return String(decoding: buffered, as: UTF8.self)
                }
            }
        }

        /// Reads the rest of the child's output and waits for it to exit. `output` is what
        /// `readLine` did not return.
        func wait() throws -> Result {
            while fill() {}
            if outputFD >= 0 {
                close(outputFD)
                outputFD = -1
            }
            guard let status = SystemCall.wait(for: pid) else { throw BenchError("waitpid: \(String(cString: strerror(errno)))") }
            reaped = true
            let end = Clock.nanoseconds()
            let signal = status & 0x7f
            defer { buffered.removeAll() }
            return Result(
                status: signal == 0 ? (status >> 8) & 0xff : 128 + signal,
                output: String(decoding: buffered, as: UTF8.self),
                wallNanoseconds: end - start
            )
        }

        /// Appends what the child printed next; false at the end of its output.
        private func fill() -> Bool {
            guard outputFD >= 0 else { return false }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = SystemCall.retryingEINTR { read(outputFD, &chunk, chunk.count) }
            guard count > 0 else { return false }
            buffered += chunk.prefix(count)
            return true
        }
    }
}
