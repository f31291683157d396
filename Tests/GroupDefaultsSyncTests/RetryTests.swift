import Foundation
import GroupDefaults
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsSync

/// What a client does when the server is busy (429) or unavailable (503), and what `export` costs:
/// the real tools against the real server, through a loopback proxy where the server must refuse on
/// cue.
@Suite("Retries and the cost of export", .timeLimit(.minutes(2)))
struct RetryTests {
    static let historyRoute = "/v1/suites/{suite}/history"
    static let keyHistoryRoute = "/v1/suites/{suite}/keys/{key}/history"

    @Test(
        "export of a suite of 1,000 keys under the server's default rate limit: three requests, no 429",
        arguments: StorageBackend.allCases
    )
    func exportCostsAFewRequests(backend: StorageBackend) async throws {
        try await SyncServer.with(backend, ["--rate-limit", "200"]) { server in
            let device = ToolDevice("group.export")
            defer { device.remove() }
            try await device.configure(server)
            let defaults = try device.open()
            try await defaults.write { tx in
                for n in 0..<1000 { try tx.set(.integer(n), forKey: "key\(n)") }
            }
            #expect(try await device.sync("sync").status == 0)
            let before = Metrics.requestCounts(try await server.metricsText())

            let export = try await device.sync("export")
            #expect(export.status == 0, "\(export.stderr)")
            let text = try await server.metricsText()
            let after = Metrics.requestCounts(text)
            var made: [String: Int] = [:]
            for (route, count) in after where route != "/metrics" && count != before[route, default: 0] {
                made[route] = count - before[route, default: 0]
            }
            // The snapshot, the history and the devices: a page each, whatever the number of keys.
            #expect(made == [Metrics.snapshotRoute: 1, Self.historyRoute: 1, "/v1/devices": 1], "\(made)")
            #expect(Metrics.requestCounts(text, status: "429").isEmpty, "no request was refused")

            let document = try #require(try JSONSerialization.jsonObject(with: Data(export.stdout.utf8)) as? [String: Any])
            let suite = try #require((document["suites"] as? [[String: Any]])?.first)
            #expect((suite["entries"] as? [Any])?.count == 1000)
            let history = try #require(suite["history"] as? [[String: Any]])
            #expect(history.count == 1000)
            #expect(
                history.compactMap { $0["key"] as? String } == (0..<1000).map { "key\($0)" }.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            )
            #expect(history.allSatisfy { ($0["versions"] as? [Any])?.count == 1 })
        }
    }

    @Test("export and sync wait as the server's Retry-After says, in seconds and as an HTTP date, and go on")
    func retryAfterIsHonoured() async throws {
        try await SyncServer.with { server in
            try await RefusingProxy.with(to: server.url) { proxy in
                let device = ToolDevice("group.retry")
                defer { device.remove() }
                let token = try device.tokenFile(server.token)
                let configured = try await device.sync("configure", ["--server", proxy.url.absoluteString, "--token-file", token])
                #expect(configured.status == 0, "\(configured.stderr)")
                let defaults = try device.open()

                // A push refused with Retry-After as an HTTP date two seconds ahead of the second
                // the answer's Date names (a backoff alone would wait at most 0.2 s).
                defaults.set("ring.caf", forKey: "sound")
                proxy.refuse("/push") { httpDate(Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down) + 2)) }
                let sync = try await device.sync("sync")
                #expect(sync.status == 0, "\(sync.stderr)")
                #expect(sync.stdout.contains("pushed 1"), "\(sync.stdout)")
                let pushes = proxy.requests.filter { $0.path.hasSuffix("/push") }
                #expect(pushes.map(\.status) == [429, 200])
                if pushes.count == 2 { #expect(pushes[1].at - pushes[0].at >= .milliseconds(900), "sent again after the date") }

                // The history read refused with Retry-After: 1.
                proxy.refuse("/history") { "1" }
                let export = try await device.sync("export")
                #expect(export.status == 0, "\(export.stderr)")
                #expect(export.stdout.contains("ring.caf"))
                let reads = proxy.requests.filter { $0.path.hasSuffix("/history") }
                #expect(reads.map(\.status) == [429, 200])
                if reads.count == 2 { #expect(reads[1].at - reads[0].at >= .seconds(1), "sent again after 1 s") }
            }
        }
    }

    @Test("a Retry-After longer than a client waits in all (a day) is reported at once, in one line, not waited for")
    func absurdRetryAfterIsNotWaited() async throws {
        try await SyncServer.with { server in
            try await RefusingProxy.with(to: server.url) { proxy in
                let device = ToolDevice("group.retry")
                defer { device.remove() }
                let token = try device.tokenFile(server.token)
                #expect(try await device.sync("configure", ["--server", proxy.url.absoluteString, "--token-file", token]).status == 0)
                try device.open().set("ring.caf", forKey: "sound")
                proxy.refuse("/push", status: 503, count: 100) { "86400" }
                let started = ContinuousClock.now
                let sync = try await device.sync("sync")
                // Not waited for: far under the 60 s a client waits in all (the sync itself takes
                // about a second, ten on a busy CI machine).
                #expect(ContinuousClock.now - started < .seconds(30))
                #expect(sync.status != 0)
                let lines = sync.stderr.split(separator: "\n")
                #expect(lines.count == 1 && lines[0].contains("unavailable") && lines[0].contains("asks to wait 86400.0 s"), "\(sync.stderr)")
                #expect(proxy.requests.filter { $0.path.hasSuffix("/push") }.count == 1, "asked to wait a day, it does not send again")
                #expect(try device.open().pendingCount() == 1, "the change stays pending")
            }
        }
    }

    @Test("Retry-After: seconds, an HTTP date from the answer's own Date, and what is neither")
    func retryAfterParsing() {
        let date = "Sun, 29 Nov 2026 13:00:00 GMT"
        #expect(RetryAfter.wait("2", answeredAt: nil) == .seconds(2))
        #expect(RetryAfter.wait(" 0 ", answeredAt: nil) == .zero)
        #expect(RetryAfter.wait("Sun, 29 Nov 2026 13:00:05 GMT", answeredAt: date) == .seconds(5))
        #expect(RetryAfter.wait("Sun, 29 Nov 2026 12:59:00 GMT", answeredAt: date) == .zero, "a date past is no wait")
        #expect(RetryAfter.wait("99999999999999999999999", answeredAt: nil) == .seconds(RetryAfter.longestSeconds), "huge: long, bounded")
        for garbage in ["-5", "1.5", "soon", "", "Sun, 29 Nov 2026 13:00:05", "0x10"] {
            #expect(RetryAfter.wait(garbage, answeredAt: date) == nil, "\(garbage)")
        }
    }
}
