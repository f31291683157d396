import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("Limits and errors: bad input is a 4xx with a code and changes nothing")
struct ErrorTests {
    /// Sends `body` raw to the push route and expects `status` and `code`; the suite stays unwritten.
    private func expectRefused(
        _ body: String,
        status: HTTPResponse.Status,
        code: SyncErrorCode,
        limits: SyncLimits = SyncLimits(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let fixture = try Fixture(limits: limits)
        let token = try await fixture.token()
        try await fixture.test { client in
            let response = try await client.push("s", token: token, ByteBuffer(string: body))
            #expect(response.status == status, sourceLocation: sourceLocation)
            #expect(try API.error(response).error == code, sourceLocation: sourceLocation)
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(snapshot.headRev == 0, sourceLocation: sourceLocation)
        }
    }

    private func pushJSON(_ ops: [PushOp], device: String = "\"1\"") throws -> String {
        let encoded = String(decoding: try JSONEncoder().encode(ops), as: UTF8.self)
        return "{\"device_id\": \(device), \"batch_id\": \"b\", \"ops\": \(encoded)}"
    }

    @Test(
        "malformed bodies are 400 malformed",
        arguments: [
            "{bad", "", "[]", "null", "{\"device_id\": 1, \"batch_id\": \"b\", \"ops\": []}",
            "{\"device_id\": \"99999999999999999999999\", \"batch_id\": \"b\", \"ops\": []}",
            "{\"device_id\": \"1\", \"batch_id\": \"b\", \"ops\": [{\"key\": \"k\", \"hlc\": \"1\"}]}",
            "{\"device_id\": \"1\", \"batch_id\": \"b\", \"ops\": [{\"key\": \"k\", \"value\": {\"string\": \"v\"}, \"deleted\": true, \"hlc\": \"1\"}]}",
            "{\"device_id\": \"1\", \"batch_id\": \"b\", \"ops\": [{\"key\": \"k\", \"value\": {\"integer\": 1e400}, \"hlc\": \"1\"}]}",
            "{\"device_id\": \"1\", \"batch_id\": \"b\", \"ops\": [{\"key\": 5, \"value\": {\"string\": \"v\"}, \"hlc\": \"1\"}]}",
            "{\"device_id\": \"1\", \"batch_id\": \"\", \"ops\": []}",
        ]
    )
    func malformed(body: String) async throws {
        try await expectRefused(body, status: .badRequest, code: .malformed)
    }

    @Test("too many ops is 413 batch_too_large")
    func batchTooLarge() async throws {
        let ops = (0..<4).map { API.set("k\($0)", "v") }
        try await expectRefused(try pushJSON(ops), status: .contentTooLarge, code: .batchTooLarge, limits: SyncLimits(maxOpsPerBatch: 3))
    }

    @Test("a body over the limit is 413 body_too_large")
    func bodyTooLarge() async throws {
        let ops = [API.set("k", String(repeating: "x", count: 3000))]
        try await expectRefused(try pushJSON(ops), status: .contentTooLarge, code: .bodyTooLarge, limits: SyncLimits(maxBodyBytes: 1000))
    }

    @Test("a key over 511 bytes is 422 key_too_long; 511 is fine")
    func keyTooLong() async throws {
        try await expectRefused(try pushJSON([API.set(String(repeating: "k", count: 512), "v")]), status: .unprocessableContent, code: .keyTooLong)
        let fixture = try Fixture()
        let token = try await fixture.token()
        let longest = String(repeating: "é", count: 255) + "k"  // 511 bytes
        try await fixture.test { client in
            #expect(
                try await client.push(
                    "s",
                    token: token,
                    API.push([API.set(longest, "v", hlc: API.hlc()), API.set(longest, "w", hlc: API.hlc(offsetMilliseconds: 1))])
                ).status == .ok
            )
            // A second long key sharing 510 bytes with the first is its own entry.
            let sibling = String(repeating: "é", count: 255) + "j"
            #expect(try await client.push("s", token: token, API.push([API.set(sibling, "x")])).status == .ok)
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(Set(snapshot.entries.map(\.key)) == [longest, sibling])
            #expect(snapshot.entries.first { $0.key == longest }?.value == .string("w"))
        }
    }

