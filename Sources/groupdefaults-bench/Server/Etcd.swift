import AsyncHTTPClient
import Foundation
import Glibc
import NIOCore
import NIOHTTP1

/// etcd (Debian's `etcd-server`), what a user would otherwise pick for "a durable key-value
/// server that clients watch": one member started by the benchmark on loopback, its data in the
/// sandbox (the disk our servers write to), with etcd's default durability (every commit is in its
/// write-ahead log, fsynced, before the put is answered).
final class ThrowawayEtcd {
    static let executable = "/usr/bin/etcd"

    private let child: Spawn.Child
    let port: Int
    var pid: pid_t { child.pid }
    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts etcd in `directory` and returns once its gateway answers.
    init(directory: String, http: HTTPClient) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.executable) else {
            throw BenchError("no \(Self.executable): install Debian's etcd-server (Tools/install-deps bench does)")
        }
        let client = try Self.freePort()
        let peer = try Self.freePort()
        port = client
        child = try Spawn.start(
            Self.executable,
            [
                "--name", "bench", "--data-dir", directory + "/etcd",
                "--listen-client-urls", "http://127.0.0.1:\(client)", "--advertise-client-urls", "http://127.0.0.1:\(client)",
                "--listen-peer-urls", "http://127.0.0.1:\(peer)", "--initial-advertise-peer-urls", "http://127.0.0.1:\(peer)",
                "--initial-cluster", "bench=http://127.0.0.1:\(peer)",
                "--logger", "zap", "--log-level", "error",
            ],
            captureOutput: true
        )
        for _ in 0..<200 {
            if let response = try? await http.execute(HTTPClientRequest(url: baseURL + "/health"), timeout: .seconds(1)),
                response.status == .ok,
                let body = try? await response.body.collect(upTo: 1 << 16),
                String(buffer: body).contains("true")
            {
                return
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BenchError("etcd did not become healthy on port \(client) within 10 s")
    }

    func stop() {
        kill(child.pid, SIGTERM)
        _ = try? child.wait()
    }

    /// A port nobody listens on now (the kernel's choice for port 0).
    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw BenchError("cannot find a free port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Watch latency on etcd, the counterpart of `WakeUpLatency.eventStream`: a watch open through
/// the JSON gateway (`POST /v3/watch`, its answer a stream of JSON lines), then one put; each
/// sample runs from just before the put is sent to its event parsed.
struct EtcdWatchLatency {
    let http: HTTPClient
    let baseURL: String
    let samples: Int
    var settle: Duration = .milliseconds(10)

    func run() async throws -> WakeUpLatency.Result {
        let key = Data("bench/watched".utf8).base64EncodedString()
        var watch = HTTPClientRequest(url: baseURL + "/v3/watch")
        watch.method = .POST
        watch.body = .bytes(ByteBuffer(string: #"{"create_request":{"key":"\#(key)"}}"#))
        let response = try await http.execute(watch, timeout: .hours(1))
        guard response.status == .ok else { throw BenchError("etcd watch: \(response.status)") }
        let (arrivals, continuation) = AsyncThrowingStream<Int64, any Error>.makeStream()
        let reader = Task {
            do {
                var pending: [UInt8] = []
                for try await chunk in response.body {
                    pending += chunk.readableBytesView
                    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        let line = String(decoding: pending[..<newline], as: UTF8.self)
                        pending.removeSubrange(...newline)
                        // The first line says the watch was created; each later one carries events.
                        if line.contains("\"created\":true") || line.contains("\"events\"") { continuation.yield(Clock.nanoseconds()) }
                    }
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        defer { reader.cancel() }
        var iterator = arrivals.makeAsyncIterator()
        guard try await iterator.next() != nil else { throw BenchError("etcd's watch ended at once") }

        var latencies: [Int64] = []
        var puts: [Int64] = []
        for index in 0..<samples {
            try await Task.sleep(for: settle)
            var put = HTTPClientRequest(url: baseURL + "/v3/kv/put")
            put.method = .POST
            let value = Data("\(index)".utf8).base64EncodedString()
            put.body = .bytes(ByteBuffer(string: #"{"key":"\#(key)","value":"\#(value)"}"#))
            let sent = Clock.nanoseconds()
            let answer = try await http.execute(put, timeout: .seconds(30))
            _ = try await answer.body.collect(upTo: 1 << 16)
            guard answer.status == .ok else { throw BenchError("etcd put: \(answer.status)") }
            puts.append(Clock.nanoseconds() - sent)
            guard let arrived = try await iterator.next() else { throw BenchError("etcd's watch ended") }
            latencies.append(arrived - sent)
        }
        return WakeUpLatency.Result(woken: Latencies(latencies), pushAnswered: Latencies(puts))
    }
}

/// etcd's resident memory per open watch, the counterpart of `StreamMemory`: VmRSS with `count`
/// watches open through its JSON gateway (`POST /v3/watch`, each on a connection of its own, each
/// answered its "created" line) minus VmRSS before, over `count`.
struct EtcdWatchMemory {
    let pid: pid_t
    let baseURL: String
    let count: Int

    func run() async throws -> StreamMemory.Result {
        let http = SyncAPI.makeHTTPClient(connections: count + 10)
        do {
            let result = try await measure(http)
            try await http.shutdown()
            return result
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    private func measure(_ http: HTTPClient) async throws -> StreamMemory.Result {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let (opened, ready) = AsyncStream<Void>.makeStream()
            var iterator = opened.makeAsyncIterator()
            // One watch first (every code path once), then the baseline.
            group.addTask { try await hold(http, key: "bench/memory-warmup", ready: ready) }
            _ = await iterator.next()
            try await Task.sleep(for: .milliseconds(500))
            let before = try ProcessStats.residentKiB(of: pid)
            // In waves of 100, as `StreamMemory` opens its streams.
            for wave in stride(from: 0, to: count, by: 100) {
                let size = min(100, count - wave)
                for index in wave..<(wave + size) { group.addTask { try await hold(http, key: "bench/memory-\(index)", ready: ready) } }
                for _ in 0..<size { _ = await iterator.next() }
            }
            try await Task.sleep(for: .seconds(1))
            let after = try ProcessStats.residentKiB(of: pid)
            group.cancelAll()
            try? await group.waitForAll()
            return StreamMemory.Result(streams: count, beforeKiB: before, afterKiB: after)
        }
    }

    /// Opens a watch of `key`, says so once etcd answered that it was created, and reads it until
    /// cancelled.
    private func hold(_ http: HTTPClient, key: String, ready: AsyncStream<Void>.Continuation) async throws {
        var watch = HTTPClientRequest(url: baseURL + "/v3/watch")
        watch.method = .POST
        watch.body = .bytes(ByteBuffer(string: #"{"create_request":{"key":"\#(Data(key.utf8).base64EncodedString())"}}"#))
        let response = try await http.execute(watch, timeout: .hours(1))
        guard response.status == .ok else { throw BenchError("etcd watch: \(response.status)") }
        var said = false
        for try await chunk in response.body where !said && chunk.readableBytesView.contains(UInt8(ascii: "\n")) {
            ready.yield()
            said = true
        }
    }
}
