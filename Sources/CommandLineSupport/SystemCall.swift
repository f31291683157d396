import Glibc

/// Runs `call`, a system call that returns a byte count, again for as long as it fails with
/// `EINTR`; returns its last result (negative: failed, `errno` says why). This module's one place
/// for `EINTR`.
@inline(__always)
func retryingEINTR(_ call: () -> Int) -> Int {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}
