#if canImport(Glibc)
package import Glibc
#elseif canImport(Darwin)
package import Darwin
#endif

/// Ends the process with status 0 at SIGINT or SIGTERM, and unblocks both: they may arrive blocked
/// from whatever started this process. For tools that follow changes until stopped, writing their
/// output line by line, unbuffered, so that ending at a signal loses nothing.
package func exitOnInterruptOrTermination() {
    signal(SIGINT) { _ in _exit(0) }
    signal(SIGTERM) { _ in _exit(0) }
    setSignals([SIGINT, SIGTERM], blocked: false)
}

/// Blocks or unblocks `signals` in the calling thread (a process it starts inherits its mask), and
/// returns the mask as it was before, for `pthread_sigmask(SIG_SETMASK, …)`.
@discardableResult
package func setSignals(_ signals: [Int32], blocked: Bool) -> sigset_t {
    var set = sigset_t()
    sigemptyset(&set)
    for number in signals { sigaddset(&set, number) }
    var previous = sigset_t()
    pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &set, &previous)
    return previous
}
