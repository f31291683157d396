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

    /// Runs `call`, which reports a failure as its result (an error number, as `clock_nanosleep`
    /// and the `pthread` calls do), again for as long as that result is `EINTR`; returns the last.
    @inlinable
    package static func retryingReturnedEINTR(_ call: () -> Int32) -> Int32 {
        while true {
            let result = call()
            if result != EINTR { return result }
        }
    }

    /// Writes all of `bytes` to `fd`, again after `EINTR` and after a short write: 0 once every
    /// byte is written, else the `errno` of the write that failed (`EIO` for one that wrote
    /// nothing).
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        var offset = 0
        while offset < bytes.count {
            let written = retryingEINTR { write(fd, bytes.baseAddress! + offset, bytes.count - offset) }
            if written < 0 { return errno }
            if written == 0 { return EIO }
            offset += written
        }
        return 0
    }

    /// `fsync(fd)`: 0 once what was written to `fd` is on the disk, else the `errno` that says why
    /// not (a caller reports it: data it calls written may be lost in a power cut).
    package static func flush(_ fd: Int32) -> Int32 {
        retryingEINTR { fsync(fd) } == 0 ? 0 : errno
    }

    /// Flushes the entries of `directory` (a file made, renamed or removed there survives a power
    /// cut once this returns 0); else the `errno` that says why not.
    package static func flushDirectory(_ directory: String) -> Int32 {
        let fd = retryingEINTR { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return flush(fd)
    }

    /// Waits for the child `pid` to end (again after `EINTR`); its `waitpid` status, or nil when
    /// it cannot be waited for (`errno` says why).
    package static func wait(for pid: Int32) -> Int32? {
        var status: Int32 = 0
        return retryingEINTR { waitpid(pid, &status, 0) } < 0 ? nil : status
    }

    /// Releases the `flock` of `fd`. It cannot fail for a descriptor that holds the lock (an
    /// unlock takes no memory and never waits), so a failure is a bug in the caller.
    @inlinable
    package static func unlock(_ fd: Int32) {
        let result = retryingEINTR { flock(fd, LOCK_UN) }
        precondition(result == 0, "flock(LOCK_UN) failed: errno \(errno)")
    }
}
