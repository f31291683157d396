import Foundation
import Glibc
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import ServerLaunching
import TestSupport
import Testing

/// `GET /v1/suites/{suite}/events` against the real executable, read by curl as it arrives.
@Suite("Event stream (live)", .timeLimit(.minutes(2)))
struct EventStreamTests {
    private func temporaryDirectory() -> String { ServerTool.temporaryDirectory("gds-events") }

    private func createToken(_ directory: String) async throws -> String { try await ServerTool.createToken(directory) }

    private func push(_ port: Int, _ token: String, _ ops: [PushOp]) async throws {
        try await TestClient.withClient(host: "127.0.0.1", port: port) { client in
            let response = try await client.post("/v1/suites/group.s/push", headers: API.auth(token), body: API.push(ops))
            #expect(response.status == .ok)
        }
    }

    @Test(
        "changes arrive as events with their revisions as ids; Last-Event-ID resumes; heartbeats; revoking the token ends the stream; SIGTERM ends it cleanly"
    )
    func stream() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(dataDirectory: directory, extraArguments: ["--heartbeat", "1"])
        let token = try await createToken(directory)
        let url = "http://127.0.0.1:\(server.port)/v1/suites/group.s/events"

        let live = try Curl(["-H", "Authorization: Bearer \(token)", "-H", "Last-Event-ID: 0", url])
        try await push(server.port, token, [API.set("sound", "ring.caf"), API.delete("draft")])
        let first = await live.events(2)
        #expect(first.map(\.id) == ["1", "2"])
        let entries = try first.map { try JSONDecoder().decode(SyncEntry.self, from: Data($0.data.utf8)) }
        #expect(entries.map(\.key) == ["sound", "draft"])
        #expect(entries.first?.value == .string("ring.caf") && entries.last?.isDeleted == true)

        // Quiet for more than the heartbeat: a comment keeps the connection alive.
        _ = await live.events(1, timeout: .milliseconds(2500))
        #expect(live.comments >= 1)

        // A second client resumes after revision 1: it gets 2 and what follows, nothing before.
        let resumed = try Curl(["-H", "Authorization: Bearer \(token)", "-H", "Last-Event-ID: 1", url])
        try await push(server.port, token, [API.set("volume", "0.8")])
        #expect(await resumed.events(2).map(\.id) == ["2", "3"])
        #expect(await live.events(1).map(\.id) == ["3"])

        // One past the head (a client of a server since restored from an older backup) resumes at
        // the head: the next push reaches it.
        let ahead = try Curl(["-H", "Authorization: Bearer \(token)", "-H", "Last-Event-ID: 99", url])
        #expect(await ahead.nextComment(), "the stream is open")
        try await push(server.port, token, [API.set("theme", "dark")])
        #expect(await ahead.events(1).map(\.id) == ["4"])
        #expect(await live.events(1).map(\.id) == ["4"])

        // Revoked from another process: the open streams end, saying why.
        let list = try await ServerTool.run(["token", "list", "--data-dir", directory])
        let id = String(list.stdout.split(separator: "\t").first ?? "")
        #expect(try await ServerTool.run(["token", "revoke", "--data-dir", directory, id]).status == 0)
        #expect(await live.events(1, timeout: .seconds(5)).map(\.event) == ["unauthorized"])
        #expect(await live.waitForExit() == 0, "the server ends the response cleanly")
        _ = await resumed.waitForExit()
        _ = await ahead.waitForExit()

