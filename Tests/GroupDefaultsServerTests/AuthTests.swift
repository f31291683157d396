import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import Testing

@Suite("Auth and isolation")
struct AuthTests {
    @Test("missing, malformed, unknown, expired and revoked tokens are 401 with WWW-Authenticate, before anything else")
    func unauthorized() async throws {
        let fixture = try Fixture()
        let expired = try await fixture.token(expires: Date().addingTimeInterval(-1))
        let revoked = try await fixture.token()
        let id = try #require(try await fixture.storage.tokens().first { $0.hash == Tokens.hash(revoked) }?.id)
        try await fixture.storage.revokeToken(id: id, at: Date())
        try await fixture.test { client in
            let cases: [HTTPFields] = [
                [:], [.authorization: "Basic abc"], [.authorization: "Bearer gdt_unknown"],
                API.auth(expired), API.auth(revoked),
            ]
            for headers in cases {
                // A bad request too: 401 wins.
                let response = try await client.execute(
                    uri: "/v1/suites/a%00b/push",
                    method: .post,
                    headers: headers,
                    body: ByteBuffer(string: "{bad")
                )
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate] == "Bearer")
                #expect(try API.error(response).error == .unauthorized)
                for (uri, method) in [
                    ("/v1/suites", HTTPRequest.Method.get), ("/v1/suites/s/unknown", .get), ("/v1/suites/s/push", .delete),
                    ("/v1/suites/s/changes?since=-1", .get),
                ] {
                    #expect(try await client.execute(uri: uri, method: method, headers: headers).status == .unauthorized, "\(uri)")
                }
            }
        }
    }

    @Test("a suite outside the token's patterns or a write with a read-only token is 403")
    func forbidden() async throws {
        let fixture = try Fixture()
        let scoped = try await fixture.token(suites: ["group.*.shared", "exact"])
        let readOnly = try await fixture.token(readOnly: true)
        try await fixture.test { client in
            #expect(try await client.push("group.com.example.shared", token: scoped, API.push([API.set("k", "v")])).status == .ok)
            #expect(try await client.push("exact", token: scoped, API.push([API.set("k", "v")])).status == .ok)
            for suite in ["other", "group.x.private", "exactly"] {
                let response = try await client.get("/v1/suites/\(suite)/changes", token: scoped)
                #expect(response.status == .forbidden, "\(suite)")
                #expect(try API.error(response).error == .forbidden)
            }
            let write = try await client.push("exact", token: readOnly, API.push([API.set("k", "w")]))
            #expect(write.status == .forbidden)
            #expect(try await client.get("/v1/suites/exact/snapshot", token: readOnly).status == .ok)
            // Listing shows only suites in scope.
            _ = try await client.push("exact", token: scoped, API.push([API.set("j", "v")]))
            let list = try API.decode(SuiteList.self, try await client.get("/v1/suites", token: scoped))
            #expect(list.suites.map(\.name) == ["exact", "group.com.example.shared"])
        }
    }

    @Test("history and devices obey the token: 401 without one, 403 outside its suites, never another account's")
    func historyAndDevicesAreScoped() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.token(device: "phone")
        let aliceScoped = try await fixture.token(suites: ["group.a"])
        let aliceElsewhere = try await fixture.token(suites: ["group.other.*"])
        let bob = try await fixture.token(account: "bob")
        try await fixture.test { client in
            var headers = API.auth(alice)
            headers[.init(DeviceHeader.name)!] = "42"
            let pushed = try await client.execute(
                uri: "/v1/suites/group.a/push",
                method: .post,
                headers: headers,
                body: try API.push(device: 42, [API.set("k", "v")])
            )
            #expect(pushed.status == .ok)
            _ = try await client.execute(uri: "/v1/suites/group.b/changes", method: .get, headers: headers)

            for uri in ["/v1/suites/group.a/keys/k/history", "/v1/suites/group.a/history", "/v1/devices"] {
                #expect(try await client.execute(uri: uri, method: .get).status == .unauthorized, "\(uri)")
                #expect(try await client.get(uri, token: "gdt_unknown").status == .unauthorized, "\(uri)")
            }
            let history = try API.decode(KeyHistory.self, try await client.get("/v1/suites/group.a/keys/k/history", token: alice))
            #expect(history.versions.map(\.entry.value) == [.string("v")])
            #expect(history.versions.first?.entry.origin == 42)
            #expect(try await client.get("/v1/suites/group.b/keys/k/history", token: aliceScoped).status == .forbidden)
            #expect(try await client.get("/v1/suites/group.b/history", token: aliceScoped).status == .forbidden)
            let page = try API.decode(SuiteHistoryPage.self, try await client.get("/v1/suites/group.a/history", token: alice))
            #expect(page.history == [history] && page.next == nil)
            #expect(try API.decode(SuiteHistoryPage.self, try await client.get("/v1/suites/group.a/history", token: bob)).history.isEmpty)
            let unknown = try await client.get("/v1/suites/group.a/keys/never/history", token: alice)
            #expect(unknown.status == .notFound)
            #expect(try API.error(unknown).error == .notFound)
            // Bob's suite of the same name is another suite.
            #expect(try await client.get("/v1/suites/group.a/keys/k/history", token: bob).status == .notFound)

            let devices = try API.decode(DeviceList.self, try await client.execute(uri: "/v1/devices", method: .get, headers: headers))
            #expect(devices.devices.map(\.name) == ["phone"])
            #expect(devices.devices.first?.deviceID == 42)
            #expect(devices.devices.first?.current == true)
            #expect(devices.devices.first?.suites == ["group.a", "group.b"])
            #expect(devices.devices.first?.lastPush != nil)
            let scoped = try API.decode(DeviceList.self, try await client.get("/v1/devices", token: aliceScoped))
            #expect(scoped.devices.first?.suites == ["group.a"], "only the suites the token covers")
            #expect(scoped.devices.first?.current == false)
            #expect(try API.decode(DeviceList.self, try await client.get("/v1/devices", token: bob)).devices.isEmpty)
            #expect(
                try API.decode(DeviceList.self, try await client.get("/v1/devices", token: aliceElsewhere)).devices.isEmpty,
                "a device that used none of the token's suites is not shown"
            )
            #expect(devices.devices.first?.unverified == false)
            // Another token naming the phone's device id in its push: listed, but as unverified.
            var impostor = API.auth(aliceScoped)
            impostor[.init(DeviceHeader.name)!] = "42"
            #expect(
                try await client.execute(
                    uri: "/v1/suites/group.a/push",
                    method: .post,
                    headers: impostor,
                    body: try API.push(device: 42, [API.set("k", "w")])
                ).status == .ok
            )
            let both = try API.decode(DeviceList.self, try await client.execute(uri: "/v1/devices", method: .get, headers: headers)).devices
            #expect(both.filter { $0.deviceID == 42 }.map(\.unverified).sorted { !$0 && $1 } == [false, true], "\(both)")
            #expect(both.first { $0.deviceID == 42 && $0.unverified }?.name == nil, "the impostor's record, not the phone's")
            var badDevice = API.auth(alice)
            badDevice[.init(DeviceHeader.name)!] = "-1"
            #expect(try await client.execute(uri: "/v1/suites/group.a/changes", method: .get, headers: badDevice).status == .badRequest)
        }
    }

    @Test("revocation takes effect on the next request")
    func revocation() async throws {
        let fixture = try Fixture()
        let token = try await fixture.token()
        try await fixture.test { client in
            #expect(try await client.get("/v1/suites", token: token).status == .ok)
            let id = try #require(try await fixture.storage.tokens().first?.id)
            try await fixture.storage.revokeToken(id: id, at: Date())
            #expect(try await client.get("/v1/suites", token: token).status == .unauthorized)
        }
    }

    @Test("accounts are namespaces: the same suite name in two accounts is two suites")
    func isolation() async throws {
        let fixture = try Fixture()
        let alice = try await fixture.token(account: "alice")
        let bob = try await fixture.token(account: "bob")
        try await fixture.test { client in
            _ = try await client.push("shared", token: alice, API.push([API.set("secret", "alice's")]))
            let bobs = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/shared/snapshot", token: bob))
            #expect(bobs.entries.isEmpty && bobs.headRev == 0)
            #expect(try API.decode(SuiteList.self, try await client.get("/v1/suites", token: bob)).suites.isEmpty)
            _ = try await client.push("shared", token: bob, API.push([API.set("secret", "bob's")]))
            let alices = try API.decode(ChangesPage.self, try await client.get("/v1/suites/shared/changes", token: alice))
            #expect(alices.entries.map(\.value) == [.string("alice's")])
        }
    }

    @Test("a token whose account name could be confused with another's (NUL, '/', empty) is refused")
    func invalidAccount() async throws {
        let fixture = try Fixture()
        let tokens = [try await fixture.token(account: "a\u{0}b"), try await fixture.token(account: ""), try await fixture.token(account: "a/b")]
        try await fixture.test { client in
            for token in tokens {
                let response = try await client.get("/v1/suites", token: token)
                #expect(response.status == .unauthorized)
            }
        }
    }

    @Test("suite patterns: '*' matches any run, dots included")
    func patterns() throws {
        #expect(GlobPattern.matches("*", "anything.at.all"))
        #expect(GlobPattern.matches("group.*", "group.com.example"))
        #expect(GlobPattern.matches("a*b*c", "a.x.b.y.c"))
        #expect(!GlobPattern.matches("group.*", "groups"))
        #expect(!GlobPattern.matches("a*c", "abcd"))
        #expect(GlobPattern.matches("exact", "exact"))
        #expect(try GlobPattern("draft.*").matches("draft.message"))
        for refused in ["", "a\nb", String(repeating: "k", count: GlobPattern.maximumLength + 1)] {
            #expect(throws: GlobPattern.Invalid.self) { try GlobPattern(refused) }
        }
    }
}

