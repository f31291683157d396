import AsyncHTTPClient
import GroupDefaults
import GroupDefaultsWire

/// The server's resident memory per open event stream: VmRSS with `count` streams open (each on
/// its own connection, parked in the server) minus VmRSS before, over `count`.
struct StreamMemory {
    let server: ServerProcess
    let token: String
    let suite: String
    let count: Int

    struct Result: Encodable {
        var streams: Int
        var beforeKiB: Double
        var afterKiB: Double
        var kibPerStream: Double { (afterKiB - beforeKiB) / Double(streams) }
    }

    func run() async throws -> Result {
        let http = SyncAPI.makeHTTPClient(connections: count + 10)
        let api = SyncAPI(http: http, baseURL: server.baseURL, token: token)
        do {
            let result = try await measure(api)
            try await http.shutdown()
            return result
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    private func measure(_ api: SyncAPI) async throws -> Result {
        let suite = self.suite
        // Every code path once (push, stream opened and closed), then the baseline.
        _ = try await api.push(
            suite,
            PushRequest(
                deviceID: 1,
                batchID: "memory-warmup",
                ops: [
                    PushOp(key: "k", value: .string("v"), hlc: HLC(milliseconds: HLC.wallClockMilliseconds(), counter: 0))
                ]
            )
        )
        await withThrowingTaskGroup(of: Void.self) { group in
            let (opened, ready) = AsyncStream<Void>.makeStream()
            group.addTask { try await Self.hold(api, suite, ready: ready) }
            var iterator = opened.makeAsyncIterator()
            _ = await iterator.next()
            group.cancelAll()
            try? await group.waitForAll()
        }
        try await Task.sleep(for: .milliseconds(500))
        let before = try server.residentKiB()

        return try await withThrowingTaskGroup(of: Void.self) { group in
            let (opened, ready) = AsyncStream<Void>.makeStream()
            var iterator = opened.makeAsyncIterator()
            // In waves of 100, so that connections are not refused by a full accept backlog.
            for wave in stride(from: 0, to: count, by: 100) {
                let size = min(100, count - wave)
                for _ in 0..<size { group.addTask { try await Self.hold(api, suite, ready: ready) } }
                for _ in 0..<size { _ = await iterator.next() }
            }
            try await waitForOpenStreams(api, atLeast: count)
            try await Task.sleep(for: .seconds(1))  // every stream parked in its wait
            let after = try server.residentKiB()
            group.cancelAll()
            try? await group.waitForAll()
            // The server finds a closed stream at its next write (a heartbeat, within 15 s): until
            // then the streams would still be there for the measurements that follow.
            try await waitForOpenStreams(api, atMost: 0)
            return Result(streams: count, beforeKiB: before, afterKiB: after)
        }
    }

    /// Opens a stream, says so once its first line arrived, and reads it until cancelled.
    private static func hold(_ api: SyncAPI, _ suite: String, ready: AsyncStream<Void>.Continuation) async throws {
        let body = try await api.events(suite)
        var told = false
        for try await _ in body {
            if !told { ready.yield() }
            told = true
        }
    }

    /// Until the server's gauge of open streams reaches `atLeast` (or falls to `atMost`); bounded:
    /// 30 s. The warm-up's stream may still count: the server notices a closed stream at its next write.
    private func waitForOpenStreams(_ api: SyncAPI, atLeast: Int = 0, atMost: Int = .max) async throws {
        for _ in 0..<300 {
            if let open = try await api.metric("groupdefaults_event_streams_open").map({ Int($0) }), open >= atLeast, open <= atMost {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BenchError("the server's open event streams did not reach \(atLeast)…\(atMost)")
    }
}
