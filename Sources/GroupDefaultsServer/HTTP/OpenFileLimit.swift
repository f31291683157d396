import Glibc
import Logging

/// The process's open-file limit, raised at start as far as the system allows, and the connections
/// it leaves room for.
enum OpenFileLimit {
    /// Descriptors kept for everything but client connections: the store, PostgreSQL's pool and
    /// listening connection, logs, the listening socket.
    static let reserved = 256

    /// Raises the soft limit to the hard one, then returns `wanted`, or fewer if the limit cannot
    /// hold that many connections beside `reserved` (logged as a warning).
    static func connectionsAllowed(wanted: Int, logger: Logger) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return wanted }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let room = Int(clamping: limit.rlim_cur) - reserved  // RLIM_INFINITY is UInt.max: clamped to Int.max
        guard room < wanted else { return wanted }
        let allowed = max(room, 16)
        logger.warning("the open-file limit (\(limit.rlim_cur)) leaves room for \(allowed) connections, fewer than the \(wanted) configured")
        return allowed
    }
}
