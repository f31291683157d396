import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

/// The console in-process: what its answers are (statuses, redirects, cookies, headers), what it
/// refuses (no session, no form token, another origin, too many failed sign-ins, a sync token),
/// and that whatever a key or value holds is shown as text. Its behaviour in a real browser is
/// `Tools/console-test`'s.
@Suite("Console")
struct ConsoleTests {
    /// bcrypt's lowest cost: these tests check the console, not bcrypt's work factor.
    static let password = "correct horse battery"

    /// A fixture with operator `ops`, and a client signed in as them when `signIn` is called.
    static func withConsole(
        _ configure: (inout ServerConfiguration) -> Void = { _ in },
        _ body: @escaping @Sendable (Fixture, any TestClientProtocol) async throws -> Void
    ) async throws {
        var fixture = try Fixture()
        configure(&fixture.configuration)
        try await Operators(storage: fixture.storage, cost: 4).create(name: "ops", password: password)
        let captured = fixture
        try await fixture.test { client in try await body(captured, client) }
    }

    @Test("every page but sign-in redirects to it without a session; every answer has the security headers")
    func pagesNeedASession() async throws {
        try await Self.withConsole { fixture, client in
            let token = try await fixture.token()
            for path in [
                "/console", "/console/accounts/alice", "/console/accounts/alice/suites/s",
                "/console/accounts/alice/suites/s/history?key=k", "/console/accounts/alice/suites/s/tail",
            ] {
                // A sync token is not a sign-in.
                let response = try await client.execute(uri: path, method: .get, headers: API.auth(token))
                #expect(response.status == .seeOther, "\(path)")
                #expect(response.headers[.location] == "/console/sign-in", "\(path)")
                Self.expectSecurityHeaders(response)
            }
            let signIn = try await client.execute(uri: "/console/sign-in", method: .get)
            #expect(signIn.status == .ok)
            Self.expectSecurityHeaders(signIn)
            for asset in ["/console/assets/console.css", "/console/assets/console.js"] {
                let response = try await client.execute(uri: asset, method: .get)
                #expect(response.status == .ok)
                Self.expectSecurityHeaders(response)
            }
        }
    }

