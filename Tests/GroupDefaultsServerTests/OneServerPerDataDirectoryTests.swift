import Foundation
import Glibc
import ServerLaunching
import TestSupport
import Testing

/// Two real server processes on one data directory: the second is refused at start, in one line
/// naming the first one's process, while the server's commands still use the store beside the
/// running server; once the first stops, a server starts there again.
@Suite("One server per data directory")
struct OneServerPerDataDirectoryTests {
    @Test("a second server on a data directory in use is refused in one line naming the first one's process; commands still work beside it")
    func secondServerRefused() async throws {
        let directory = ServerTool.temporaryDirectory("gds-one-server")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try await ServerProcess(dataDirectory: directory)
        let pid = first.process.processIdentifier

        let second = try await runProcess(ServerTool.executable, ["serve", "--data-dir", directory, "--port", "0"], timeLimit: .seconds(30))
        #expect(second.status == 1, "\(second)")
        #expect(second.stdout.isEmpty, "it never listened: \(second.stdout)")
        #expect(
            second.stderr
                == "groupdefaults-server: another server (process \(pid)) is serving the data directory \(directory): stop it, or give this one another --data-dir\n",
            "\(second.stderr)"
        )
        // The first one is still serving, and a command uses the store beside it.
        _ = try await ServerTool.createToken(directory)
        let health = try await Curl.run(["-o", "/dev/null", "-w", "%{http_code}", "\(first.url)/v1/health"])
        #expect(health.stdout == "200")

        await first.stop()
        let again = try await ServerProcess(dataDirectory: directory)
        let lockFile = try String(contentsOfFile: directory + "/server.lock", encoding: .utf8)
        #expect(lockFile == "\(again.process.processIdentifier)\n", "the lock names the server that holds it")
        await again.stop()
    }
}
