import Foundation
import Glibc

/// What a stretch of the benchmark used: CPU of the server processes, of the benchmark itself, of
/// our PostgreSQL and of everything else on the machine, and the data disk's writes and flushes.
struct UsageMeter {
    var serverPIDs: [pid_t]
    /// The throwaway PostgreSQL's postmaster: it and its children count as PostgreSQL.
    var postmaster: pid_t? = nil
    var disk: DiskStats.Device?

    fileprivate struct Reading {
        var wall = Clock.nanoseconds()
        var servers: Double
        var bench = ProcessStats.ownCPUSeconds()
        var postgres: [pid_t: Double]
        var machine = ProcessStats.machineBusySeconds()
        var disk: DiskStats?
    }

    fileprivate func read() -> Reading {
        Reading(
            servers: serverPIDs.reduce(0) { $0 + ProcessStats.cpuSeconds(of: $1) },
            postgres: postmaster.map(ProcessStats.cpuSecondsOfFamily) ?? [:],
            disk: disk.flatMap(DiskStats.read)
        )
    }

    func start() -> Running { Running(meter: self, before: read()) }

    struct Running {
        fileprivate let meter: UsageMeter
        fileprivate let before: Reading

        func stop() -> Usage {
            let after = meter.read()
            let elapsed = Double(after.wall - before.wall) / 1e9
            var diskUse: Usage.Disk?
            if let start = before.disk, let end = after.disk {
                let writes = Double(end.writes - start.writes)
                diskUse = Usage.Disk(
                    writesPerSecond: writes / elapsed,
                    flushesPerSecond: Double(end.flushes - start.flushes) / elapsed,
                    millisecondsPerWrite: writes > 0 ? Double(end.writeMilliseconds - start.writeMilliseconds) / writes : 0
                )
            }
            let server = (after.servers - before.servers) / elapsed
            let bench = (after.bench - before.bench) / elapsed
            let postgres = ProcessStats.cpuSeconds(since: before.postgres, now: after.postgres) / elapsed
            let machine = (after.machine - before.machine) / elapsed
            return Usage(
                server: server,
                bench: bench,
                postgres: meter.postmaster == nil ? nil : postgres,
                other: max(0, machine - server - bench - postgres),
                disk: diskUse
            )
        }
    }
}

/// Cores busy on average (1.0 is one core all the time), and the disk's work per second.
struct Usage: Encodable {
    var server: Double
    var bench: Double
    var postgres: Double?
    /// Every other process on the machine (another user's build or tests would show here).
    var other: Double
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
        var device = Device(
            major: UInt32(truncatingIfNeeded: ((number >> 8) & 0xfff) | ((number >> 32) & ~0xfff)),
            minor: UInt32(truncatingIfNeeded: (number & 0xff) | ((number >> 12) & ~0xff))
        )
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
            // major, minor, name; then reads, merged, sectors, ms reading; writes completed (index 7),
            // merged, sectors, ms writing (index 10); in flight, ms busy, weighted ms; four discard
            // counters; flushes completed (index 18, since Linux 5.5), ms flushing.
            guard fields.count >= 20, UInt32(fields[0]) == device.major, UInt32(fields[1]) == device.minor,
                let writes = Int(fields[7]), let milliseconds = Int(fields[10]), let flushes = Int(fields[18])
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

    /// This process's user + system CPU seconds, with those of the children it waited for (the
    /// load generator, wrk, counts as the benchmark once its run ended).
    static func ownCPUSeconds() -> Double {
        func seconds(_ who: __rusage_who) -> Double {
            var usage = rusage()
            getrusage(who.rawValue, &usage)
            func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
            return seconds(usage.ru_utime) + seconds(usage.ru_stime)
        }
        return seconds(RUSAGE_SELF) + seconds(RUSAGE_CHILDREN)
    }

    /// CPU seconds of a process and its children, by pid (a PostgreSQL postmaster and its backends).
    static func cpuSecondsOfFamily(_ parent: pid_t) -> [pid_t: Double] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        var seconds: [pid_t: Double] = [:]
        for pid in entries.compactMap({ pid_t($0) }) where pid == parent || parentPID(of: pid) == parent {
            seconds[pid] = cpuSeconds(of: pid)
        }
        return seconds
    }

    private static func parentPID(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")")
        else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }

    /// CPU seconds the whole machine spent busy (all cores; from /proc/stat, idle and iowait excluded).
    static func machineBusySeconds() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first, line.hasPrefix("cpu ")
        else { return 0 }
        // user nice system idle iowait irq softirq steal …
        let ticks = line.split(separator: " ").dropFirst().compactMap { Double($0) }
        guard ticks.count >= 8 else { return 0 }
        let busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]
        return busy / Double(sysconf(Int32(_SC_CLK_TCK)))
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
        if limit.rlim_cur < rlim_t(needed) {
            // Root may raise the hard limit too (up to the kernel's fs.nr_open).
            var raised = rlimit(rlim_cur: rlim_t(needed), rlim_max: rlim_t(needed))
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        guard limit.rlim_cur >= rlim_t(needed) else {
            throw BenchError(
                "at most \(limit.rlim_cur) open files per process here (the hard limit, which only a process allowed to raise it, "
                    + "such as root with CAP_SYS_RESOURCE, can raise); \(needed) are needed: raise `ulimit -Hn`, or ask for fewer"
            )
        }
    }
}