    @Test("sign-in: a wrong password is 401, a form without its cookie's token 403, the right one a session cookie")
    func signIn() async throws {
        try await Self.withConsole { _, client in
            var session = ConsoleSession(client: client)
            let wrong = try await session.signIn(password: "not the password")
            #expect(wrong.status == .unauthorized)
            #expect(String(buffer: wrong.body).contains("Wrong name or password."))
            let unknown = try await session.signIn(name: "nobody")
            #expect(unknown.status == .unauthorized)

            // The sign-in form's token must match the cookie set with the form.
            let form = try await client.execute(uri: "/console/sign-in", method: .get)
            let forged = try await client.execute(
                uri: "/console/sign-in",
                method: .post,
                headers: [.contentType: "application/x-www-form-urlencoded"],
                body: ConsoleSession.form(["csrf": "forged", "name": "ops", "password": Self.password])
            )
            #expect(forged.status == .forbidden)
            #expect(Self.cookies(form)["gd_console_signin"] != nil)

            let right = try await session.signIn()
            #expect(right.status == .seeOther)
            #expect(right.headers[.location] == "/console")
            let cookie = try #require(right.headers[values: .setCookie].first { $0.hasPrefix("gd_console=") })
            for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console", "Max-Age=43200"] {
                #expect(cookie.contains(attribute), "\(cookie)")
            }
            #expect(!cookie.contains("Secure"))  // plain HTTP here; under TLS it is Secure
            let overview = try await session.get("/console")
            #expect(overview.status == .ok)
            #expect(String(buffer: overview.body).contains("signed in as <strong>ops</strong>"))
        }
    }

    @Test("a session cookie does not reach the sync API, and sign-out ends the session")
    func sessionsStayInTheConsole() async throws {
        try await Self.withConsole { _, client in
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            let api = try await client.execute(uri: "/v1/suites", method: .get, headers: [.cookie: session.cookieHeader])
            #expect(api.status == .unauthorized)
            let out = try await session.post("/console/sign-out", [:])
            #expect(out.status == .seeOther)
            #expect(out.headers[.location] == "/console/sign-in")
            #expect(try await session.get("/console").status == .seeOther)
        }
    }

    @Test("a session ends when its lifetime does")
    func sessionExpiry() async throws {
        try await Self.withConsole({ $0.console.sessionLifetime = .zero }) { _, client in
            var session = ConsoleSession(client: client)
            #expect(try await session.signIn().status == .seeOther)
            let page = try await session.get("/console")
            #expect(page.status == .seeOther)
            #expect(page.headers[.location] == "/console/sign-in")
        }
    }

    @Test("failed sign-ins are limited: beyond the limit even the right password is 429 with Retry-After")
    func signInThrottle() async throws {
        try await Self.withConsole({ $0.console.signInFailures = 3 }) { _, client in
            var session = ConsoleSession(client: client)
            for _ in 0..<3 { #expect(try await session.signIn(password: "wrong password").status == .unauthorized) }
            let refused = try await session.signIn()
            #expect(refused.status == .tooManyRequests)
            #expect(Int(refused.headers[.retryAfter] ?? "") ?? 0 > 0)
            #expect(String(buffer: refused.body).contains("Too many failed sign-ins"))
        }
    }

    @Test("failed sign-ins from elsewhere never lock an operator out; one address is limited across names too")
    func signInThrottleByAddress() {
        let throttle = SignInThrottle(failures: 3, window: .seconds(600))
        func fail(_ address: String, _ name: String) {
            #expect(throttle.admit(address: address, name: name) == .admitted, "\(address) \(name)")
            throttle.finished(address: address, name: name, succeeded: false)
        }
        func isRefused(_ admission: SignInThrottle.Admission) -> Bool {
            if case .refused = admission { true } else { false }
        }
        // An attacker's failures for the operator's name refuse the attacker only.
        for _ in 0..<3 { fail("203.0.113.9", "ops") }
        #expect(isRefused(throttle.admit(address: "203.0.113.9", name: "ops")))
        #expect(throttle.admit(address: "192.0.2.1", name: "ops") == .admitted, "the operator's own address is not locked out")
        throttle.finished(address: "192.0.2.1", name: "ops", succeeded: true)
        // Guessing across names from one address stops at three names' worth.
        for name in ["a", "b", "c"] { for _ in 0..<3 { fail("198.51.100.7", name) } }
        #expect(isRefused(throttle.admit(address: "198.51.100.7", name: "d")))
        #expect(throttle.admit(address: "192.0.2.1", name: "d") == .admitted)
        throttle.finished(address: "192.0.2.1", name: "d", succeeded: false)
        // The window passes: the attacker may try again.
        #expect(throttle.admit(address: "203.0.113.9", name: "ops", now: .now + .seconds(601)) == .admitted)
    }

    @Test("sign-ins sent all at once cannot outrun the limit of failures")
    func parallelSignIns() async throws {
        try await Self.withConsole({ $0.console.signInFailures = 3 }) { _, client in
            var session = ConsoleSession(client: client)
            let form = try await session.get("/console/sign-in")
            let token = try #require(String(buffer: form.body).firstMatch(of: #/name="csrf" value="([^"]+)"/#)?.output.1)
            let cookie = session.cookieHeader
            let statuses = await withTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        (try? await client.execute(
                            uri: "/console/sign-in",
                            method: .post,
                            headers: [.contentType: "application/x-www-form-urlencoded", .cookie: cookie],
                            body: ConsoleSession.form(["csrf": String(token), "name": "ops", "password": "wrong password"])
                        ).status) ?? .internalServerError
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .unauthorized }.count <= 3, "\(statuses)")
            #expect(statuses.allSatisfy { $0 == .unauthorized || $0 == .tooManyRequests }, "\(statuses)")
        }
    }

    @Test("bad input is a 4xx page: a huge form, a name no operator can have, a key with a control character; + is a space")
    func badInput() async throws {
        try await Self.withConsole { fixture, client in
            var session = ConsoleSession(client: client)
            #expect(try await session.signIn(name: "a\u{0}b").status == .unauthorized)
            #expect(try await session.signIn(name: "x\n2026-11-25 operator=root").status == .unauthorized)
            _ = try await session.signIn()
            let huge = try await session.post("/console/accounts/alice/tokens", ["suites": String(repeating: "x", count: 70_000)])
            #expect(huge.status == .contentTooLarge)
            let control = try await session.get("/console/accounts/alice/suites/s/history?key=a%00b")
            #expect(control.status == .badRequest)
            let pattern = try await session.post("/console/accounts/alice/tokens", ["suites": "a\u{1}b"])
            #expect(pattern.status == .unprocessableContent)

            let token = try await fixture.token()
            #expect(try await client.push("s", token: token, API.push([API.set("b c", "v"), API.set("bc", "w")])).status == .ok)
            let filtered = String(buffer: try await session.get("/console/accounts/alice/suites/s?key=b+c").body)
            #expect(filtered.contains("data-key=\"b c\"") && !filtered.contains("data-key=\"bc\""))
        }
    }

    @Test("a form without the session's token, or from another origin, is refused and changes nothing")
    func csrf() async throws {
        try await Self.withConsole { fixture, client in
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            let before = try await fixture.storage.tokens().count
            let path = "/console/accounts/alice/tokens"
            let missing = try await session.post(path, ["suites": "*"], csrf: .none)
            #expect(missing.status == .forbidden)
            #expect(String(buffer: missing.body).contains("did not come from this console"))
            #expect(try await session.post(path, ["suites": "*"], csrf: .value("forged")).status == .forbidden)
            let crossSite = try await session.post(path, ["suites": "*"], headers: [.origin: "http://evil.example"])
            #expect(crossSite.status == .forbidden)
            let fetchSite = try await session.post(path, ["suites": "*"], headers: [.init("Sec-Fetch-Site")!: "cross-site"])
            #expect(fetchSite.status == .forbidden)
            #expect(try await fixture.storage.tokens().count == before)

            // The same form with its token makes the token, shown once on the account page.
            let made = try await session.post(path, ["suites": "group.*", "device": "ana-phone"])
            #expect(made.status == .seeOther)
            #expect(made.headers[.location] == "/console/accounts/alice")
            let stored = try #require(try await fixture.storage.tokens().last)
            #expect(stored.account == "alice" && stored.device == "ana-phone" && stored.suitePatterns == ["group.*"])
            let shown = String(buffer: try await session.get("/console/accounts/alice").body)
            let token = try #require(shown.firstMatch(of: #/<code id="new-token">(gdt_[A-Za-z0-9_-]+)</code>/#)?.output.1)
            #expect(Tokens.hash(String(token)) == stored.hash)
            #expect(!String(buffer: try await session.get("/console/accounts/alice").body).contains("new-token"))
        }
    }

    @Test("the console's acts are audited (sign-in, failed sign-in, token made and revoked) with who and where, never a password or token")
    func audited() async throws {
        try await Self.withConsole { fixture, client in
            var session = ConsoleSession(client: client)
            let typo = "not the password \(UUID().uuidString)"
            #expect(try await session.signIn(password: typo).status == .unauthorized)
            #expect(try await session.signIn().status == .seeOther)
            #expect(try await session.post("/console/accounts/alice/tokens", ["suites": "group.*"]).status == .seeOther)
            let shown = String(buffer: try await session.get("/console/accounts/alice").body)
            let token = String(try #require(shown.firstMatch(of: #/<code id="new-token">(gdt_[A-Za-z0-9_-]+)</code>/#)?.output.1))
            let id = try #require(try await fixture.storage.tokens().last?.id)
            #expect(try await session.post("/console/accounts/alice/tokens/\(id)/revoke", [:]).status == .seeOther)

            let records = try await fixture.storage.auditRecords(account: nil, since: nil, limit: 100)
            #expect(records.map(\.act) == [.signInFailed, .signIn, .tokenCreate, .tokenRevoke])
            #expect(records.map(\.actor) == ["unknown", "ops", "ops", "ops"])
            #expect(records[0].outcome == "failed")
            #expect(records[2].account == "alice" && records[2].target == "token \(id)" && records[3].target == "token \(id)")
            #expect(records.allSatisfy { $0.source.hasPrefix("console, ") && abs($0.time.timeIntervalSinceNow) < 60 })
            // Neither the password (typed wrong or right) nor the token is anywhere in the store.
            let bytes = try Data(contentsOf: fixture.directory.appendingPathComponent("sync.lmdb"))
            for secret in [typo, Self.password, token] { #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret)") }

            // The audit page shows them, newest first, and can show one account's.
            let page = String(buffer: try await session.get("/console/audit").body)
            let acts = page.matches(of: #/<td class="act">([a-z-]+)</td>/#).map { String($0.output.1) }
            #expect(acts == ["token-revoke", "token-create", "sign-in", "sign-in-failed"])
            for secret in [typo, Self.password, token] { #expect(!page.contains(secret)) }
            let alice = String(buffer: try await session.get("/console/audit?account=alice").body)
            #expect(alice.matches(of: #/<td class="act">/#).count == 2)
            #expect(try await session.get("/console/audit?account=a%00b").status == .badRequest)
        }
    }

    @Test("keys, values, account and device names holding markup are shown as text on every page")
    func escaping() async throws {
        try await Self.withConsole { fixture, client in
            let key = "<img src=x onerror=alert(1)>"
            let value = "<script>alert(2)</script>"
            let account = "ana<b>\"x\"'"
            let token = try await fixture.token(account: account, device: "<i>phone</i>")
            let push = try await client.execute(
                uri: "/v1/suites/s/push",
                method: .post,
                headers: Self.device(9, token),
                body: try API.push(device: 9, [API.set(key, value)])
            )
            #expect(push.status == .ok)
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            let accountPath = "/console/accounts/" + Self.segment(account)
            let suitePath = accountPath + "/suites/s"
            for path in ["/console", accountPath, suitePath, suitePath + "/history?key=" + Self.segment(key)] {
                let response = try await session.get(path)
                #expect(response.status == .ok, "\(path)")
                let html = String(buffer: response.body)
                for raw in [key, value, "<b>", "<i>"] { #expect(!html.contains(raw), "\(path) shows \(raw) as markup") }
                #expect(!html.contains("\"x\"'"), "\(path)")
            }
            let suite = String(buffer: try await session.get(suitePath).body)
            #expect(suite.contains("&lt;img src=x onerror=alert(1)&gt;"))
            #expect(suite.contains("&lt;script&gt;alert(2)&lt;/script&gt;"))
        }
    }

    @Test("an account nothing has is a 404 page saying so, with no form")
    func unknownAccount() async throws {
        try await Self.withConsole { fixture, client in
            _ = try await fixture.token(account: "alice")
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            let unknown = try await session.get("/console/accounts/nobody")
            #expect(unknown.status == .notFound)
            let html = String(buffer: unknown.body)
            #expect(html.contains("There is no account nobody"))
            #expect(!html.contains("<form id=\"create-token\""))
            #expect(try await session.get("/console/accounts/alice").status == .ok)
        }
    }

    @Test("a suite without keys says so; a filter that matches nothing names the filter; a suite the account never had is a 404")
    func emptySuite() async throws {
        try await Self.withConsole { fixture, client in
            for suite in ["s", "emptied"] {
                _ = try await fixture.storage.push(
                    account: "alice",
                    suite: suite,
                    request: PushRequest(deviceID: 3, batchID: "b-\(suite)", ops: [API.set("k", "v")]),
                    quota: fixture.configuration.quota,
                    serverTime: "0"
                )
            }
            // An operator's `suites reset`: the suite is there, its keys are not.
            _ = try await fixture.storage.resetSuite(account: "alice", suite: "emptied", keys: false)
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            for path in ["/console/accounts/alice/suites/emptied", "/console/accounts/alice/suites/emptied?key=zz"] {
                let empty = String(buffer: try await session.get(path).body)
                #expect(empty.contains("This suite holds no keys."), "\(path)")
                #expect(!empty.contains("No keys containing"), "\(path)")
            }
            let filtered = String(buffer: try await session.get("/console/accounts/alice/suites/s?key=zz").body)
            #expect(filtered.contains("No keys containing “zz”."))
            for path in ["/console/accounts/alice/suites/never", "/console/accounts/nobody/suites/s"] {
                let missing = try await session.get(path)
                #expect(missing.status == .notFound, "\(path)")
                #expect(String(buffer: missing.body).contains("has no suite"), "\(path)")
            }
        }
    }

    @Test("writes are shown to the millisecond on the suite and history pages, as the API has them")
    func millisecondTimes() async throws {
        try await Self.withConsole { fixture, client in
            let written = HLC(milliseconds: HLC.wallClockMilliseconds() / 1000 * 1000 - 60_000 + 123, counter: 0)
            _ = try await fixture.storage.push(
                account: "alice",
                suite: "s",
                request: PushRequest(deviceID: 3, batchID: "b", ops: [API.set("k", "v", hlc: written)]),
                quota: fixture.configuration.quota,
                serverTime: "0"
            )
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyy-MM-dd HH:mm:ss.SSS"
            let text = formatter.string(from: Date(timeIntervalSince1970: Double(written.milliseconds) / 1000)) + " UTC"
            #expect(text.hasSuffix(".123 UTC"))
            for path in ["/console/accounts/alice/suites/s", "/console/accounts/alice/suites/s/history?key=k"] {
                let html = String(buffer: try await session.get(path).body)
                #expect(html.contains(">\(text)</time>"), "\(path)")
            }
        }
    }

    @Test("the new token's hint is a command that works: it names this server")
    func newTokenHint() async throws {
        try await Self.withConsole { fixture, client in
            _ = try await fixture.token(account: "alice")
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            #expect(try await session.post("/console/accounts/alice/tokens", ["suites": "*"]).status == .seeOther)
            let shown = String(buffer: try await session.get("/console/accounts/alice").body)
            let hint = try #require(shown.firstMatch(of: #/<code id="new-token-hint">([^<]*)</code>/#)?.output.1)
            #expect(hint.wholeMatch(of: #/groupdefaults-sync configure SUITE --server https?://[^ ]+ --token-file PATH/#) != nil, "\(hint)")
        }
    }

    @Test("an end-to-end encrypted suite's values are shown as sealed, with their size, on the suite and history pages")
    func sealedValues() async throws {
        try await Self.withConsole { fixture, client in
            let op = PushOp(
                keyID: "kid_sound",
                sealed: SealedPayload(epoch: 1, box: Array(repeating: 7, count: 48)),
                deleted: false,
                hlc: API.hlc()
            )
            _ = try await fixture.storage.push(
                account: "alice",
                suite: "enc",
                request: PushRequest(deviceID: 3, batchID: "b", ops: [op]),
                quota: fixture.configuration.quota,
                serverTime: "0"
            )
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            for path in ["/console/accounts/alice/suites/enc", "/console/accounts/alice/suites/enc/history?key=kid_sound"] {
                let html = String(buffer: try await session.get(path).body)
                #expect(html.contains("sealed, 48 bytes"), "\(path)")
            }
        }
    }

    @Test("no template writes a value unescaped")
    func templatesEscape() async {
        for (name, text) in ConsoleTemplates.sources {
            #expect(!text.contains("{{{") && !text.contains("{{&"), "template \(name)")
        }
    }

    @Test("revoking a device or a token in the console revokes its token in storage")
    func revoking() async throws {
        try await Self.withConsole { fixture, client in
            let token = try await fixture.token(device: "tablet")
            let pulled = try await client.execute(
                uri: "/v1/suites/s/snapshot",
                method: .get,
                headers: Self.device(5, token)
            )
            #expect(pulled.status == .ok)
            // The server records a device just after the request that saw it.
            #expect(try await eventually { try await !fixture.storage.devices(account: "alice").isEmpty })
            let device = try #require(try await fixture.storage.devices(account: "alice").first)
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            let revoked = try await session.post("/console/accounts/alice/devices/\(device.id)/revoke", [:])
            #expect(revoked.status == .seeOther)
            #expect(revoked.headers[.location] == "/console/accounts/alice?done=device-revoked")
            #expect(try await fixture.storage.tokens().first { $0.id == device.tokenID }?.revoked != nil)
            #expect(try await client.execute(uri: "/v1/suites", method: .get, headers: API.auth(token)).status == .unauthorized)
            // Another account's device or token is not found under this one.
            #expect(try await session.post("/console/accounts/bob/devices/\(device.id)/revoke", [:]).status == .notFound)
            #expect(try await session.post("/console/accounts/bob/tokens/\(device.tokenID)/revoke", [:]).status == .notFound)
        }
    }

    @Test(
        "a suite's page shows its owner, members, roles and invitations (escaped); an operator removes a member (a form with the session's token only), audited"
    )
    func sharing() async throws {
        try await Self.withConsole { fixture, client in
            let now = Date()
            let markup = "<b>bob</b>"
            let invitation = StoredInvitation(
                lookup: StoredInvitation.lookup(id: "i1"),
                id: "inv_0123456789ab",
                owner: "alice",
                suite: "s",
                role: .write,
                createdBy: "alice",
                created: now,
                lifetime: 3600
            )
            try await fixture.storage.createInvitation(invitation, now: now)
            _ = try await fixture.storage.acceptInvitation(lookup: invitation.lookup, account: markup, now: now)
            let waiting = StoredInvitation(
                lookup: StoredInvitation.lookup(id: "i2"),
                id: "inv_ba9876543210",
                owner: "alice",
                suite: "s",
                role: .read,
                createdBy: "alice",
                created: now,
                lifetime: 3600
            )
            try await fixture.storage.createInvitation(waiting, now: now)
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            // Nothing was written to the suite: it is shown all the same, as it has a member.
            let page = String(buffer: try await session.get("/console/accounts/alice/suites/s").body)
            #expect(page.contains("<td class=\"role\">write</td>") && page.contains("&lt;b&gt;bob&lt;/b&gt;") && !page.contains(markup))
            #expect(page.contains("<code>inv_0123456789ab</code>") && page.contains("<td class=\"state\">accepted</td>"))
            #expect(page.contains("<code>inv_ba9876543210</code>") && page.contains("<td class=\"state\">pending</td>"))

            let path = "/console/accounts/alice/suites/s/members/\(markup.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)/remove"
            #expect(
                try await session.post(path, [:], csrf: .value("wrong")).status == .forbidden,
                "a form without the session's token changes nothing"
            )
            #expect(try await fixture.storage.member(owner: "alice", suite: "s", account: markup) != nil)
            let removed = try await session.post(path, [:])
            #expect(removed.status == .seeOther && removed.headers[.location] == "/console/accounts/alice/suites/s?done=member-removed#sharing")
            #expect(try await fixture.storage.member(owner: "alice", suite: "s", account: markup) == nil)
            #expect(try await session.post(path, [:]).status == .notFound)
            let record = try #require(try await fixture.storage.auditRecords(account: "alice", since: nil, limit: 10).last)
            #expect(record.act == .memberRemove && record.actor == "ops" && record.target == "member \(markup) of suite s")
            let after = String(buffer: try await session.get("/console/accounts/alice/suites/s").body)
            #expect(after.contains("No other account shares this suite."))
        }
    }

    @Test(
        "Remove of a member that holds an encrypted suite's keys says the owner's devices will rotate, and the suite page names the member until they have; a keyless member's removal says nothing of keys"
    )
    func removalOfKeyHolder() async throws {
        try await Self.withConsole { fixture, client in
            let now = Date()
            let markup = "<i>dee</i>"
            let claim = InvitationClaim(memberKey: "bWVtYmVy", proof: "cHJvb2Y=")
            for (id, account) in [("k1", markup), ("k2", "eve")] {
                let invitation = StoredInvitation(
                    lookup: StoredInvitation.lookup(id: id),
                    id: "inv_\(id)0000000000",
                    owner: "alice",
                    suite: "house",
                    role: .write,
                    createdBy: "alice",
                    created: now,
                    lifetime: 3600
                )
                try await fixture.storage.createInvitation(invitation, now: now)
                _ = try await fixture.storage.acceptInvitation(lookup: invitation.lookup, account: account, claim: claim, now: now)
            }
            // dee was handed the keys; eve accepted but holds none.
            let admission = MemberAdmission(memberKey: claim.memberKey, epoch: 1, signature: "c2lnbmVk")
            _ = try await fixture.storage.handOverKeys(owner: "alice", suite: "house", id: "inv_k10000000000", keys: "a2V5cw==", admission: admission)
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()

            let keyless = try await session.post("/console/accounts/alice/suites/house/members/eve/remove", [:])
            #expect(keyless.headers[.location] == "/console/accounts/alice/suites/house?done=member-removed#sharing")
            #expect(try await fixture.storage.rotationDue(owner: "alice", suite: "house") == nil)

            let escaped = markup.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let removed = try await session.post("/console/accounts/alice/suites/house/members/\(escaped)/remove", [:])
            #expect(removed.status == .seeOther)
            #expect(removed.headers[.location] == "/console/accounts/alice/suites/house?done=member-removed-rotation-due#sharing")
            #expect(try await fixture.storage.rotationDue(owner: "alice", suite: "house")?.removed == [markup])
            let page = String(buffer: try await session.get("/console/accounts/alice/suites/house?done=member-removed-rotation-due").body)
            let said = try #require(page.range(of: "id=\"sharing-done\">"), "the removal is confirmed")
            #expect(page[said.upperBound...].prefix(200).contains("devices will rotate the suite"))
            #expect(page.contains("id=\"rotation-due\"") && page.contains("&lt;i&gt;dee&lt;/i&gt; held the suite") && !page.contains(markup))
        }
    }

    @Test("console records keep operators and sessions alike on both backends", arguments: StorageBackend.allCases)
    func consoleRecords(backend: StorageBackend) async throws {
        try await backend.withStorage { storage in
            let operators = Operators(storage: storage, cost: 4)
            try await operators.create(name: "ops", password: Self.password)
            await #expect(throws: ConsoleRecordError.self) { try await operators.create(name: "ops", password: "another password") }
            await #expect(throws: ConsoleRecordError.self) { try await operators.create(name: "short", password: "1234567") }
            await #expect(throws: ConsoleRecordError.self) { try await operators.create(name: "bad name", password: Self.password) }
            #expect(try await operators.list().map(\.name) == ["ops"])
            #expect(try await operators.verify(name: "ops", password: Self.password)?.name == "ops")
            #expect(try await operators.verify(name: "ops", password: "wrong password") == nil)
            #expect(try await operators.verify(name: "nobody", password: Self.password) == nil)
            // The stored record holds a bcrypt hash, not the password.
            let record = try #require(try await storage.consoleRecord(.operator, name: "ops"))
            #expect(!String(decoding: record, as: UTF8.self).contains(Self.password))

            let sessions = ConsoleSessions(storage: storage, lifetime: .seconds(60))
            let now = Date()
            let started = try await sessions.start(operatorName: "ops", now: now)
            #expect(try await sessions.session(cookie: started.cookie, now: now)?.operatorName == "ops")
            #expect(try await sessions.session(cookie: started.cookie, now: now.addingTimeInterval(61)) == nil)
            #expect(try await sessions.session(cookie: "another", now: now) == nil)
            // Only the cookie's hash is stored.
            #expect(try await storage.consoleRecords(.session).allSatisfy { $0.name != started.cookie })
            // Removing the operator ends their sessions.
            try await operators.remove(name: "ops")
            #expect(try await sessions.session(cookie: started.cookie, now: now) == nil)
            #expect(try await storage.consoleRecords(.session).isEmpty)
            await #expect(throws: ConsoleRecordError.self) { try await operators.remove(name: "ops") }

            // The console's view of suites: every account's, with bytes.
            _ = try await storage.push(
                account: "a",
                suite: "s",
                request: PushRequest(
                    deviceID: 1,
                    batchID: "b",
                    ops: [
                        PushOp(key: "k", value: .string("v"), hlc: API.hlc())
                    ]
                ),
                quota: SuiteQuota(maxKeys: 10, maxBytes: 1000),
                serverTime: "0"
            )
            let summaries = try await storage.suiteSummaries(account: nil)
            #expect(summaries.map(\.account) == ["a"] && summaries.first?.keys == 1 && (summaries.first?.bytes ?? 0) > 0)
            #expect(try await storage.suiteSummaries(account: "b").isEmpty)
            #expect(await storage.health().checks.allSatisfy(\.ok))
        }
    }

    @Test("admin create reads the password from stdin; list, remove, and their refusals exit 1 with one line")
    func adminCommand() async throws {
        let directory = ServerTool.temporaryDirectory("gds-admin")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func admin(_ arguments: [String], stdin: String = "") async throws -> ProcessResult {
            try await runProcess(ServerTool.executable, ["admin"] + arguments + ["--data-dir", directory], stdin: Data(stdin.utf8))
        }
        let created = try await admin(["create", "--create", "--name", "ops"], stdin: Self.password + "\n")
        #expect(created.status == 0, "\(created.stderr)")
        #expect(try await admin(["list"]).stdout.hasPrefix("ops\tcreated "))
        let again = try await admin(["create", "--name", "ops"], stdin: "another password\n")
        #expect(again.status == 1 && again.stderr.contains("exists already"))
        let short = try await admin(["create", "--name", "new"], stdin: "short\n")
        #expect(short.status == 1 && short.stderr.contains("at least 8"))
        let empty = try await admin(["create", "--name", "new"])
        #expect(empty.status == 1 && empty.stderr.contains("no password"))
        #expect(try await admin(["remove", "ops"]).status == 0)
        let gone = try await admin(["remove", "ops"])
        #expect(gone.status == 1 && gone.stderr.contains("no operator named ops"))
        #expect(try await admin(["list"]).stdout.isEmpty)
    }

    // MARK: Helpers

    static func expectSecurityHeaders(_ response: TestResponse, sourceLocation: SourceLocation = #_sourceLocation) {
        let policy = response.headers[.contentSecurityPolicy] ?? ""
        #expect(
            policy.contains("default-src 'none'") && policy.contains("script-src 'self'") && policy.contains("frame-ancestors 'none'"),
            sourceLocation: sourceLocation
        )
        #expect(response.headers[.xContentTypeOptions] == "nosniff", sourceLocation: sourceLocation)
    }

    /// A sync request's headers: the token, and the device it names.
    static func device(_ id: UInt64, _ token: String) -> HTTPFields {
        var headers = API.auth(token)
        headers[.init(DeviceHeader.name)!] = "\(id)"
        return headers
    }

    static func cookies(_ response: TestResponse) -> [String: String] {
        var cookies: [String: String] = [:]
        for header in response.headers[values: .setCookie] {
            let pair = header.split(separator: ";")[0].split(separator: "=", maxSplits: 1)
            cookies[String(pair[0])] = pair.count > 1 ? String(pair[1]) : ""
        }
        return cookies
    }

    static func segment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz0123456789")) ?? ""
    }
}

/// A browser's part, by hand: the cookies the console set, and each form's token.
struct ConsoleSession {
    let client: any TestClientProtocol
    var cookies: [String: String] = [:]
    var csrf: String?

    var cookieHeader: String { cookies.filter { !$0.value.isEmpty }.map { "\($0.key)=\($0.value)" }.joined(separator: "; ") }

    /// Fetches the sign-in form (its token and cookie), then posts it.
    mutating func signIn(name: String = "ops", password: String = ConsoleTests.password) async throws -> TestResponse {
        let form = try await get("/console/sign-in")
        let token = String(buffer: form.body).firstMatch(of: #/name="csrf" value="([^"]+)"/#).map { String($0.output.1) } ?? ""
        let response = try await post("/console/sign-in", ["name": name, "password": password], csrf: .value(token))
        if response.status == .seeOther {
            let overview = try await get("/console")
            csrf = String(buffer: overview.body).firstMatch(of: #/name="csrf" value="([^"]+)"/#).map { String($0.output.1) }
        }
        return response
    }

    mutating func get(_ path: String) async throws -> TestResponse {
        let response = try await client.execute(uri: path, method: .get, headers: cookies.isEmpty ? [:] : [.cookie: cookieHeader])
        keep(response)
        return response
    }

    /// The form token a post carries.
    enum FormToken {
        case session, none
        case value(String)
    }

    /// Posts `fields` with the session's form token (or another, or none), as a same-origin form.
    mutating func post(_ path: String, _ fields: [String: String], csrf: FormToken = .session, headers: HTTPFields = [:]) async throws -> TestResponse
    {
        var fields = fields
        switch csrf {
        case .session: if let token = self.csrf { fields["csrf"] = token }
        case .none: break
        case .value(let token): fields["csrf"] = token
        }
        var all: HTTPFields = [.contentType: "application/x-www-form-urlencoded"]
        if !cookies.isEmpty { all[.cookie] = cookieHeader }
        for field in headers { all.append(field) }
        let response = try await client.execute(uri: path, method: .post, headers: all, body: Self.form(fields))
        keep(response)
        return response
    }

    private mutating func keep(_ response: TestResponse) {
        for (name, value) in ConsoleTests.cookies(response) { cookies[name] = value }
    }

    static func form(_ fields: [String: String]) -> ByteBuffer {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        return ByteBuffer(
            string: fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
                .joined(separator: "&")
        )
    }
}
