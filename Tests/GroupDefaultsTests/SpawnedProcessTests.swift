import Foundation
import Glibc
import ServerLaunching
import Synchronization
import Testing

/// The tests' and launchers' way to start a child (`SpawnedProcess`), where Foundation's `Process`
/// crashed: with thousands of descriptors open, from many threads at once.
@Suite("Child processes")
struct SpawnedProcessTests {
    /// 3,000 extra descriptors open (Foundation's `Process.run()` read past its buffer above about
    /// 1,300), 16 children started at once: each runs, sees only stdin, stdout and stderr, and its
    /// status and output come back.
    @Test("with 3,000 descriptors open, children start from many threads at once and inherit only 0, 1 and 2")
    func manyDescriptorsManyChildren() async throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        try #require(limit.rlim_cur >= 3_500, "the descriptor limit (\(limit.rlim_cur)) leaves no room for the test")
        let extra = (0..<3_000).map { _ in open("/dev/null", O_RDONLY) }  // not close-on-exec
        defer { for descriptor in extra { close(descriptor) } }
        #expect(extra.allSatisfy { $0 >= 0 })

        let results = await withTaskGroup(of: (status: Int32, listed: String)?.self) { group in
            for index in 0..<16 {
                group.addTask {
                    let output = Pipe()
                    let process = SpawnedProcess()
                    process.executableURL = URL(fileURLWithPath: "/bin/sh")
                    process.arguments = ["-c", "ls /proc/self/fd; exit \(index % 3)"]
                    process.standardOutput = output
                    process.standardInput = nil
                    do { try process.run() } catch { return nil }
                    await process.exited()
                    // Ended, the child wrote all it will (a few lines: within the pipe's buffer).
                    let data = output.fileHandleForReading.readDataToEndOfFile()
                    #expect(process.terminationReason == .exit && process.terminationStatus == Int32(index % 3))
                    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 16 && results.allSatisfy { $0 != nil })
        for case let result? in results {
            // `ls` itself opens one directory: 0, 1, 2 and that one.
            let listed = result.listed.split(separator: "\n").compactMap { Int($0) }
            #expect(listed.count == 4 && Array(listed.prefix(3)) == [0, 1, 2], "\(result.listed)")
        }
    }

    /// A signal's end is told apart from an exit, and the termination handler runs once. (SIGKILL:
    /// the child inherits the calling thread's mask, and the test runner's threads block SIGTERM.)
    @Test("a child ended by a signal says so; the termination handler runs before `exited()` returns")
    func endedBySignal() async throws {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["60"]
        let handled = Mutex(0)
        process.terminationHandler = { _ in handled.withLock { $0 += 1 } }
        try process.run()
        #expect(process.isRunning)
        process.signalIfRunning(SIGKILL)
        await process.exited()
        #expect(handled.withLock { $0 } == 1)
        #expect(!process.isRunning)
        #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL)
        await process.exited()  // once ended, at once
        process.waitUntilExit()  // the blocking wait, for code that is not async
    }

    /// `FileHandle.nullDevice` (a handle without a descriptor here) and nil are /dev/null: the child
    /// reads nothing, and what it writes goes nowhere.
    @Test("the null device as stdin, stdout or stderr is /dev/null")
    func nullDevice() async throws {
        for stdin in [FileHandle.nullDevice, nil] as [FileHandle?] {
            let output = Pipe()
            let process = SpawnedProcess()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "readlink /proc/self/fd/0; cat; echo hidden >&2"]
            process.standardInput = stdin
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            await process.exited()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(text == "/dev/null\n" && process.terminationStatus == 0, "\(text)")
        }
    }

    /// An executable that does not exist is a thrown error naming it, not a crash.
    @Test("a missing executable is an error that names it")
    func missingExecutable() {
        let process = SpawnedProcess()
        process.executableURL = URL(fileURLWithPath: "/nonexistent/tool")
        #expect { try process.run() } throws: { "\($0)".contains("/nonexistent/tool") }
        #expect(!process.isRunning)
    }
}
