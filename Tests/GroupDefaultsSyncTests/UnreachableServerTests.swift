import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import TestSupport
import Testing

/// A server that cannot be reached, with the real `groupdefaults-sync`: each cause is one line in
/// words, at once (not after a minute of retries), and `run` keeps trying, logging the same words.
@Suite("Unreachable servers", .timeLimit(.minutes(2)))
struct UnreachableServerTests {
    /// The tail of the line of a one-shot step that got no answer.
    static let pendingKept = "; nothing pending was lost: try again later"
    /// The tail when waiting will not help (an unknown host, TLS that cannot work with the URL).
    /// (The command repeats the `--directory` the tool was given: pasted as is, it configures that
    /// device's suite.)
    static func checkTheURL(_ device: ToolDevice) -> String {
        "; nothing pending was lost: check the server's URL (`groupdefaults-sync configure --directory \(device.directory.path) SUITE --server URL --token-file PATH`)"
    }

    /// One line `groupdefaults-sync: <expected><tail>`, with no type names, build paths, errno or
    /// unbalanced brackets, from a command that took less than `within`.
    private func expectOneLine(
        _ result: (status: Int32, stdout: String, stderr: String),
        _ expected: String,
        tail: String = pendingKept,
        took: Duration,
        within: Duration,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == 1, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr == "groupdefaults-sync: \(expected)\(tail)\n", sourceLocation: sourceLocation)
        #expect(
            !result.stderr.contains(".build") && !result.stderr.contains("Error") && !result.stderr.contains("errno"),
            sourceLocation: sourceLocation
        )
        #expect(result.stderr.filter { $0 == "(" }.count == result.stderr.filter { $0 == ")" }.count, sourceLocation: sourceLocation)
        #expect(took < within, "took \(took)", sourceLocation: sourceLocation)
    }

    /// Configures the device for `url` in this process (as `configure` stores it, without asking
    /// the server), writes a change, then runs `sync ARGUMENTS…`, timed.
    private func syncAgainst(
        _ url: String,
        _ device: ToolDevice,
        _ arguments: [String] = []
    ) async throws
        -> (result: (status: Int32, stdout: String, stderr: String), took: Duration)
    {
        let defaults = try device.open()
        try SyncSettings(server: try #require(URL(string: url)), tokenFile: try device.tokenFile("tok_unused")).store(in: defaults)
        defaults.set("bell.aiff", forKey: "sound")
        let start = ContinuousClock.now
        let result = try await device.sync("sync", arguments)
        return (result, ContinuousClock.now - start)
    }

    /// `configure SUITE --server URL ARGUMENTS…` on a fresh device, timed: it asks the server first.
    private func configureAgainst(
        _ url: String,
        _ arguments: [String] = []
    ) async throws
        -> (result: (status: Int32, stdout: String, stderr: String), took: Duration)
    {
        let device = ToolDevice("group.configure.unreachable")
        defer { device.remove() }
        let token = try device.tokenFile("tok_unused")
        let start = ContinuousClock.now
        let result = try await device.sync("configure", ["--server", url, "--token-file", token] + arguments)
        return (result, ContinuousClock.now - start)
    }

    /// The tail of `configure`'s line when it cannot ask the server.
    static let nothingChanged = "; configure asks the server how it holds group.configure.unreachable, and nothing was changed: try again later"
    /// As `nothingChanged`, when waiting will not help.
    static let checkServer = "; configure asks the server how it holds group.configure.unreachable, and nothing was changed: check --server"

    @Test("a refused connection: one line saying so, at once; status names the cause too; run keeps retrying and logs it")
    func refused() async throws {
        let device = ToolDevice("group.refused")
        defer { device.remove() }
        let port = try closedPort()
        let url = "http://127.0.0.1:\(port)"
        let (result, took) = try await syncAgainst(url, device)
        expectOneLine(result, "cannot reach \(url): connection refused", took: took, within: .seconds(10))
        #expect(try device.open().pendingCount() == 1, "nothing pending was lost")

        let status = try await device.sync("status")
        #expect(status.stdout.contains("name unknown: cannot reach \(url): connection refused"), "\(status.stdout)")
        #expect(status.stdout.contains("state: offline: cannot reach \(url): connection refused"), "the failed sync was recorded: \(status.stdout)")
        #expect(status.status == 1, "offline needs attention: \(status)")

        let (configured, configureTook) = try await configureAgainst(url)
        expectOneLine(configured, "cannot reach \(url): connection refused", tail: Self.nothingChanged, took: configureTook, within: .seconds(10))

        let run = try device.start("run", ["--log-level", "warning"])
        defer { run.signal(SIGKILL) }
        #expect(
            await eventually { run.stderr.components(separatedBy: "cannot reach \(url): connection refused").count > 2 },
            "retried, in the same words: \(run.stderr)"
        )
        #expect(run.isRunning)
        #expect(await run.terminate().status == 0)
    }

    @Test("an unknown host: one line naming it, at once")
    func unknownHost() async throws {
        let device = ToolDevice("group.unknown.host")
        defer { device.remove() }
        let (result, took) = try await syncAgainst("http://no-such-host.invalid:8080", device)
        expectOneLine(
            result,
            "cannot reach http://no-such-host.invalid:8080: unknown host no-such-host.invalid",
            tail: Self.checkTheURL(device),
            took: took,
            within: .seconds(10)
        )
        let (configured, configureTook) = try await configureAgainst("http://no-such-host.invalid:8080")
        expectOneLine(
            configured,
            "cannot reach http://no-such-host.invalid:8080: unknown host no-such-host.invalid",
            tail: Self.checkServer,
            took: configureTook,
            within: .seconds(10)
        )
    }

    @Test("https:// to a plain HTTP server, and a certificate that does not verify: one line each, at once; --ca-file makes it verify")
    func tls() async throws {
        try await SyncServer.with { server in
            let device = ToolDevice("group.tls.plain")
            defer { device.remove() }
            let url = "https://127.0.0.1:\(server.port)"
            let (result, took) = try await syncAgainst(url, device)
            expectOneLine(
                result,
                "cannot reach \(url): the server does not speak TLS (its URL may be http://, not https://)",
                tail: Self.checkTheURL(device),
                took: took,
                within: .seconds(10)
            )
            let (configured, configureTook) = try await configureAgainst(url)
            expectOneLine(
                configured,
                "cannot reach \(url): the server does not speak TLS (its URL may be http://, not https://)",
                tail: Self.checkServer,
                took: configureTook,
                within: .seconds(10)
            )
        }

        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gds-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificate = directory + "/cert.pem"
        let key = directory + "/key.pem"
        let openssl = try await BuiltExecutable.run(
            URL(fileURLWithPath: "/usr/bin/openssl"),
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            ]
        )
        #expect(openssl.status == 0, "\(openssl.stderr)")
        let server = try await ServerProcess(dataDirectory: directory + "/data", extraArguments: ["--tls-cert", certificate, "--tls-key", key])
        defer { server.signal(SIGKILL) }
        let url = "https://127.0.0.1:\(server.port)"
        let device = ToolDevice("group.tls.unverified")
        defer { device.remove() }
        let (result, took) = try await syncAgainst(url, device)
        expectOneLine(
            result,
            "cannot reach \(url): its TLS certificate does not verify: it is not signed by an authority this device trusts",
            tail: Self.checkTheURL(device),
            took: took,
            within: .seconds(10)
        )

        let token = try await ServerTool.createToken(directory + "/data")
        let (untrusted, untrustedTook) = try await configureAgainst(url)
        expectOneLine(
            untrusted,
            "cannot reach \(url): its TLS certificate does not verify: it is not signed by an authority this device trusts",
            tail: Self.checkServer,
            took: untrustedTook,
            within: .seconds(10)
        )
        let trusted = try await device.sync(
            "configure",
            [
                "--server", url, "--token-file", try device.tokenFile(token, name: "real"),
                "--ca-file", certificate,
            ]
        )
        #expect(trusted.status == 0, "\(trusted.stderr)")
        let synced = try await device.sync("sync")
        #expect(synced.status == 0 && synced.stdout.contains("pushed 1"), "\(synced)")
    }

    @Test("a server that accepts the connection and never answers: one line, after --answer-timeout; over TLS, after --connect-timeout")
    func silent() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let device = ToolDevice("group.silent")
        defer { device.remove() }
        let url = "http://127.0.0.1:\(listener.port)"
        let (result, took) = try await syncAgainst(url, device, ["--answer-timeout", "2"])
        expectOneLine(
            result,
            "cannot reach \(url): it accepted the connection but did not answer within 2 seconds",
            took: took,
            within: .seconds(12)
        )
        #expect(took >= .seconds(2))

        let (configured, configureTook) = try await configureAgainst(url, ["--answer-timeout", "1"])
        expectOneLine(
            configured,
            "cannot reach \(url): it accepted the connection but did not answer within 1 second",
            tail: Self.nothingChanged,
            took: configureTook,
            within: .seconds(10)
        )

        let tlsURL = "https://127.0.0.1:\(listener.port)"
        let (overTLS, tlsTook) = try await configureAgainst(tlsURL, ["--connect-timeout", "1"])
        expectOneLine(
            overTLS,
            "cannot reach \(tlsURL): no connection within 1 second",
            tail: Self.nothingChanged,
            took: tlsTook,
            within: .seconds(10)
        )
    }

    @Test("--connect-timeout and --answer-timeout take a positive number of seconds")
    func badTimeouts() async throws {
        let device = ToolDevice("group.timeouts")
        defer { device.remove() }
        for arguments in [["--connect-timeout", "0"], ["--answer-timeout", "-1"]] {
            let result = try await device.sync("sync", arguments)
            #expect(result.status != 0 && result.stderr.contains(arguments[0]), "\(result)")
        }
    }
}

/// A port on 127.0.0.1 on which nothing listens (bound, then closed).
func closedPort() throws -> Int {
    let listener = try SilentListener()
    let port = listener.port
    listener.close()
    return port
}
