import CommandLineSupport
import Foundation
import Glibc

/// A temporary directory that holds every store of a run, and HOME/XDG for Foundation.
struct Sandbox {
    static let variable = "GROUPDEFAULTS_BENCH_SANDBOX"

    let root: String

    /// The sandbox this process runs in, if its parent made one.
    static var current: Sandbox? {
        ProcessInfo.processInfo.environment[variable].map(Sandbox.init(root:))
    }

    /// Makes a sandbox, runs this executable again inside it with `arguments`, removes it and
    /// returns the child's exit status. Foundation reads HOME and XDG_CONFIG_HOME once at
    /// start-up, so only a new process can point UserDefaults' files into the sandbox.
    static func runInside(arguments: [String]) throws -> Int32 {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        var template = Array("\(base)/groupdefaults-bench.XXXXXX".utf8CString)
        guard mkdtemp(&template) != nil else {
            throw BenchError("cannot create a temporary directory in \(base): \(String(cString: strerror(errno)))")
        }
        let root = String(cBuffer: template)
        defer { try? FileManager.default.removeItem(atPath: root) }

        // Ctrl-C ends the child; this process waits for it and removes the sandbox.
        setSignals([SIGINT, SIGTERM], blocked: true)

        let home = "\(root)/home"
        let result = try Spawn.run(
            Spawn.executablePath(),
            arguments,
            environment: [
                variable: root,
                "HOME": home,
                "XDG_CONFIG_HOME": "\(home)/.config",
                "XDG_DATA_HOME": "\(home)/.local/share",
                "XDG_CACHE_HOME": "\(home)/.cache",
                "GROUPDEFAULTS_DIR": "\(root)/default-directory",
            ],
            captureOutput: false
        )
        return result.status
    }

    /// A new, empty directory for one store (mode 0700).
    func makeDirectory(_ name: String) throws -> String {
        let path = "\(root)/\(name)"
        try FileManager.default.createDirectory(
            atPath: path,
            withIntermediateDirectories: false,
            attributes: [.posixPermissions: 0o700]
        )
        return path
    }
}