@Suite("Rate limit")
struct RateLimitTests {
    @Test("a token past its allowance gets 429 rate_limited with Retry-After; another token is unaffected; the allowance refills")
    func tooManyRequests() async throws {
        var fixture = try Fixture()
        // One request per 1,000 s beyond a burst of 2: three requests in a row stay within the
        // burst's refill time however loaded the machine is (the refill is measured on the
        // limiter's own clock, below).
        fixture.configuration.rateLimit = RateLimit(requestsPerSecond: 0.001, burst: 2)
        let busy = try await fixture.token()
        let other = try await fixture.token(account: "bob")
        try await fixture.test { client in
            #expect(try await client.get("/v1/suites", token: busy).status == .ok)
            #expect(try await client.get("/v1/suites", token: busy).status == .ok)
            let refused = try await client.get("/v1/suites", token: busy)
            #expect(refused.status == .tooManyRequests)
            #expect(try API.error(refused).error == .rateLimited)
            // The rate as given, not cut to a whole number ("more than 0 requests per second").
            let words = try API.error(refused).detail
            #expect(words.contains("more than 0.001 requests per second"), "\(words)")
            let retryAfter = Int(refused.headers[.retryAfter] ?? "") ?? 0
            #expect(retryAfter >= 1)
            #expect(try await client.get("/v1/suites", token: other).status == .ok)
            // Unauthenticated requests are 401 before any allowance is counted.
            #expect(try await client.get("/v1/suites", token: "gdt_unknown").status == .unauthorized)
        }
        // The allowance refills at its rate: on the limiter's clock, one request per 5 s.
        let limiter = RateLimiter(RateLimit(requestsPerSecond: 0.2, burst: 2))
        let start = ContinuousClock.now
        #expect(limiter.admit("t", now: start) == nil && limiter.admit("t", now: start) == nil)
        let wait = try #require(limiter.admit("t", now: start))
        #expect(wait > .seconds(4.9) && wait <= .seconds(5))
        #expect(limiter.admit("t", now: start + .seconds(4)) != nil)
        #expect(limiter.admit("t", now: start + .seconds(5)) == nil)
    }