        // A new stream with a fresh token, then SIGTERM: it ends cleanly and the server exits 0.
        let fresh = try await createToken(directory)
        let last = try Curl(["-H", "Authorization: Bearer \(fresh)", "-H", "Last-Event-ID: 4", url])
        try await push(server.port, fresh, [API.set("x", "y")])
        #expect(await last.events(1).map(\.id) == ["5"])
        server.signal(SIGTERM)
        #expect(await last.waitForExit() == 0)
        let exit = await server.waitForExit()
        #expect(!exit.bySignal && exit.status == 0)
    }

    @Test(
        "a stream that opens its connection (held by the connection) and one after another request on a kept-alive connection (run in its task) deliver alike; a client that goes gives back its slot and the open-streams gauge"
    )
    func heldAndKeptAlive() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(dataDirectory: directory, extraArguments: ["--heartbeat", "1", "--max-streams-per-token", "1"])
        let token = try await createToken(directory)
        let base = "http://127.0.0.1:\(server.port)"
        let events = "\(base)/v1/suites/group.s/events"
        let auth = ["-H", "Authorization: Bearer \(token)"]

        let held = try Curl(auth + ["-H", "Last-Event-ID: 0", events])
        try await push(server.port, token, [API.set("sound", "ring.caf")])
        #expect(await held.events(1).map(\.id) == ["1"])
        #expect(await held.nextComment(), "heartbeats")
        #expect(try await openStreams(base, held: true, becomes: 1), "held by its connection")
        let refused = try await Curl.run(auth + ["--max-time", "2", "-o", "/dev/null", "-D", "-", events]).stdout.lowercased()
        #expect(refused.hasPrefix("http/1.1 429"), "the token's one slot is taken")
        #expect(refused.contains("connection: close"), "the connection that holds streams closes after its answer, and says so")

        // The client goes: its slot and its place in the gauge come back.
        held.process.signalIfRunning(SIGKILL)
        #expect(await held.waitForExit() != 0)
        #expect(try await openStreams(base, becomes: 0))
        #expect(try await openStreams(base, held: true, becomes: 0))

        // `health`, then the stream on the same connection (curl keeps it alive between its URLs).
        let kept = try Curl(auth + ["-H", "Last-Event-ID: 1", "\(base)/v1/health", events])
        try await push(server.port, token, [API.set("volume", "0.8")])
        #expect(await kept.events(1).map(\.id) == ["2"])
        #expect(await kept.nextComment(), "heartbeats")
        #expect(try await openStreams(base, becomes: 1))
        #expect(try await openStreams(base, held: true, becomes: 0), "run in its request's task")
        #expect(try await status(events, auth) == 429)
        server.signal(SIGTERM)
        #expect(await kept.waitForExit() == 0, "graceful shutdown ends the stream cleanly")
        let exit = await server.waitForExit()
        #expect(!exit.bySignal && exit.status == 0)
    }

    @Test(
        "a suite reset by a command beside the running embedded server reaches a held stream within a heartbeat (no notification crosses processes there)"
    )
    func resetBesideTheServerReachesHeldStream() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(dataDirectory: directory, extraArguments: ["--heartbeat", "1"])
        let token = try await createToken(directory)
        let url = "http://127.0.0.1:\(server.port)/v1/suites/group.s/events"
        try await push(server.port, token, [API.set("sound", "ring.caf")])
        let held = try Curl(["-H", "Authorization: Bearer \(token)", "-H", "Last-Event-ID: 1", url])
        #expect(await held.nextComment(), "the stream is open and parked")
        #expect(try await openStreams("http://127.0.0.1:\(server.port)", held: true, becomes: 1))
        let reset = try await ServerTool.run(["suites", "reset", "--account", "alice", "--suite", "group.s", "--yes", "--data-dir", directory])
        #expect(reset.status == 0, "\(reset.stderr)")
        #expect(await held.events(1, timeout: .seconds(10)).map(\.event) == ["suite_reset"])
        server.signal(SIGTERM)
        _ = await server.waitForExit()
    }

    @Test("SIGTERM while streams held by their connections are catching up: each ends cleanly before the server exits 0")
    func shutdownWaitsForHeldStreams() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(dataDirectory: directory)
        let token = try await createToken(directory)
        let value = String(repeating: "v", count: 1000)
        for batch in 0..<10 {
            try await push(server.port, token, (0..<100).map { API.set("k\(batch)-\($0)", value) })
        }
        let base = "http://127.0.0.1:\(server.port)"
        let url = "\(base)/v1/suites/group.s/events?since=0"
        // Each reads slowly, so that the catch-up (1 MB each) is under way at SIGTERM; curl exits
        // 0 only if the chunked answer ended with its last chunk (18 if it was cut).
        try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await Curl.run(["--limit-rate", "400k", "-o", "/dev/null", "-H", "Authorization: Bearer \(token)", url]).status
                }
            }
            #expect(try await openStreams(base, becomes: 10))
            server.signal(SIGTERM)
            for try await status in group { #expect(status == 0) }
        }
        let exit = await server.waitForExit()
        #expect(!exit.bySignal && exit.status == 0)
    }

    /// The status of a GET of `url` (a stream's is read no further).
    private func status(_ url: String, _ arguments: [String]) async throws -> Int {
        let run = try await Curl.run(arguments + ["--max-time", "2", "-o", "/dev/null", "-w", "%{http_code}", url])
        return Int(run.stdout) ?? 0
    }

    /// Whether the server's gauge of open streams (`held`: of those its connection holds) reaches
    /// `count` within 5 s.
    private func openStreams(_ base: String, held: Bool = false, becomes count: Int) async throws -> Bool {
        let gauge = held ? "groupdefaults_event_streams_held" : "groupdefaults_event_streams_open"
        for _ in 0..<100 {
            let metrics = try await Curl.run(["\(base)/metrics"]).stdout
            if metrics.split(separator: "\n").contains("\(gauge) \(Double(count))") { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    @Test("bad requests get their JSON error before any stream starts: no token, a bad Last-Event-ID")
    func refusals() async throws {
        let directory = temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(dataDirectory: directory)
        let token = try await createToken(directory)
        let url = "http://127.0.0.1:\(server.port)/v1/suites/group.s/events"
        let anonymous = try await Curl.run(["-w", "\n%{http_code}", url])
        #expect(anonymous.stdout.hasSuffix("\n401") && anonymous.stdout.contains(#""error":"unauthorized""#))
        let bad = try await Curl.run(["-w", "\n%{http_code}", "-H", "Authorization: Bearer \(token)", "-H", "Last-Event-ID: x", url])
        #expect(bad.stdout.hasSuffix("\n400") && bad.stdout.contains(#""error":"malformed""#), "\(bad.stdout)")
        server.signal(SIGTERM)
        _ = await server.waitForExit()
    }
}

/// HTTPS with a certificate made by openssl in the test.
@Suite("HTTPS (live)", .timeLimit(.minutes(1)))
struct TLSTests {
    @Test(
        "--tls-cert/--tls-key serve HTTPS: a client trusting the certificate talks to it, one that does not refuses it; a bad key file is one clear line"
    )
    func https() async throws {
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
        #expect(openssl.status == 0)

        let server = try await ServerProcess(dataDirectory: directory + "/data", extraArguments: ["--tls-cert", certificate, "--tls-key", key])
        let trusted = try await Curl.run(["--cacert", certificate, "https://127.0.0.1:\(server.port)/v1/health"])
        #expect(trusted.status == 0 && trusted.stdout.contains(#""status":"ok""#), "\(trusted)")
        let untrusted = try await Curl.run(["https://127.0.0.1:\(server.port)/v1/health"])
        #expect(untrusted.status == 60, "curl refuses a certificate it cannot verify: \(untrusted)")
        let plain = try await Curl.run(["http://127.0.0.1:\(server.port)/v1/health"])
        #expect(plain.status != 0 || !plain.stdout.contains("ok"), "no plain HTTP on the TLS port")
        server.signal(SIGTERM)
        #expect(await server.waitForExit().status == 0)

        let broken = try await ServerTool.run([
            "serve", "--port", "0", "--data-dir", directory + "/data", "--tls-cert", certificate, "--tls-key", certificate,
        ])
        #expect(broken.status == 1)
        #expect(broken.stderr == "groupdefaults-server: the TLS key \(certificate) is not a PEM private key (or needs a passphrase)\n")
    }
}

/// `GET /metrics`: Prometheus text, no token.
@Suite("Metrics")
struct MetricsTests {
    @Test("requests by route and status, push ops by outcome, open event streams, latency histogram")
    func exposition() async throws {
        let fixture = try Fixture()
        defer { try? FileManager.default.removeItem(at: fixture.directory) }
        let token = try await fixture.token()
        try await fixture.test { client in
            _ = try await client.push("group.m", token: token, API.push([API.set("a", "1"), API.set("a", "0", hlc: HLC(rawValue: 1))]))
            _ = try await client.get("/v1/suites/group.m/changes?since=0", token: token)
            let response = try await client.execute(uri: "/metrics", method: .get)
            #expect(response.status == .ok)
            #expect(response.headers[.contentType]?.hasPrefix("text/plain") == true)
            let text = String(buffer: response.body)
            #expect(text.contains(#"groupdefaults_push_ops_total{status="applied"}"#), "\(text.prefix(2000))")
            #expect(text.contains(#"groupdefaults_push_ops_total{status="superseded"}"#))
            #expect(
                text.contains(#"hb_requests{http_route="/v1/suites/{suite}/push",http_request_method="POST",http_response_status_code="200"} "#),
                "requests by route and status"
            )
            #expect(text.contains(#"http_server_request_duration_bucket{http_route="/v1/suites/{suite}/changes""#), "a latency histogram")
            #expect(text.contains("groupdefaults_event_streams_open"))
        }
    }
}
