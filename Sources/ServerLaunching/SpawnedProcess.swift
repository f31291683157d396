package import Foundation
import Glibc
import SystemCalls

/// A child process, started with `posix_spawn`: what the tests and the launchers use instead of
/// Foundation's `Process`, with the part of its interface they need.
///
/// Foundation's `Process.run()` on Linux finds the descriptors to close in the child by reading
/// `/proc/self/fd`, copying 256 bytes of each directory entry; past about 1,300 open descriptors the
/// copy reads beyond glibc's buffer and the whole process crashed (measured here, in the server and
/// sync tests; swift-corelibs-foundation issue 5472, fixed after Swift 6.3). Here the child closes
/// every descriptor from 3 up with glibc's `posix_spawn_file_actions_addclosefrom_np`, reads nothing,
/// and a thread of its own waits for the child, so any number of processes may start at once.
/// Async code awaits `exited()`, which holds no thread while it waits. (swift-subprocess starts
/// processes soundly too, but a child lives only inside the closure its `run` is given; the tests
/// and the launchers keep children, servers and devices, across scopes and signal them when they
/// choose.)
package final class SpawnedProcess: @unchecked Sendable {  // mutable state behind `lock`
    /// The executable to run.
    package var executableURL: URL?
    /// Its arguments, without the executable's name.
    package var arguments: [String] = []
    /// The child's environment; nil: this process's.
    package var environment: [String: String]?
    /// stdin: a `FileHandle`, a `Pipe` (the child reads its read end), or nil for /dev/null; at
    /// first this process's.
    package var standardInput: Any? = FileHandle.standardInput
    /// stdout: a `FileHandle`, a `Pipe` (the child writes its write end), or nil for /dev/null; at
    /// first this process's.
    package var standardOutput: Any? = FileHandle.standardOutput
    /// stderr, as `standardOutput`.
    package var standardError: Any? = FileHandle.standardError
    /// Called once the child has ended (on the thread that waited for it).
    package var terminationHandler: (@Sendable (SpawnedProcess) -> Void)?

    private let lock = NSCondition()
    private var pid: pid_t = 0
    private var ended: (status: Int32, reason: Process.TerminationReason)?
    /// Set once `terminationHandler` has run: what `exited()` waits for.
    private var handled = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// A process to start with `run()`.
    package init() {}

    /// The child's process id (0 before `run()`).
    package var processIdentifier: pid_t { lock.withLock { pid } }

    /// Whether the child was started and has not been reaped yet.
    package var isRunning: Bool { lock.withLock { pid != 0 && ended == nil } }

    /// The exit status, or the signal that ended the child; only once it has ended.
    package var terminationStatus: Int32 { lock.withLock { ended?.status ?? 0 } }

    /// Whether the child exited or a signal ended it; only once it has ended.
    package var terminationReason: Process.TerminationReason { lock.withLock { ended?.reason ?? .exit } }

    /// Starts the child in a process group of its own (as `Process` does), its signal mask that of
    /// the calling thread, every descriptor but 0, 1 and 2 closed. The parent's ends of the pipes
    /// given as stdin, stdout and stderr that the child uses are closed here once it started.
    package func run() throws {
        guard let executableURL else { throw SpawnFailure("no executable to run") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        guard null >= 0 else { throw SpawnFailure("cannot open /dev/null: errno \(errno)") }
        defer { close(null) }
        let streams: [(Any?, Int32, Bool)] = [(standardInput, 0, true), (standardOutput, 1, false), (standardError, 2, false)]
        var usedEnds: [FileHandle] = []
        for (stream, target, reads) in streams {
            let source: Int32
            switch stream {
            case let pipe as Pipe:
                let end = reads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                usedEnds.append(end)
                source = end.fileDescriptor
            case let handle as FileHandle where handle.fileDescriptor >= 0:
                source = handle.fileDescriptor
            default:
                source = null  // nil, or `FileHandle.nullDevice`, whose descriptor is -1 here
            }
            // Also clears close-on-exec.
            let added = posix_spawn_file_actions_adddup2(&actions, source, target)
            guard added == 0 else {
                throw SpawnFailure("cannot give the child descriptor \(source) as \(target): \(String(cString: strerror(added)))")
            }
        }
        guard let closeFrom = Self.addCloseFrom else {
            throw SpawnFailure("this C library has no posix_spawn_file_actions_addclosefrom_np (glibc 2.34 or later)")
        }
        let closing = closeFrom(&actions, 3)
        guard closing == 0 else { throw SpawnFailure("cannot close the child's other descriptors: \(String(cString: strerror(closing)))") }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts as a program started from a shell would: no signal blocked, none ignored.
        // The spawning thread may block signals (a Dispatch worker blocks most), and a child
        // inherits the mask: pg_autoctl's supervisor then waits for ever on children that cannot
        // get its SIGINT.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attributes, 0)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var every = sigset_t()
        sigfillset(&every)
        posix_spawnattr_setsigdefault(&attributes, &every)

        let argv = [executableURL.path] + arguments
        let environment = self.environment.map { $0.map { "\($0.key)=\($0.value)" } }
        var spawned: pid_t = 0
        let rc = Self.withCStrings(argv) { argv in
            if let environment {
                return Self.withCStrings(environment) { envp in posix_spawn(&spawned, executableURL.path, &actions, &attributes, argv, envp) }
            }
            return posix_spawn(&spawned, executableURL.path, &actions, &attributes, argv, environ)
        }
        let child = spawned
        guard rc == 0 else { throw SpawnFailure("cannot start \(executableURL.path): \(String(cString: strerror(rc)))") }
        for end in usedEnds { try? end.close() }
        lock.withLock { pid = child }
        let reaper = Thread { [self] in reap(child) }
        reaper.name = "reaps \(child)"
        reaper.start()
    }

    /// Sends SIGTERM to the child, if it has not been reaped yet (never to a reused process id).
    package func terminate() {
        signalIfRunning(SIGTERM)
    }

    /// Sends `signal` to the child, if it has not been reaped yet: the reaper holds the lock to
    /// record the end, so the process id cannot have been reused meanwhile.
    package func signalIfRunning(_ signal: Int32) {
        lock.withLock { if pid != 0 && ended == nil { _ = kill(pid, signal) } }
    }

    /// Waits until the child has ended and `terminationHandler` has run, holding no thread
    /// meanwhile (the reaper resumes the caller): what async code uses, so that no thread of
    /// Swift's cooperative pool waits for a child. Returns at once for a child never started.
    package func exited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = lock.withLock {
                // Never started (or its start failed): there is nothing to wait for.
                if pid == 0 || handled { return true }
                waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Waits until the child has ended, blocking the calling thread (for code that is not async).
    package func waitUntilExit() {
        lock.lock()
        while ended == nil { lock.wait() }
        lock.unlock()
    }

    private func reap(_ child: pid_t) {
        let status = SystemCall.wait(for: child) ?? 0
        let signal = status & 0x7f
        let result: (Int32, Process.TerminationReason) = signal == 0 ? ((status >> 8) & 0xff, .exit) : (signal, .uncaughtSignal)
        lock.withLock {
            ended = result
            lock.broadcast()
        }
        terminationHandler?(self)
        let resumed = lock.withLock {
            handled = true
            defer { waiters = [] }
            return waiters
        }
        for waiter in resumed { waiter.resume() }
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does not
    /// declare.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    private static func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
        let pointers = strings.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        return body(pointers)
    }
}

/// A child process that could not be started, in words.
package struct SpawnFailure: Error, CustomStringConvertible {
    /// What went wrong.
    package var description: String

    init(_ description: String) { self.description = description }
}
