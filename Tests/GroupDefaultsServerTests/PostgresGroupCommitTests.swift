import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

/// Group commit on PostgreSQL: pushes to one suite that wait behind a group in flight are written
/// together, each all or nothing with its own answer.
@Suite("PostgreSQL group commit", .timeLimit(.minutes(2)))
struct PostgresGroupCommitTests {
    static let roomy = SuiteQuota(maxKeys: 10_000, maxBytes: 16 << 20)
    static let now = "2026-11-22T10:00:00.000Z"

    func request(device: UInt64, batch: String = UUID().uuidString, _ ops: [PushOp]) -> PushRequest {
        PushRequest(deviceID: device, batchID: batch, ops: ops)
    }

    func set(_ key: String, _ value: Int, hlc: UInt64) -> PushOp {
        PushOp(key: key, value: .integer(value), hlc: HLC(rawValue: hlc))
    }

    /// Runs `body` with a storage instance on a fresh database, and shuts it down afterwards.
    func withPostgres(_ body: (PostgresSyncStorage) async throws -> Void) async throws {
        try await StorageBackend.postgres.withStorage { storage in try await body(storage as! PostgresSyncStorage) }
    }

    func sealed(_ id: String, epoch: UInt32, hlc: UInt64) -> PushOp {
        PushOp(
            keyID: id,
            sealed: SealedPayload(epoch: epoch, box: Array(repeating: UInt8(hlc & 0xff), count: 40)),
            deleted: false,
            hlc: HLC(rawValue: hlc)
        )
    }

    /// Pushes `requests` to suite `s` while the suite is held, each only once the previous one waits
    /// (so the group takes them in this order), then lets them go as one group; returns each
    /// outcome, in order.
    func pushAsOneGroup(
        _ storage: PostgresSyncStorage,
        quota: SuiteQuota = roomy,
        _ requests: [PushRequest]
    ) async
        -> [Result<PushResponse, SyncStorageError>]
    {
        let groupsBefore = storage.pushGroupsWritten
        let tasks = await storage.holdingPushes(account: "alice", suite: "s") {
            var tasks: [Task<Result<PushResponse, SyncStorageError>, Never>] = []
            for (index, request) in requests.enumerated() {
                tasks.append(
                    Task {
                        do {
                            return .success(
                                try await storage.push(
                                    account: "alice",
                                    suite: "s",
                                    request: request,
                                    quota: quota,
                                    serverTime: Self.now
                                )
                            )
                        } catch let error as SyncStorageError {
                            return .failure(error)
                        } catch {
                            return .failure(SyncStorageError(.unavailable, "\(error)"))
                        }
                    }
                )
                await storage.waitUntilPushesWait(account: "alice", suite: "s", count: index + 1)
            }
            return tasks
        }
        var outcomes: [Result<PushResponse, SyncStorageError>] = []
        for task in tasks { outcomes.append(await task.value) }
        #expect(storage.pushGroupsWritten == groupsBefore + 1, "the waiting pushes went as one group")
        return outcomes
    }

