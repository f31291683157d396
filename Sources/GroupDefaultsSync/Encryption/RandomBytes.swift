import Glibc
import GroupDefaultsWire
import Synchronization
import SystemCalls

/// Random bytes for nonces, from the kernel's generator (`/dev/urandom`) 4 KiB at a time rather
/// than a system call per nonce (a third of a seal's cost otherwise, measured with `perf` under
/// `Tools/bench sync --encrypt`). Fork-safe: a child process never uses bytes its parent had
/// buffered (a repeated nonce under one key would give the key stream away): every `fork()`
/// counts a generation (`pthread_atfork`), and the buffer belongs to the generation that filled it.
enum RandomBytes {
    private struct Pool {
        var bytes = [UInt8](repeating: 0, count: 4096)
        var used = 4096
        var generation = -1
    }

    private static let pool = Mutex(Pool())
    /// Forks seen by this process and its ancestors (a child inherits the count, then adds one).
    private static let forks = Atomic<Int>(0)
    private static let watchingForks: Bool = {
        pthread_atfork(nil, nil) { RandomBytes.forks.add(1, ordering: .sequentiallyConsistent) }
        return true
    }()

    /// `count` (at most 4096) bytes no other call of this process, nor of any other, gets; nil if
    /// the kernel's generator cannot be read (the caller then asks the system's generator itself).
    static func take(_ count: Int) -> [UInt8]? {
        precondition(count <= 4096)
        _ = watchingForks
        return pool.withLock { pool in
            let generation = forks.load(ordering: .sequentiallyConsistent)
            if pool.generation != generation || pool.used + count > pool.bytes.count {
                pool.generation = -1  // unusable until refilled whole
                let fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { return nil }
                defer { close(fd) }
                let filled = pool.bytes.withUnsafeMutableBytes { buffer in
                    var filled = 0
                    while filled < buffer.count {
                        let got = SystemCall.retryingEINTR { read(fd, buffer.baseAddress! + filled, buffer.count - filled) }
                        if got > 0 { filled += got } else { break }
                    }
                    return filled
                }
                guard filled == pool.bytes.count else { return nil }
                pool.used = 0
                pool.generation = generation
            }
            defer { pool.used += count }
            return Array(pool.bytes[pool.used..<pool.used + count])
        }
    }
}
