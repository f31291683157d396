import Foundation
import Glibc

/// The real `groupdefaults-server` executable, started on loopback for the benchmark.
final class ServerProcess {
    let port: Int
    private let child: Spawn.Child

    var pid: pid_t { child.pid }
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// `serve --port 0 --log-level warning --rate-limit …` with `storage` (`--data-dir DIR` or
    /// `--postgres-url URL`); returns once it printed its `listening on` line. The rate limit is out
    /// of reach: a 429 would only hide what is measured.
    init(executable: String, storage: [String]) throws {
        child = try Spawn.start(executable, ["serve", "--port", "0", "--log-level", "warning", "--rate-limit", "10000000"] + storage,
                                captureOutput: true)
        let prefix = "listening on http://127.0.0.1:"
        guard let line = child.readLine(), line.hasPrefix(prefix), let port = Int(line.dropFirst(prefix.count)) else {
            throw BenchError("\(executable) did not announce its port")
        }
        self.port = port
    }

    /// `token create … --account bench`: a token for every suite.
    static func createToken(executable: String, storage: [String]) throws -> String {
        let result = try Spawn.run(executable, ["token", "create", "--account", "bench"] + storage, captureOutput: true)
        let token = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        guard result.status == 0, !token.isEmpty else { throw BenchError("token create failed (exit \(result.status))") }
        return token
    }

    /// SIGTERM, then waits for the exit (which ends every stream and long-poll first).
    func stop() throws {
        kill(child.pid, SIGTERM)
        let result = try child.wait()
        guard result.status == 0 else { throw BenchError("the server exited with status \(result.status)") }
    }

    /// The server's resident memory, VmRSS of /proc/PID/status, in KiB.
    func residentKiB() throws -> Double {
        try ProcessStats.residentKiB(of: pid)
    }
}

/// What /proc and getrusage say about processes: memory and CPU time.
enum ProcessStats {
    static func residentKiB(of pid: pid_t) throws -> Double {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Double($0) })
        else { throw BenchError("no VmRSS in /proc/\(pid)/status") }
        return kib
    }

    /// User + system CPU seconds of a process (from /proc/PID/stat, in clock ticks), 0 if it is gone.
    static func cpuSeconds(of pid: pid_t) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")")
        else { return 0 }
        // After "pid (comm) ": state is field 3; utime and stime are fields 14 and 15.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// This process's user + system CPU seconds.
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// CPU seconds of every process named `postgres` (the throwaway server and its backends).
    static func postgresCPUSeconds() -> Double {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.reduce(0) { total, pid in
            guard let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8),
                  comm.hasPrefix("postgres")
            else { return total }
            return total + cpuSeconds(of: pid)
        }
    }

    /// Raises this process's soft limit on open files to its hard limit (servers started after it
    /// inherit it): 1,000 event streams take 1,000 sockets on each side.
    static func raiseOpenFileLimit(atLeast needed: Int) throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        guard limit.rlim_cur >= rlim_t(needed) else {
            throw BenchError("at most \(limit.rlim_cur) open files (hard limit); \(needed) are needed: raise `ulimit -Hn`")
        }
    }
}
