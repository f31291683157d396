import Glibc
package import SystemCalls

// The LMDB layer's and the core's checked calls: a failure thrown as `LMDBError`, with `errno`.
extension SystemCall {
    /// Runs `call` (again while it fails with `EINTR`) and returns its result; a failure is thrown
    /// as `errno`.
    @discardableResult
    package static func checked(_ call: () -> Int32) throws(LMDBError) -> Int32 {
        let result = retryingEINTR(call)
        if result < 0 { throw LMDBError(errno) }
        return result
    }

    /// Takes the exclusive `flock` of `fd`, waiting for it.
    package static func lock(_ fd: Int32) throws(LMDBError) {
        try checked { flock(fd, LOCK_EX) }
    }
}