    @Test("with a metrics token, /metrics answers only that bearer token; a sync token is not it")
    func metricsToken() async throws {
        var fixture = try Fixture()
        fixture.configuration.metricsToken = "metrics-secret-0123456789"
        let sync = try await fixture.token()
        try await fixture.test { client in
            #expect(try await client.execute(uri: "/metrics", method: .get).status == .unauthorized)
            #expect(try await client.get("/metrics", token: sync).status == .unauthorized)
            #expect(try await client.get("/metrics", token: "metrics-secret-012345678").status == .unauthorized)
            let answered = try await client.get("/metrics", token: "metrics-secret-0123456789")
            #expect(answered.status == .ok)
            #expect(String(buffer: answered.body).contains("groupdefaults_"))
        }
    }

    @Test(
        "a device id's record is unverified only while an earlier token of another device name still works: never the first token's, never a new token of the same name"
    )
    func deviceIDOwners() {
        func device(_ token: String, _ id: UInt64, firstSeen: UInt64, name: String? = nil) -> StoredDevice {
            StoredDevice(
                account: "alice",
                tokenID: token,
                name: name,
                deviceID: id,
                firstSeen: firstSeen,
                lastSeen: firstSeen,
                lastPush: nil,
                suites: []
            )
        }
        // Unbound tokens: the server cannot tell a renewed token from another device's.
        let old = device("tok_old", 7, firstSeen: 1)
        let renewed = device("tok_new", 7, firstSeen: 5)
        let impostor = device("tok_other", 7, firstSeen: 9)
        let all = [old, renewed, impostor]
        let live = StoredDevice.unverified(among: all, activeTokens: ["tok_old", "tok_new", "tok_other"])
        #expect(Set(live.keys) == [renewed.identity, impostor.identity])
        #expect(live[renewed.identity] == old && live[impostor.identity] == old, "each is named with the first record standing against it")
        let oldRevoked = StoredDevice.unverified(among: all, activeTokens: ["tok_new", "tok_other"])
        #expect(
            Set(oldRevoked.keys) == [impostor.identity] && oldRevoked[impostor.identity] == renewed,
            "the revoked token's record was first: never marked; the renewed device is not flagged; the impostor still is"
        )
        #expect(StoredDevice.unverified(among: [old], activeTokens: []).isEmpty)
        #expect(StoredDevice.unverified(among: all, activeTokens: []).isEmpty, "no earlier token works: nothing stands against anyone")

