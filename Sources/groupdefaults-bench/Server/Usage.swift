import Foundation
import Glibc

/// What a stretch of the benchmark used: CPU of the server processes, of the benchmark itself and
/// of PostgreSQL, and the data disk's writes and cache flushes.
struct UsageMeter {
    var serverPIDs: [pid_t]
    var includesPostgres: Bool
    var disk: DiskStats.Device?

    func start() -> Running {
        Running(meter: self, wall: Clock.nanoseconds(), servers: serverSeconds(), bench: ProcessStats.ownCPUSeconds(),
                postgres: includesPostgres ? ProcessStats.postgresCPUSeconds() : [:], disk: disk.flatMap(DiskStats.read))
    }

    fileprivate func serverSeconds() -> Double { serverPIDs.reduce(0) { $0 + ProcessStats.cpuSeconds(of: $1) } }

    struct Running {
        let meter: UsageMeter
        let wall: Int64, servers: Double, bench: Double, postgres: [pid_t: Double]
        let disk: DiskStats?

        func stop() -> Usage {
            let elapsed = Double(Clock.nanoseconds() - wall) / 1e9
            var diskUse: Usage.Disk?
            if let before = disk, let device = meter.disk, let after = DiskStats.read(device) {
                let writes = Double(after.writes - before.writes)
                diskUse = Usage.Disk(
                    writesPerSecond: writes / elapsed, flushesPerSecond: Double(after.flushes - before.flushes) / elapsed,
                    millisecondsPerWrite: writes > 0 ? Double(after.writeMilliseconds - before.writeMilliseconds) / writes : 0)
            }
            return Usage(server: (meter.serverSeconds() - servers) / elapsed, bench: (ProcessStats.ownCPUSeconds() - bench) / elapsed,
                         postgres: meter.includesPostgres ? ProcessStats.cpuSeconds(since: postgres, now: ProcessStats.postgresCPUSeconds()) / elapsed : nil,
                         disk: diskUse)
        }
    }
}

/// Cores busy on average (1.0 is one core all the time), and the disk's work per second.
struct Usage: Encodable {
    var server: Double
    var bench: Double
    var postgres: Double?
    var disk: Disk?

    struct Disk: Encodable {
        var writesPerSecond: Double
        var flushesPerSecond: Double
        /// The device's own time per completed write (queueing included).
        var millisecondsPerWrite: Double
    }
}

/// A block device's counters from /proc/diskstats.
struct DiskStats {
    var writes: Int
    var writeMilliseconds: Int
    var flushes: Int

    struct Device {
        var major: UInt32
        var minor: UInt32
    }

    /// The whole disk that holds `path` (its partition's parent, if any), or nil if none shows in
    /// /proc/diskstats (a file system in memory).
    static func device(holding path: String) -> Device? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let number = UInt64(info.st_dev)  // glibc's major() and minor(), which are macros
        var device = Device(major: UInt32(truncatingIfNeeded: ((number >> 8) & 0xfff) | ((number >> 32) & ~0xfff)),
                            minor: UInt32(truncatingIfNeeded: (number & 0xff) | ((number >> 12) & ~0xff)))
        // A partition: count the disk it belongs to (/sys/dev/block/M:m/../dev).
        if let parent = try? String(contentsOfFile: "/sys/dev/block/\(device.major):\(device.minor)/../dev", encoding: .utf8) {
            let numbers = parent.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ":").compactMap { UInt32($0) }
            if numbers.count == 2 { device = Device(major: numbers[0], minor: numbers[1]) }
        }
        return read(device) != nil ? device : nil
    }

    static func read(_ device: Device) -> DiskStats? {
        guard let text = try? String(contentsOfFile: "/proc/diskstats", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            // major minor name, then: reads, merged, sectors, ms; writes (7th field), merged, sectors, ms writing (10th);
            // …; flushes completed (20th, since Linux 5.5).
            guard fields.count >= 20, UInt32(fields[0]) == device.major, UInt32(fields[1]) == device.minor,
                  let writes = Int(fields[7]), let milliseconds = Int(fields[10]), let flushes = Int(fields[19])
            else { continue }
            return DiskStats(writes: writes, writeMilliseconds: milliseconds, flushes: flushes)
        }
        return nil
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

    /// CPU seconds of every process named `postgres` (the throwaway server and its backends), by pid.
    static func postgresCPUSeconds() -> [pid_t: Double] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var seconds: [pid_t: Double] = [:]
        for pid in entries.compactMap({ pid_t($0) }) {
            guard let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8), comm.hasPrefix("postgres") else { continue }
            seconds[pid] = cpuSeconds(of: pid)
        }
        return seconds
    }

    /// The CPU seconds processes used between two readings: those of processes that ended
    /// meanwhile are lost (a backend that exited), those of new ones count from zero.
    static func cpuSeconds(since before: [pid_t: Double], now: [pid_t: Double]) -> Double {
        now.reduce(0) { total, process in total + max(0, process.value - (before[process.key] ?? 0)) }
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
