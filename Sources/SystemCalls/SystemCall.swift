import Glibc

/// The package's system calls that can be interrupted or fail, made through one place: `EINTR`
/// is retried here and nowhere else (swift-system's rule, for calls it does not wrap, such as
/// `flock` and `poll`), and every caller checks the result. `close` is never retried: on Linux the
/// descriptor is released even when it reports `EINTR`, and another thread may already reuse it.
package enum SystemCall {
    /// Runs `call` again for as long as it fails with `EINTR`; returns its last result (negative:
    /// failed, `errno` says why).
    @inlinable
    @inline(__always)
    package static func retryingEINTR(_ call: () -> Int32) -> Int32 {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }

    /// `retryingEINTR` for calls that return a byte count (`read`, `pread`, `write`).
    @inlinable
    @inline(__always)
    package static func retryingEINTR(_ call: () -> Int) -> Int {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }

    /// Releases the `flock` of `fd`. It cannot fail for a descriptor that holds the lock (an
    /// unlock takes no memory and never waits), so a failure is a bug in the caller.
    @inlinable
    package static func unlock(_ fd: Int32) {
        let result = retryingEINTR { flock(fd, LOCK_UN) }
        precondition(result == 0, "flock(LOCK_UN) failed: errno \(errno)")
    }
}
