import Dispatch
import Foundation
internal import GroupDefaultsLMDB
import Synchronization
import SystemCalls

/// The suite's push lock: held by whoever pushes the suite's pending changes (or reads the server's
/// snapshot again, which must not race a push), across processes and engines. Without it, two
/// `sync`s of one suite (or a `sync` beside a `run`) read the same pending changes, store each its
/// own in-flight batch over the other's, push the same changes twice and both report them.
///
/// It is an open-file-description lock (`F_OFD_SETLKW`) on a byte of the suite's sidecar file past
/// its end (`pushLockOffset`, beside the byte of `DurableCopy`'s point lock and the watchers'
/// slots), taken on a descriptor of its own: it excludes another engine of the same process too,
/// and the kernel drops it when its holder's process ends, however it ends. Released by `release()`
/// (or when the lock is freed).
package final class SyncPushLock: Sendable {
    private let fd: Int32
    private let released = Atomic(false)

    init(fd: Int32) { self.fd = fd }

    /// Gives the lock back; the next waiting push goes on. Later calls do nothing.
    package func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        Glibc.close(fd)
    }

    deinit { release() }

    /// The byte of the sidecar file whose lock is the push lock (the watchers' slots are bytes
    /// 4096..<4600, the durability points' `1 << 20`).
    static let pushLockOffset: off_t = (1 << 20) + 1

    /// `F_OFD_SETLK` and `F_OFD_SETLKW`, which Swift's Glibc module does not export (they need
    /// _GNU_SOURCE).
    private static let setOFDLock: Int32 = 37
    private static let waitForOFDLock: Int32 = 38

    /// Locks `fd`'s push byte; with `waiting`, blocks until it can. Returns false when it is held
    /// elsewhere (without `waiting`); throws the errno of any other failure.
    static func lock(_ fd: Int32, waiting: Bool) throws -> Bool {
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = pushLockOffset
        lock.l_len = 1
        let result = SystemCall.retryingEINTR { fcntl(fd, waiting ? waitForOFDLock : setOFDLock, &lock) }
        if result == 0 { return true }
        if !waiting, errno == EAGAIN || errno == EACCES { return false }
        throw LMDBError(errno)
    }
}

extension SharedDefaults {
    /// Takes the suite's push lock (`SyncPushLock`), waiting, without blocking a thread of Swift's
    /// pool, while another process or engine holds it; `waiting` is called first if it must wait.
    ///
    /// - Throws: `CancellationError` if the task is cancelled while it waits (the lock is then
    ///   given back as soon as the waiting thread gets it); `SharedDefaultsError` if the sidecar
    ///   cannot be opened or locked.
    package func takePushLock(waiting: @Sendable () -> Void = {}) async throws -> SyncPushLock {
        let path = store.path + "-notify"
        let fd = SystemCall.retryingEINTR { open(path, O_RDWR | O_CLOEXEC) }
        guard fd >= 0 else {
            let reason = String(cString: strerror(errno))
            throw SharedDefaultsError(.storageFailure, suite: suiteName, path: path, "cannot open the suite's sidecar for its push lock: \(reason)")
        }
        do {
            if try SyncPushLock.lock(fd, waiting: false) { return SyncPushLock(fd: fd) }
        } catch {
            Glibc.close(fd)
            throw SharedDefaultsError(.storageFailure, suite: suiteName, path: path, "cannot take the suite's push lock: \(error)")
        }
        waiting()
        // The wait blocks a thread of its own; a cancelled task stops waiting at once, and that
        // thread gives the lock back when it gets it.
        let waiter = Mutex<CheckedContinuation<SyncPushLock, any Error>?>(nil)
        let suite = suiteName
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SyncPushLock, any Error>) in
                waiter.withLock { $0 = continuation }
                // Cancelled before the continuation was stored: `onCancel` found none.
                if Task.isCancelled, let continuation = waiter.withLock({ $0.take() }) {
                    Glibc.close(fd)
                    continuation.resume(throwing: CancellationError())
                    return
                }
                DispatchQueue(label: "GroupDefaults.pushLock").async {
                    let outcome = Result { try SyncPushLock.lock(fd, waiting: true) }
                    guard let continuation = waiter.withLock({ $0.take() }) else {
                        Glibc.close(fd)  // cancelled meanwhile: the lock, if taken, goes with the descriptor
                        return
                    }
                    switch outcome {
                    case .success:
                        continuation.resume(returning: SyncPushLock(fd: fd))
                    case .failure(let error):
                        Glibc.close(fd)
                        continuation.resume(
                            throwing: SharedDefaultsError(.storageFailure, suite: suite, path: path, "cannot take the suite's push lock: \(error)")
                        )
                    }
                }
            }
        } onCancel: {
            waiter.withLock { $0.take() }?.resume(throwing: CancellationError())
        }
    }
}