    /// Pushes `bad` between two good ops and expects: 200, the good ops applied, `bad` answered
    /// `refused` with `code`, and nothing stored for its key.
    private func expectRefusedAlone(
        _ bad: PushOp,
        code: SyncErrorCode,
        limits: SyncLimits = SyncLimits(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let fixture = try Fixture(limits: limits)
        let token = try await fixture.token()
        try await fixture.test { client in
            let response = try await client.push("s", token: token, API.push([API.set("before", "1"), bad, API.set("after", "2")]))
            #expect(response.status == .ok, sourceLocation: sourceLocation)
            let answer = try API.decode(PushResponse.self, response)
            #expect(answer.results.map(\.status) == [.applied, .refused, .applied], sourceLocation: sourceLocation)
            #expect(answer.results[1].error == code && answer.results[1].winner == nil, sourceLocation: sourceLocation)
            #expect(answer.results[1].detail?.isEmpty == false, sourceLocation: sourceLocation)
            #expect(answer.headRev == 2, "the refused op took no revision", sourceLocation: sourceLocation)
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(Set(snapshot.entries.map(\.key)) == ["before", "after"], sourceLocation: sourceLocation)
        }
    }

    @Test("a value over the limit (as typed JSON) is refused alone: value_too_large, the batch's other ops applied")
    func valueTooLarge() async throws {
        try await expectRefusedAlone(
            API.set("k", String(repeating: "x", count: 100)),
            code: .valueTooLarge,
            limits: SyncLimits(maxValueBytes: 50)
        )
    }

    @Test("a value holding a dictionary with two canonically equivalent keys is refused alone: malformed, never stored merged")
    func equivalentKeysRefusedAlone() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            let value = #"{"dictionary":{"caf\u00e9":{"integer":1},"cafe\u0301":{"integer":2}}}"#
            let body =
                #"{"device_id":"1","batch_id":"b","ops":[{"key":"before","value":{"string":"1"},"hlc":"\#(API.hlc())"},"#
                + #"{"key":"menu","value":\#(value),"hlc":"\#(API.hlc())"},{"key":"after","value":{"dictionary":{"caf\u00e9":{"integer":1}}},"hlc":"\#(API.hlc())"}]}"#
            let response = try await client.push("s", token: token, ByteBuffer(string: body))
            #expect(response.status == .ok)
            let answer = try API.decode(PushResponse.self, response)
            #expect(answer.results.map(\.status) == [.applied, .refused, .applied])
            #expect(
                answer.results[1].error == .malformed && answer.results[1].detail?.contains("canonically equivalent") == true,
                "\(answer.results[1])"
            )
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(snapshot.entries.map(\.key) == ["after", "before"])
        }
    }

    @Test("an HLC more than 5 minutes ahead is refused alone: clock_skew, the batch's other ops applied; 4 minutes is fine")
    func clockSkew() async throws {
        try await expectRefusedAlone(API.set("k", "v", hlc: API.hlc(offsetMilliseconds: 6 * 60_000)), code: .clockSkew)
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            let response = try await client.push("s", token: token, API.push([API.set("k", "v", hlc: API.hlc(offsetMilliseconds: 4 * 60_000))]))
            #expect(try API.decode(PushResponse.self, response).results.map(\.status) == [.applied])
        }
    }

    @Test("a held entry stamped far in the future (a server clock that was wrong) loses to any honest write")
    func futureEntryLoses() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        let future = HLC(milliseconds: HLC.wallClockMilliseconds() + 10 * 365 * 86_400_000, counter: 0)
        // Stored as a server whose clock was ten years ahead took it (storage does not check clocks).
        _ = try await fixture.storage.push(
            account: "alice",
            suite: "s",
            request: PushRequest(deviceID: 5, batchID: "wrong-clock", ops: [API.set("volume", "loud", hlc: future)]),
            quota: SuiteQuota(maxKeys: 100, maxBytes: 100_000),
            serverTime: ""
        )
        try await fixture.test { client in
            let response = try await client.push("s", token: token, API.push([API.set("volume", "quiet")]))
            let answer = try API.decode(PushResponse.self, response)
            #expect(answer.results.map(\.status) == [.applied])
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(snapshot.entries.map(\.value) == [.string("quiet")])
        }
    }

    /// A value nested `depth` arrays deep around an integer.
    static func nested(_ depth: Int) -> PropertyListValue {
        var value = PropertyListValue.integer(1)
        for _ in 0..<depth { value = .array([value]) }
        return value
    }

    @Test("one nesting limit: a value at the limit goes through every read; one deeper is 422 value_too_deep and the suite still answers")
    func nestingLimit() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            let deepest = Self.nested(PropertyListValue.maximumNestingDepth)
            #expect(deepest.nestingDepth == PropertyListValue.maximumNestingDepth)
            let ok = try await client.push("s", token: token, API.push([PushOp(key: "deep", value: deepest, hlc: API.hlc())]))
            #expect(ok.status == .ok)
            for depth in [PropertyListValue.maximumNestingDepth + 1, 254] {
                // Written by hand: JSONEncoder itself refuses values this deep.
                let value = String(repeating: "{\"array\":[", count: depth) + "{\"integer\":1}" + String(repeating: "]}", count: depth)
                let body =
                    "{\"device_id\":\"1\",\"batch_id\":\"b\(depth)\",\"ops\":[{\"key\":\"deeper\",\"value\":\(value),\"hlc\":\"\(API.hlc())\"}]}"
                let refused = try await client.push("s", token: token, ByteBuffer(string: body))
                #expect(refused.status == .unprocessableContent, "\(depth)")
                #expect(try API.error(refused).error == .valueTooDeep, "\(depth)")
            }
            let changes = try API.decode(ChangesPage.self, try await client.get("/v1/suites/s/changes?since=0", token: token))
            #expect(changes.entries.map(\.value) == [deepest])
            let snapshot = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/s/snapshot", token: token))
            #expect(snapshot.entries.map(\.value) == [deepest])
            let history = try await client.get("/v1/suites/s/keys/deep/history", token: token)
            #expect(history.status == .ok)
            #expect(String(buffer: history.body).contains("\"array\""))
        }
    }

    @Test("bad query parameters are 400; a bad suite name is 422 invalid_suite")
    func queries() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            for uri in [
                "changes?since=-1", "changes?since=abc", "changes?since=99999999999999999999999", "changes?limit=x",
                "changes?limit=0", "changes?wait=-3", "snapshot?limit=-1",
            ] {
                let response = try await client.get("/v1/suites/s/\(uri)", token: token)
                #expect(response.status == .badRequest, "\(uri)")
                #expect(try API.error(response).error == .malformed, "\(uri)")
            }
            let longName = String(repeating: "n", count: 256)
            for suite in [longName, "a%00b", "a%2Fb", "a%zz"] {
                let response = try await client.get("/v1/suites/\(suite)/changes", token: token)
                #expect(response.status == .unprocessableContent, "\(suite)")
                #expect(try API.error(response).error == .invalidSuite, "\(suite)")
            }
        }
    }

    @Test("unknown routes are 404 not_found and wrong methods a 4xx, as JSON")
    func routes() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            let unknown = try await client.get("/v2/nothing", token: token)
            #expect(unknown.status == .notFound)
            #expect(try API.error(unknown).error == .notFound)
            let wrongMethod = try await client.execute(uri: "/v1/suites/s/push", method: .get, headers: API.auth(token))
            #expect((400..<500).contains(wrongMethod.status.code))
            #expect(try !API.error(wrongMethod).error.rawValue.isEmpty)
            let deleteLimits = try await client.execute(uri: "/v1/limits", method: .delete)
            #expect((400..<500).contains(deleteLimits.status.code))
        }
    }

    @Test("health and limits need no token; limits are the configured ones")
    func openRoutes() async throws {
        let limits = SyncLimits(maxKeyBytes: 100, maxOpsPerBatch: 7)
        let fixture = try Fixture(limits: limits)
        try await fixture.test { client in
            #expect(try await client.execute(uri: "/v1/health", method: .get).status == .ok)
            let answer = try await client.execute(uri: "/v1/limits", method: .get)
            let published = try API.decode(SyncLimits.self, answer)
            #expect(published == limits)
            // The server's version beside them, the package's (as `--version` prints it).
            let fields = try JSONSerialization.jsonObject(with: Data(answer.body.readableBytesView)) as? [String: Any]
            #expect(fields?["version"] as? String == packageVersion)
        }
    }
}

@Suite("Storage unavailable")
struct UnavailableTests {
    @Test("a store that cannot answer is 503 unavailable with Retry-After, never a crash")
    func unavailable() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.storage.shutdown()
        try await fixture.test { client in
            let response = try await client.get("/v1/suites", token: token)
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] != nil)
            #expect(try API.error(response).error == .unavailable)
            let push = try await client.push("s", token: token, API.push([API.set("k", "v")]))
            #expect(push.status == .serviceUnavailable)
        }
    }
}
