import Foundation
import Glibc
import GroupDefaultsServer
import NIOCore
import ServerLaunching
import TestSupport
import Testing

/// The real executable on loopback, driven through plain sockets the way a leaked token or a slow
/// client would: a token's streams are limited while other tokens are served, half-sent requests
/// and quiet connections are closed, the connection cap holds, and `/v1/health` keeps answering.
@Suite("Slow and greedy clients")
struct SlowAndGreedyClientsTests {
    @Test(
        "the 101st stream of one token is 429 too_many_streams while another token's first is served; streams outlive the idle timeout; half-sent requests are closed after the head timeout; health answers throughout"
    )
    func streamsAndHalfSentRequests() async throws {
        let directory = ServerTool.temporaryDirectory("gds-abuse")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let greedy = try await ServerTool.createToken(directory)
        let other = try await ServerTool.createToken(directory)
        let server = try await ServerProcess(
            dataDirectory: directory,
            extraArguments: [
                "--request-head-timeout", "1", "--idle-timeout", "2", "--rate-limit", "100000",
            ]
        )
        defer { server.signal(SIGTERM) }
        let port = server.port

        let health = try await offThePool { () throws -> [Double] in
            var health = try RawConnection.healthMilliseconds(port)
            var streams: [RawConnection] = []
            for _ in 0..<100 {
                let stream = try RawConnection(port: port)
                try stream.send(RawConnection.get("/v1/suites/s/events", token: greedy))
                #expect(try stream.readHead().status == 200)
                streams.append(stream)
            }
            health += try RawConnection.healthMilliseconds(port)

            let refused = try RawConnection(port: port)
            try refused.send(RawConnection.get("/v1/suites/s/events", token: greedy))
            let answer = try refused.readHead()
            #expect(answer.status == 429 && answer.text.contains("Retry-After"), "\(answer.text)")
            #expect(try refused.read(until: #""error":"too_many_streams""#, timeout: 10))
            let poll = try RawConnection(port: port)
            try poll.send(RawConnection.get("/v1/suites/s/changes?since=0&wait=30", token: greedy))
            #expect(try poll.readHead().status == 429, "a long-poll that would wait takes a slot too")
            let served = try RawConnection(port: port)
            try served.send(RawConnection.get("/v1/suites/s/events", token: other))
            #expect(try served.readHead().status == 200, "another token's first stream is served")
            health += try RawConnection.healthMilliseconds(port)

            // Half a request head: closed once the head timeout (1 s) passes, not before.
            let halfSent = try (0..<20).map { _ in try RawConnection(port: port) }
            let sent = Date()
            for connection in halfSent { try connection.send("GET /v1/health HTTP/1.1\r\nHost: loopback\r\n") }
            health += try RawConnection.healthMilliseconds(port)
            for connection in halfSent {
                #expect(try connection.readToEnd(timeout: 10).isEmpty, "closed without an answer")
            }
            let closedAfter = Date().timeIntervalSince(sent)
            #expect(closedAfter >= 0.9 && closedAfter < 8, "closed after \(closedAfter) s")

            // A kept-alive connection quiet for longer than the idle timeout (2 s) is closed; the
            // streams, open for longer than that, still deliver.
            let keptAlive = try RawConnection(port: port)
            try keptAlive.send(RawConnection.get("/v1/health", token: nil))
            #expect(try keptAlive.readHead().status == 200)
            #expect(try keptAlive.read(until: "ok", timeout: 10))
            #expect(try keptAlive.readToEnd(timeout: 10).isEmpty, "closed after the idle timeout")
            let pusher = try RawConnection(port: port)
            try pusher.send(
                RawConnection.post(
                    "/v1/suites/s/push",
                    token: greedy,
                    body: #"""
                        {"device_id":"7","batch_id":"b1","ops":[{"key":"sound","value":{"string":"ring.caf"},"hlc":"117653844787200000"}]}
                        """#
                )
            )
            #expect(try pusher.readHead().status == 200)
            #expect(try streams[99].read(until: "ring.caf", timeout: 10), "the last stream opened still delivers")
            health += try RawConnection.healthMilliseconds(port)
            return health
        }
        // Each check is one request on a fresh connection while the streams and half-sent requests
        // are held; the bound on the median tolerates a scheduling hiccup of the test machine.
        let sorted = health.sorted()
        #expect(sorted[sorted.count / 2] < 50 && sorted.last! < 1_000, "health answered in \(health) ms")
    }

    @Test("beyond --max-connections a connection waits until one closes; the open-file limit is raised at start")
    func connectionCap() async throws {
        let directory = ServerTool.temporaryDirectory("gds-cap")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(dataDirectory: directory, extraArguments: ["--max-connections", "20"])
        defer { server.signal(SIGTERM) }
        let port = server.port
        let limits = try String(contentsOfFile: "/proc/\(server.process.processIdentifier)/limits", encoding: .utf8)
        let openFiles = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }?.split(separator: " ", omittingEmptySubsequences: true)
        #expect(openFiles.map { $0.count >= 5 && $0[3] == $0[4] } == true, "soft limit raised to the hard one: \(openFiles ?? [])")

        try await offThePool {
            let held = try (0..<20).map { _ in
                let connection = try RawConnection(port: port)
                try connection.send(RawConnection.get("/v1/health", token: nil))
                #expect(try connection.readHead().status == 200)
                return connection
            }
            let waiting = try RawConnection(port: port)
            try waiting.send(RawConnection.get("/v1/health", token: nil))
            #expect(try waiting.readToEnd(timeout: 0.5, stopAtFirstByte: true).isEmpty, "not served while 20 connections are open")
            held[0].close()
            #expect(try waiting.readHead().status == 200, "served once one closed")
        }
    }
}

extension SlowAndGreedyClientsTests {
    @Test(
        "request bodies that trickle (a push's head announcing 60,000 bytes, then a byte every half second) on every connection the cap allows are closed once the grace is spent; health is answered then; a body sent at pace is not cut"
    )
    func tricklingBodies() async throws {
        let directory = ServerTool.temporaryDirectory("gds-slow-body")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let token = try await ServerTool.createToken(directory)
        // The grace is the head timeout (1 s); then the body must keep arriving at 32 KiB/s.
        let server = try await ServerProcess(
            dataDirectory: directory,
            extraArguments: ["--max-connections", "20", "--request-head-timeout", "1", "--idle-timeout", "60"]
        )
        defer { server.signal(SIGTERM) }
        let port = server.port
        try await offThePool {
            let slow = try (0..<20).map { _ in try RawConnection(port: port) }
            // A push's head, with a token: the body's pace is asked of every request alike.
            let head =
                "POST /v1/suites/s/push HTTP/1.1\r\nHost: loopback\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n"
            for connection in slow { try connection.send(head) }
            let sent = Date()
            // Every connection is taken: this one waits in the queue until the trickling ones close.
            let health = try RawConnection(port: port)
            try health.send(RawConnection.get("/v1/health", token: nil))
            var closedAfter: [Double] = []
            var open = slow
            while !open.isEmpty, Date().timeIntervalSince(sent) < 20 {
                open = open.filter { connection in
                    guard connection.sendByte(), !connection.closedByServer(within: 0.5 / Double(slow.count)) else {
                        closedAfter.append(Date().timeIntervalSince(sent))
                        return false
                    }
                    return true
                }
            }
            #expect(open.isEmpty, "\(open.count) trickling connections still open after 20 s")
            #expect(slow.allSatisfy { $0.received.isEmpty }, "closed without an answer")
            #expect(closedAfter.allSatisfy { $0 >= 0.9 && $0 < 2.5 }, "closed after \(closedAfter) s")
            #expect(try health.readHead().status == 200, "health answered once they closed")

            // A body of the same size that arrives at pace (four parts over about a second) is answered.
            let push = #"{"device_id":"7","batch_id":"b1","ops":[{"key":"sound","value":{"string":"ring.caf"},"hlc":"117653844787200000"}]}"#
            let body = push + String(repeating: " ", count: 60_000 - push.utf8.count)
            let paced = try RawConnection(port: port)
            try paced.send(head)
            let bytes = Array(body.utf8)
            for part in stride(from: 0, to: bytes.count, by: 15_000) {
                Thread.sleep(forTimeInterval: 0.3)
                try paced.send(String(decoding: bytes[part..<min(part + 15_000, bytes.count)], as: UTF8.self))
            }
            #expect(try paced.readHead().status == 200)
        }
    }

    @Test("a body's pace: the grace, then a second per 32 KiB arrived, of the client's time only (not while the server does not read)")
    func bodyPace() {
        let start = ContinuousClock.now
        var pace = BodyPace(grace: .seconds(1), waitingSince: start)
        #expect(pace.deadline == start + .seconds(1), "nothing arrives: the grace alone")
        pace.arrived(BodyPace.minimumBytesPerSecond)
        #expect(pace.deadline == start + .seconds(2))
        // The server is busy for 10 s after half a second of waiting: that time is not counted.
        pace.pause(at: start + .milliseconds(500))
        #expect(pace.deadline == nil && !pace.isWaiting)
        pace.resume(at: start + .seconds(10))
        #expect(pace.deadline == start + .milliseconds(11_500))
        pace.resume(at: start + .seconds(11))  // already waiting: no change
        #expect(pace.deadline == start + .milliseconds(11_500))
    }

    @Test(
        "bodies that never arrive on 20 connections, the cap 5: each closed once the grace is spent, whatever it announced (a chunked body announces none), so health is answered within a few graces; a sign-in form over 4 KiB is refused at once"
    )
    func bodiesThatNeverArrive() async throws {
        let directory = ServerTool.temporaryDirectory("gds-no-body")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = try await ServerProcess(
            dataDirectory: directory,
            extraArguments: ["--max-connections", "5", "--request-head-timeout", "1", "--idle-timeout", "60"]
        )
        defer { server.signal(SIGTERM) }
        let port = server.port
        try await offThePool {
            // The console's sign-in reads its form before anything else: no token, no session.
            let heads = [
                "POST /console/sign-in HTTP/1.1\r\nHost: loopback\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 4000\r\n\r\n",
                "POST /console/sign-in HTTP/1.1\r\nHost: loopback\r\nContent-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n",
            ]
            let started = Date()
            let silent = try (0..<20).map { n in
                let connection = try RawConnection(port: port)
                try connection.send(heads[n % 2])
                return connection
            }
            let health = try RawConnection(port: port)
            try health.send(RawConnection.get("/v1/health", token: nil))
            #expect(try health.readHead().status == 200)
            let answered = Date().timeIntervalSince(started)
            // Rounds of (at most) five connections, each held about the grace (1 s): without a
            // pace, the chunked ones would each hold theirs for the largest body's allowance.
            #expect(answered >= 0.9 && answered < 8, "health answered after \(answered) s")
            for connection in silent {
                #expect(try connection.readToEnd(timeout: 5).isEmpty, "closed without an answer")
            }

            let large = try RawConnection(port: port)
            try large.send(
                "POST /console/sign-in HTTP/1.1\r\nHost: loopback\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 5000\r\n\r\n"
            )
            #expect(try large.readHead().status == 413, "refused before its body")
        }
    }
}

extension SlowAndGreedyClientsTests {
    @Test(
        "streams whose clients read nothing do not hold SIGTERM up: held by their connection or run after another request, they are closed after the shutdown grace and the server exits 0"
    )
    func unreadStreamsDoNotHoldShutdown() async throws {
        let directory = ServerTool.temporaryDirectory("gds-unread")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let token = try await ServerTool.createToken(directory)
        let server = try await ServerProcess(dataDirectory: directory)
        defer { server.signal(SIGKILL) }
        let port = server.port
        // More than the sockets' buffers take (the server's send buffer grows to a few MiB): the
        // stream's writes stop, waiting for a reader that never reads.
        let value = String(repeating: "x", count: 900_000)
        let readers = try await offThePool { () throws -> [RawConnection] in
            for index in 0..<8 {
                let body = try API.push([API.set("k\(index)", value)])
                let pusher = try RawConnection(port: port)
                try pusher.send(RawConnection.post("/v1/suites/group.big/push", token: token, body: String(buffer: body)))
                #expect(try pusher.readHead().status == 200)
            }
            let events = RawConnection.get("/v1/suites/group.big/events?since=0", token: token)
            let held = try RawConnection(port: port, receiveBuffer: 4096)
            try held.send(events)
            let afterAnother = try RawConnection(port: port, receiveBuffer: 4096)
            try afterAnother.send(RawConnection.get("/v1/health", token: nil) + events)
            return [held, afterAnother]
        }
        #expect(
            try await eventually {
                let metrics = try await Curl.run(["http://127.0.0.1:\(port)/metrics"]).stdout
                return metrics.split(separator: "\n").contains("groupdefaults_event_streams_open 2.0")
            }
        )
        server.signal(SIGTERM)
        // Its exit, or nil if it is still running 30 s later (the grace is 10 s): then it is killed.
        let exit = await withTaskGroup(of: (status: Int32, bySignal: Bool)?.self) { group in
            group.addTask { await server.waitForExit() }
            group.addTask {
                try? await Task.sleep(for: .seconds(30))
                return nil
            }
            let first = await group.next() ?? nil
            if first == nil { server.signal(SIGKILL) }
            group.cancelAll()
            return first
        }
        #expect(exit.map { !$0.bySignal && $0.status == 0 } == true, "SIGTERM ended the server in time: \(String(describing: exit))")
        withExtendedLifetime(readers) {}
    }
}

/// A blocking TCP connection to the server on loopback, for requests written by hand.
private final class RawConnection: @unchecked Sendable {  // used by one thread at a time
    private var descriptor: Int32
    private var buffered: [UInt8] = []

    /// `receiveBuffer`: the socket's receive buffer, in bytes (set before it connects), for a client
    /// that reads nothing and should stop the server's writes soon.
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw RawConnectionError("connect: \(String(cString: strerror(errno)))") }
    }

    deinit { close() }

    func close() {
        if descriptor >= 0 { Glibc.close(descriptor) }
        descriptor = -1
    }

    static func get(_ path: String, token: String?) -> String {
        "GET \(path) HTTP/1.1\r\nHost: loopback\r\n" + (token.map { "Authorization: Bearer \($0)\r\n" } ?? "") + "\r\n"
    }

    static func post(_ path: String, token: String, body: String) -> String {
        "POST \(path) HTTP/1.1\r\nHost: loopback\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)"
    }

    /// `GET /v1/health` three times, each on a fresh connection: the milliseconds to each answer's head.
    static func healthMilliseconds(_ port: Int) throws -> [Double] {
        try (0..<3).map { _ in
            let start = DispatchTime.now().uptimeNanoseconds
            let connection = try RawConnection(port: port)
            try connection.send(get("/v1/health", token: nil))
            guard try connection.readHead().status == 200 else { throw RawConnectionError("health was not 200") }
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        }
    }

    /// What arrived and was not read yet.
    var received: [UInt8] { buffered }

    /// Sends one byte of a body (without SIGPIPE); false if the connection is closed.
    func sendByte() -> Bool {
        var byte: UInt8 = 0x20
        return Glibc.send(descriptor, &byte, 1, Int32(MSG_NOSIGNAL)) == 1
    }

    /// Whether the server closes the connection within `timeout` seconds (anything it sends
    /// first is kept).
    func closedByServer(within timeout: Double) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        do {
            while try fill(until: deadline) {}
            return true
        } catch {
            return false
        }
    }

    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count else { throw RawConnectionError("write: \(String(cString: strerror(errno)))") }
    }

    /// The answer's status and its head, within 10 s; what follows the head stays to be read.
    func readHead() throws -> (status: Int, text: String) {
        let deadline = Date().addingTimeInterval(10)
        let end: [UInt8] = Array("\r\n\r\n".utf8)
        while true {
            if let start = buffered.indices.dropLast(3).first(where: { buffered[$0..<$0 + 4].elementsEqual(end) }) {
                let text = String(decoding: buffered[..<(start + 4)], as: UTF8.self)
                let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
                buffered.removeSubrange(..<(start + 4))
                return (status, text)
            }
            guard try fill(until: deadline) else {
                throw RawConnectionError("the connection closed before an answer: \(String(decoding: buffered, as: UTF8.self))")
            }
        }
    }

    /// Whether `marker` arrives before `timeout` seconds pass.
    func read(until marker: String, timeout: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !String(decoding: buffered, as: UTF8.self).contains(marker) {
            guard try fill(until: deadline) else { return false }
        }
        return true
    }

    /// What arrives until the server closes the connection (throws if it is still open after
    /// `timeout` seconds), or, with `stopAtFirstByte`, nothing if nothing arrived by then.
    func readToEnd(timeout: Double, stopAtFirstByte: Bool = false) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout)
        let before = buffered.count
        do {
            while try fill(until: deadline) {
                if stopAtFirstByte { break }
            }
        } catch is TimedOut where stopAtFirstByte {
            return []
        }
        return Array(buffered[before...])
    }

    private struct TimedOut: Error {}

    /// Reads what is there by `deadline`: false at the end of the stream.
    private func fill(until deadline: Date) throws -> Bool {
        let remaining = deadline.timeIntervalSinceNow
        guard remaining > 0 else { throw TimedOut() }
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let ready = poll(&poller, 1, Int32(remaining * 1000) + 1)
        guard ready > 0 else {
            if ready < 0 && errno == EINTR { return true }
            throw TimedOut()
        }
        var chunk = [UInt8](repeating: 0, count: 4096)
        let count = Glibc.read(descriptor, &chunk, chunk.count)
        if count > 0 {
            buffered += chunk.prefix(count)
            return true
        }
        if count < 0 && errno == ECONNRESET { return false }
        return count != 0 ? true : false
    }
}

private struct RawConnectionError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
