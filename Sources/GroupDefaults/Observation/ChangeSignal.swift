import Foundation
internal import GroupDefaultsLMDB
import Synchronization
import SystemCalls

/// Tells this process that another process may have committed to a suite. Each call of `onSignal`
/// only means "look at the log": observers read what changed from there, so a spurious or merged
/// signal loses nothing.
///
/// On Linux the signal is inotify on the suite's sidecar file, which writers read one byte of after
/// a commit (`IN_ACCESS`), when any process watches. A Darwin implementation would watch the same
/// file with kqueue (`DispatchSource.makeFileSystemObjectSource`); file systems without inotify get
/// `PollingSignal`.
protocol ChangeSignal: AnyObject, Sendable {
    /// Stops the signal and waits until its thread has ended and its descriptors are closed.
    func stop()
}

/// A thread that waits for something to do, and a pipe that stops it.
///
/// `stop()` may be called from the thread itself (a notification handler that ends the last
/// observation): it then returns at once, and the thread closes the pipe when its loop ends;
/// otherwise `stop()` waits for the thread to end and closes it. Either way the pipe's read end
/// is open whenever the stop byte is written (no SIGPIPE, no write to a reused descriptor).
/// `cleanup` runs on the thread, last.
private final class SignalThread: @unchecked Sendable {  // the descriptors are set once; `state` is locked
    private let stopPipe: (read: Int32, write: Int32)
    private let ended = DispatchSemaphore(value: 0)
    private let state = State()

    private final class State: Sendable {
        /// The thread's id, and whether it must close the pipe itself.
        let value = Mutex<(thread: pthread_t?, closesOnExit: Bool)>((nil, false))
    }

    /// Starts `loop(stopFD)`, which must return once `stopFD` is readable.
    init(name: String, _ loop: @escaping @Sendable (_ stopFD: Int32) -> Void, cleanup: @escaping @Sendable () -> Void) throws {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw LMDBError(errno) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let stopPipe = (read: fds[0], write: fds[1])
        self.stopPipe = stopPipe
        let thread = Thread { [ended, state] in
            state.value.withLock { $0.thread = pthread_self() }
            loop(stopPipe.read)
            cleanup()
            if state.value.withLock({ $0.closesOnExit }) {
                close(stopPipe.read)
                close(stopPipe.write)
            }
            ended.signal()
        }
        thread.name = name
        thread.start()
    }

    func stop() {
        var byte: UInt8 = 1
        _ = write(stopPipe.write, &byte, 1)
        let onThread = state.value.withLock { state in
            let here = state.thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            if here { state.closesOnExit = true }
            return here
        }
        if !onThread {
            ended.wait()
            close(stopPipe.read)
            close(stopPipe.write)
        }
    }
}

/// inotify on the sidecar file.
final class InotifySignal: ChangeSignal {
    private let thread: SignalThread

    /// nil when inotify cannot watch the file (a file system without it, or no descriptors left).
    convenience init?(sidecarPath: String, onSignal: @escaping @Sendable () -> Void, cleanup: @escaping @Sendable () -> Void) {
        self.init(watching: [(sidecarPath, UInt32(IN_ACCESS | IN_MODIFY))], onSignal: onSignal, cleanup: cleanup)
    }

    /// Signals when a file in one of `directories` is created, written, moved, removed or changes
    /// mode (the managed settings files); nil when inotify cannot watch them all, or none is given.
    convenience init?(directories: [String], onSignal: @escaping @Sendable () -> Void, cleanup: @escaping @Sendable () -> Void) {
        let events = IN_CREATE | IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB
        guard !directories.isEmpty else { return nil }
        self.init(watching: directories.map { ($0, UInt32(events)) }, onSignal: onSignal, cleanup: cleanup)
    }

    private init?(watching paths: [(String, UInt32)], onSignal: @escaping @Sendable () -> Void, cleanup: @escaping @Sendable () -> Void) {
        let inotify = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard inotify >= 0 else { return nil }
        for (path, mask) in paths where inotify_add_watch(inotify, path, mask) < 0 {
            close(inotify)
            return nil
        }
        do {
            thread = try SignalThread(
                name: "GroupDefaults inotify",
                { stopFD in
                    var fds = [
                        pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                        pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0),
                    ]
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while true {
                        guard SystemCall.retryingEINTR({ poll(&fds, 2, -1) }) >= 0 else { return }
                        if fds[1].revents != 0 { return }
                        if fds[0].revents != 0 {
                            // Drain every queued event: one look at the log covers them all.
                            var drained = 0
                            repeat {
                                drained = buffer.withUnsafeMutableBytes { bytes in
                                    SystemCall.retryingEINTR { read(inotify, bytes.baseAddress, bytes.count) }
                                }
                            } while drained > 0
                            onSignal()
                        }
                    }
                },
                cleanup: {
                    close(inotify)
                    cleanup()
                }
            )
        } catch {
            close(inotify)
            return nil
        }
    }

    func stop() {
        thread.stop()
    }
}

/// Polls for file systems without inotify: calls `probe` every `interval` and signals when the
/// value it returns (the log's last sequence number) changes.
final class PollingSignal: ChangeSignal {
    private let thread: SignalThread

    init(
        interval: Duration,
        probe: @escaping @Sendable () -> UInt64?,
        onSignal: @escaping @Sendable () -> Void,
        cleanup: @escaping @Sendable () -> Void
    ) throws {
        let milliseconds = Int32(clamping: max(1, interval.components.seconds * 1000 + interval.components.attoseconds / 1_000_000_000_000_000))
        // The first look happens now, before the caller reads the log: a commit after it is seen.
        let first = probe()
        thread = try SignalThread(
            name: "GroupDefaults polling",
            { stopFD in
                var last = first
                var fd = pollfd(fd: stopFD, events: Int16(POLLIN), revents: 0)
                while true {
                    let ready = poll(&fd, 1, milliseconds)
                    if ready > 0 { return }
                    let now = probe()
                    // A probe that fails wakes the observers too: they read the log and meet the error.
                    if now != last || now == nil {
                        last = now
                        onSignal()
                    }
                }
            },
            cleanup: cleanup
        )
    }

    func stop() {
        thread.stop()
    }
}