    @Test("pushes waiting behind a group go as one group: each applied with its own revision and its own results")
    func oneGroupDistinctRevisions() async throws {
        try await withPostgres { storage in
            _ = try await storage.push(
                account: "alice",
                suite: "s",
                request: request(device: 99, [set("first", 0, hlc: 10)]),
                quota: Self.roomy,
                serverTime: Self.now
            )
            let count = 24
            // Every push a key of its own, and every third one also "shared": later ones in the group win it.
            let requests = (0..<count).map { index in
                request(
                    device: UInt64(index + 1),
                    [set("k\(index)", index, hlc: 1000 + UInt64(index))] + (index % 3 == 0 ? [set("shared", index, hlc: 1000 + UInt64(index))] : [])
                )
            }
            let responses = try await pushAsOneGroup(storage, requests).map { try $0.get() }

            var expectedHead: UInt64 = 1
            for (index, response) in responses.enumerated() {
                let ops = requests[index].ops
                #expect(response.results.map(\.key) == ops.map(\.key))
                #expect(response.results.allSatisfy { $0.status == .applied })
                expectedHead += UInt64(ops.count)
                #expect(response.headRev == expectedHead, "push \(index): each push sees the ones before it in the group")
                let own = try #require(response.results[0].winner)
                #expect(own.key == "k\(index)" && own.origin == UInt64(index + 1) && own.value == .integer(index))
                #expect(own.rev == expectedHead - UInt64(ops.count) + 1)
            }
            let revisions = responses.flatMap { $0.results.compactMap(\.winner?.rev) }
            #expect(Set(revisions).count == revisions.count, "distinct revisions")
            #expect(revisions.sorted() == Array(2...expectedHead))

            let changes = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 1000).page()
            #expect(changes.lastRev == expectedHead)
            #expect(changes.entries.count == count + 2)
            let byKey = Dictionary(uniqueKeysWithValues: changes.entries.map { ($0.key, $0) })
            for (index, response) in responses.enumerated() {
                #expect(byKey["k\(index)"]?.rev == response.results[0].winner?.rev)
            }
            let lastShared = (0..<count).last { $0 % 3 == 0 }!
            #expect(byKey["shared"]?.value == .integer(lastShared))
            #expect(byKey["shared"]?.rev == responses[lastShared].results[1].winner?.rev)
            #expect(try await storage.headRevision(account: "alice", suite: "s") == expectedHead)
            let history = try await storage.history(account: "alice", suite: "s", key: "shared")
            #expect(
                history.map(\.entry.rev)
                    == responses.enumerated().filter { $0.offset % 3 == 0 }.map { $0.element.results[1].winner?.rev }
                    .reversed().prefix(10).map { $0 },
                "the key history keeps each version of the group, the last 10"
            )
            let suites = try await storage.suites(account: "alice")
            #expect(suites.suites.first?.keys == count + 2)
        }
    }

    @Test("a push refused in a group (quota, encryption, idempotency) changes nothing for the others; a retry answers the same")
    func refusalsInAGroup() async throws {
        try await withPostgres { storage in
            let quota = SuiteQuota(maxKeys: 4, maxBytes: 1 << 20)
            let first = request(device: 1, batch: "b1", [set("a", 1, hlc: 100)])
            let requests = [
                first,
                request(device: 2, [set("x1", 1, hlc: 101), set("x2", 1, hlc: 101), set("x3", 1, hlc: 101), set("x4", 1, hlc: 101)]),
                request(device: 3, [sealed("k", epoch: 1, hlc: 102)]),
                request(device: 1, batch: "b1", [set("a", 2, hlc: 103)]),
                request(device: 4, batch: "b4", [set("b", 1, hlc: 104), set("a", 0, hlc: 99)]),
                first,
            ]
            let outcomes = await pushAsOneGroup(storage, quota: quota, requests)

            let applied = try outcomes[0].get()
            #expect(applied.headRev == 1 && applied.results.map(\.winner?.rev) == [1])
            #expect(outcomes[1].failure?.code == .quotaExceeded, "\(outcomes[1])")
            #expect(outcomes[2].failure?.code == .suiteNotEncrypted, "\(outcomes[2])")
            #expect(outcomes[3].failure?.code == .idempotencyMismatch, "\(outcomes[3])")
            let fourth = try outcomes[4].get()
            #expect(fourth.headRev == 2)
            #expect(fourth.results.map(\.status) == [.applied, .superseded])
            #expect(fourth.results.map(\.winner?.rev) == [2, 1], "the superseded op's winner is the group's earlier write")
            #expect(try outcomes[5].get() == applied, "the same batch again in the group: the same answer")

            // After the group: retries answer the same, refusals are still refused, nothing else was written.
            let retried = try await storage.push(account: "alice", suite: "s", request: first, quota: quota, serverTime: "later")
            #expect(retried == applied)
            let retriedFourth = try await storage.push(account: "alice", suite: "s", request: requests[4], quota: quota, serverTime: "later")
            #expect(retriedFourth == fourth)
            do {
                _ = try await storage.push(account: "alice", suite: "s", request: requests[1], quota: quota, serverTime: "later")
                Issue.record("the push over the quota was accepted on its retry")
            } catch let error as SyncStorageError {
                #expect(error.code == .quotaExceeded)
            }
            let changes = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 100).page()
            #expect(changes.entries.map(\.key) == ["a", "b"] && changes.entries.map(\.rev) == [1, 2])
            #expect(try await storage.suites(account: "alice").suites.first?.keys == 2)
        }
    }

    @Test("a push under a retired key epoch is refused in a group; the others under the current epoch are applied")
    func staleEpochInAGroup() async throws {
        try await withPostgres { storage in
            _ = try await storage.push(
                account: "alice",
                suite: "s",
                request: request(device: 1, [sealed("k0", epoch: 1, hlc: 10)]),
                quota: Self.roomy,
                serverTime: Self.now
            )
            var chain = TestKeyChain(suite: "s")
            try await storage.anchorKeyBags(account: "alice", suite: "s", anchor: chain.anchor())
            try await storage.putKeyBag(account: "alice", suite: "s", epoch: 2, bag: chain.bag(2))
            let outcomes = await pushAsOneGroup(
                storage,
                [
                    request(device: 2, [sealed("k1", epoch: 2, hlc: 20)]),
                    request(device: 3, [sealed("k2", epoch: 1, hlc: 21)]),
                    request(device: 4, [sealed("k3", epoch: 2, hlc: 22)]),
                ]
            )
            #expect(try outcomes[0].get().results.map(\.winner?.rev) == [2])
            #expect(outcomes[1].failure?.code == .staleKeyEpoch, "\(outcomes[1])")
            #expect(try outcomes[2].get().results.map(\.winner?.rev) == [3])
            let changes = try await storage.changes(account: "alice", suite: "s", since: 0, limit: 100).page()
            #expect(changes.entries.map(\.key) == ["k0", "k1", "k3"])
        }
    }

    @Test("two instances pushing to one suite at once: every push applied once, revisions distinct and gapless")
    func twoInstancesRace() async throws {
        let url = try await PostgresFixture.freshDatabase()
        let first = try await PostgresFixture.storage(url: url)
        let second = try await PostgresFixture.storage(url: url)
        let perInstance = 40
        let responses = try await withThrowingTaskGroup(of: (String, PushResponse).self) { group in
            for (instance, storage) in [first, second].enumerated() {
                for index in 0..<perInstance {
                    let key = "i\(instance)-\(index)"
                    group.addTask {
                        let response = try await storage.push(
                            account: "alice",
                            suite: "s",
                            request: request(device: UInt64(instance * 1000 + index), [set(key, index, hlc: 500)]),
                            quota: Self.roomy,
                            serverTime: Self.now
                        )
                        return (key, response)
                    }
                }
            }
            var responses: [String: PushResponse] = [:]
            for try await (key, response) in group { responses[key] = response }
            return responses
        }
        let revisions = responses.values.compactMap { $0.results[0].winner?.rev }
        #expect(revisions.sorted() == Array(1...UInt64(2 * perInstance)))
        #expect(responses.allSatisfy { $0.value.results.map(\.key) == [$0.key] && $0.value.results[0].status == .applied })
        let changes = try await first.changes(account: "alice", suite: "s", since: 0, limit: 1000).page()
        #expect(changes.entries.count == 2 * perInstance && changes.lastRev == UInt64(2 * perInstance))
        for entry in changes.entries { #expect(responses[entry.key]?.results[0].winner?.rev == entry.rev) }
        try await first.shutdown()
        try await second.shutdown()
    }

    @Test(
        "concurrent pushes through the real server, on each backend: each answered with its own results and a distinct revision; refused ones and retries do not disturb them",
        arguments: StorageBackend.allCases
    )
    func concurrentPushesThroughTheServer(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.serverStorage("gds-group")
        defer { cleanup() }
        let server = try await ServerProcess(dataDirectory: nil, extraArguments: storage + ["--rate-limit", "100000"])
        let token = try await ServerTool.createToken(storage: storage)
        let suite = "group.concurrent"
        let first = request(device: 500, batch: "first", [set("first", 0, hlc: API.hlc().rawValue)])
        let firstResponse = try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            try Self.decode(PushResponse.self, try await client.post("/v1/suites/\(suite)/push", headers: API.auth(token), body: API.body(first)))
        }

        enum Kind: Sendable {
            case own(Int)
            case sealed, retry
        }
        let clients = 30
        let kinds: [Kind] = (0..<clients).map(Kind.own) + Array(repeating: .sealed, count: 4) + Array(repeating: .retry, count: 4)
        let answers = try await withThrowingTaskGroup(of: (Kind, TestClient.Response).self) { group in
            for kind in kinds {
                group.addTask {
                    let body: PushRequest
                    switch kind {
                    case .own(let index): body = request(device: UInt64(index + 1), [set("k\(index)", index, hlc: API.hlc().rawValue)])
                    case .sealed: body = request(device: 600, [sealed("secret", epoch: 1, hlc: API.hlc().rawValue)])
                    case .retry: body = first
                    }
                    let response = try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
                        try await client.post("/v1/suites/\(suite)/push", headers: API.auth(token), body: API.body(body))
                    }
                    return (kind, response)
                }
            }
            var answers: [(Kind, TestClient.Response)] = []
            for try await answer in group { answers.append(answer) }
            return answers
        }
        var revisions: [String: UInt64] = [:]
        for (kind, response) in answers {
            switch kind {
            case .own(let index):
                #expect(response.status == .ok)
                let pushed = try Self.decode(PushResponse.self, response)
                #expect(pushed.results.count == 1 && pushed.results[0].status == .applied)
                let winner = try #require(pushed.results[0].winner)
                #expect(winner.key == "k\(index)" && winner.origin == UInt64(index + 1) && winner.value == .integer(index))
                #expect(pushed.headRev >= winner.rev ?? .max)
                revisions[winner.key] = winner.rev ?? 0
            case .sealed:
                #expect(response.status == .conflict)
                #expect(try Self.decode(SyncErrorBody.self, response).error == .suiteNotEncrypted)
            case .retry:
                #expect(response.status == .ok)
                #expect(try Self.decode(PushResponse.self, response) == firstResponse)
            }
        }
        #expect(Set(revisions.values).count == clients)
        #expect(revisions.values.sorted() == Array(2...UInt64(clients + 1)))
        let pushedRevisions = revisions
        try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            let page = try Self.decode(
                ChangesPage.self,
                try await client.get("/v1/suites/\(suite)/changes?since=0&limit=1000", headers: API.auth(token))
            )
            #expect(page.entries.count == clients + 1 && page.lastRev == UInt64(clients + 1))
            for entry in page.entries where entry.key != "first" { #expect(pushedRevisions[entry.key] == entry.rev) }
        }
        await server.stop()
    }
}

extension PostgresGroupCommitTests {
    static func decode<T: Decodable>(_ type: T.Type, _ response: TestClient.Response) throws -> T {
        try JSONDecoder().decode(T.self, from: Data((response.body ?? ByteBuffer()).readableBytesView))
    }
}

extension Result {
    /// The error, if it is one.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