        // Bound tokens: a new token of the same name is the same device, live old token or not;
        // another device's token claiming the id is marked while the phone's works.
        let phone = device("tok_phone", 8, firstSeen: 1, name: "phone")
        let phoneAgain = device("tok_phone2", 8, firstSeen: 4, name: "phone")
        let laptop = device("tok_laptop", 8, firstSeen: 6, name: "laptop")
        let bound = [phone, phoneAgain, laptop]
        let boundLive = StoredDevice.unverified(among: bound, activeTokens: ["tok_phone", "tok_phone2", "tok_laptop"])
        #expect(Set(boundLive.keys) == [laptop.identity] && boundLive[laptop.identity] == phone)
        #expect(Set(StoredDevice.unverified(among: bound, activeTokens: ["tok_phone2", "tok_laptop"]).keys) == [laptop.identity])
        #expect(StoredDevice.unverified(among: bound, activeTokens: ["tok_laptop"]).isEmpty, "both phone tokens revoked")
        // Names are compared as bytes: é precomposed and é decomposed are two names.
        let cafe = device("tok_cafe", 9, firstSeen: 1, name: "caf\u{E9}")
        let cafeDecomposed = device("tok_cafe2", 9, firstSeen: 2, name: "cafe\u{301}")
        #expect(
            Set(StoredDevice.unverified(among: [cafe, cafeDecomposed], activeTokens: ["tok_cafe", "tok_cafe2"]).keys) == [cafeDecomposed.identity],
            "two spellings of one text are two names"
        )
        // Another account's id is another id.
        var bobs = device("tok_bob", 7, firstSeen: 0)
        bobs.account = "bob"
        #expect(Set(StoredDevice.unverified(among: all + [bobs], activeTokens: ["tok_bob", "tok_new", "tok_other"]).keys) == [impostor.identity])
    }
}
