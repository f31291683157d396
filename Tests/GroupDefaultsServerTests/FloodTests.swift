import Foundation
import Glibc
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

/// The real server executable under floods: one token inviting and revoking in a loop (its acts
/// counted in the audit log, which `audit` pages through; ended invitations bounded per suite), a
/// removed member asking for the suite's invitations, and wrong-password sign-ins from several
/// addresses while the operator signs in.
@Suite("Fair under floods")
struct FloodTests {
    private static func id(_ n: Int) -> String { String(format: "%032x", n) }

    private static func invite(
        _ client: TestClient,
        token: String,
        id: String,
        owner: String? = nil,
        role: SuiteRole = .write,
        suite: String = "family"
    ) async throws -> Answer {
        let body = try JSONEncoder().encode(InvitationRequest(invitationID: id, role: role))
        let query = owner.map { "?owner=\($0)" } ?? ""
        return try await client.call(.post, "/v1/suites/\(suite)/invitations\(query)", token: token, body: body)
    }

    @Test(
        "one token inviting and revoking in a loop: 20 records of each act and one that counts the rest, its admin invitations and those to another suite each in view, others' records in view, audit pages through all; at most 100 ended invitations kept",
        arguments: StorageBackend.allCases
    )
    func inviteAndRevokeFlood(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.serverStorage("gds-flood-audit")
        defer { cleanup() }
        let alice = try await ServerTool.createToken(storage: storage)
        let server = try await ServerProcess(dataDirectory: nil, extraArguments: storage + ["--rate-limit", "100000"])
        defer { server.signal(SIGTERM) }
        let cycles = StoredInvitation.maximumEnded + 10
        try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            for suite in ["family", "payroll"] {
                #expect(
                    try await client.call(
                        .post,
                        "/v1/suites/\(suite)/push",
                        token: alice,
                        body: Data(API.push([API.set("doorbell", "ding.caf")]).readableBytesView)
                    ).status == .ok
                )
            }
            for n in 0..<cycles {
                let made = try await Self.invite(client, token: alice, id: Self.id(n)).decode(InvitationInfo.self)
                let revoked = try await client.call(.delete, "/v1/suites/family/invitations/\(made.id)", token: alice)
                #expect(revoked.status == .ok)
            }
            // One more, waiting: the suite keeps it and the newest 100 ended ones.
            #expect(try await Self.invite(client, token: alice, id: Self.id(cycles)).status == .ok)
            let list = try await client.call(.get, "/v1/suites/family/invitations", token: alice).decode(InvitationList.self)
            #expect(list.invitations.filter { $0.state == .pending }.count == 1)
            #expect(list.invitations.filter { $0.state == .revoked }.count == StoredInvitation.maximumEnded)
            // After the flood: two admin invitations to another suite, one for write, one admin to the flooded suite.
            for (n, role, suite) in [(1, SuiteRole.admin, "payroll"), (2, .admin, "payroll"), (3, .write, "payroll"), (4, .admin, "family")] {
                #expect(try await Self.invite(client, token: alice, id: Self.id(10_000 + n), role: role, suite: suite).status == .ok)
            }
        }
        _ = try await ServerTool.createToken(storage: storage, account: "bob")  // a record after the flood

        let full = try await ServerTool.run(["audit", "--json"] + storage)
        #expect(full.status == 0 && full.stderr.isEmpty, "\(full.stderr)")
        let records = try JSONSerialization.jsonObject(with: Data(full.stdout.utf8)) as? [[String: Any]] ?? []
        for act in ["invitation-create", "invitation-revoke"] {
            let acts = records.filter { $0["act"] as? String == act }
            let flood = acts.filter { ($0["target"] as? String)?.hasSuffix("(write) of suite family") == true }
            let total = (act == "invitation-create" ? cycles + 1 : cycles)
            #expect(flood.count == AuditRepeats.individually + 1, "\(act): \(flood.count) records")
            #expect(flood.map { $0["repeats"] as? Int ?? 1 }.reduce(0, +) == total, "every act counted once")
        }
        for (role, suite, count) in [("admin", "payroll", 2), ("write", "payroll", 1), ("admin", "family", 1)] {
            let each = records.filter { ($0["target"] as? String)?.hasSuffix("(\(role)) of suite \(suite)") == true }
            #expect(each.count == count && each.allSatisfy { $0["repeats"] == nil }, "\(role) invitations to \(suite): \(each)")
        }
        #expect(records.filter { $0["act"] as? String == "token-create" }.map { $0["account"] as? String } == ["alice", "bob"])

        // Ten at a time, back to the first: every record once, as the whole log shows them.
        let lines = try await ServerTool.run(["audit"] + storage).stdout.split(separator: "\n")
        var paged: [Substring] = []
        var before: [String] = []
        for _ in 0..<20 {
            let page = try await ServerTool.run(["audit", "--limit", "10"] + before + storage)
            #expect(page.status == 0)
            paged = page.stdout.split(separator: "\n") + paged
            guard let hint = page.stderr.firstMatch(of: #/earlier records: add --before (\S+)/#) else {
                #expect(page.stderr.isEmpty, "\(page.stderr)")
                break
            }
            before = ["--before", String(hint.output.1)]
        }
        #expect(paged == lines, "paged:\n\(paged.joined(separator: "\n"))\nwhole:\n\(lines.joined(separator: "\n"))")
        #expect(lines.count == records.count)
    }

    @Test(
        "a removed member reads none of its past invitations (the one it used, the one it made) and cannot accept one it made; a new one given to it, it reads and accepts",
        arguments: StorageBackend.allCases
    )
    func removedMemberReadsNoInvitation(backend: StorageBackend) async throws {
        let (storage, cleanup) = try await backend.serverStorage("gds-flood-removed")
        defer { cleanup() }
        let alice = try await ServerTool.createToken(storage: storage)
        let bob = try await ServerTool.createToken(storage: storage, account: "bob")
        let dave = try await ServerTool.createToken(storage: storage, account: "dave")
        let server = try await ServerProcess(dataDirectory: nil, extraArguments: storage)
        defer { server.signal(SIGTERM) }
        try await TestClient.withClient(host: "127.0.0.1", port: server.port) { client in
            func read(_ n: Int, as token: String) async throws -> Answer {
                try await client.call(.get, "/v1/invitations/\(Self.id(n))", token: token)
            }
            #expect(
                try await client.call(
                    .post,
                    "/v1/suites/family/push",
                    token: alice,
                    body: Data(API.push([API.set("doorbell", "ding.caf")]).readableBytesView)
                ).status == .ok
            )
            #expect(try await Self.invite(client, token: alice, id: Self.id(1), role: .admin).status == .ok)
            #expect(try await client.call(.post, "/v1/invitations/\(Self.id(1))/accept", token: bob).status == .ok)
            #expect(try await Self.invite(client, token: bob, id: Self.id(2), owner: "alice").status == .ok)  // bob's, waiting
            for n in 1...2 { #expect(try await read(n, as: bob).status == .ok, "a member reads \(n)") }
            let used = try await read(1, as: dave)
            let usedState = try used.decode(InvitationInfo.self).state
            #expect(used.status == .ok && usedState == .accepted, "who holds the code sees it was used")

            let removed = try await client.call(.delete, "/v1/suites/family/members/bob", token: alice)
            #expect(removed.status == .ok)
            for n in 1...2 {
                let answer = try await read(n, as: bob)
                #expect(answer.status == .notFound && answer.error() == .invitationNotFound, "removed, bob reads \(n): \(answer.status)")
            }
            let rejoin = try await client.call(.post, "/v1/invitations/\(Self.id(2))/accept", token: bob)
            #expect(rejoin.error() == .invitationNotFound, "bob cannot accept the invitation he made")
            #expect(try await read(1, as: alice).status == .ok, "the owner reads every one")

            // A new invitation given to bob: he reads it and joins again.
            #expect(try await Self.invite(client, token: alice, id: Self.id(4)).status == .ok)
            #expect(try await read(4, as: bob).status == .ok)
            #expect(try await client.call(.post, "/v1/invitations/\(Self.id(4))/accept", token: bob).status == .ok)
        }
    }

    @Test("the console's audit page shows 500 records and links to the earlier ones, back to the first; a bad before= is 400")
    func consoleAuditPages() async throws {
        try await ConsoleTests.withConsole { fixture, client in
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            for n in 0..<620 {
                let record = AuditRecord(
                    time: start.addingTimeInterval(Double(n / 2) / 1000),
                    actor: "ops",
                    act: .tokenRevoke,
                    account: "alice",
                    target: "token tok_\(n)",
                    source: "console, 127.0.0.1"
                )
                try await fixture.storage.appendAudit(record)
            }
            var session = ConsoleSession(client: client)
            _ = try await session.signIn()
            var seen: [String] = []
            var path: String? = "/console/audit"
            var pages = 0
            while let next = path, pages < 5 {
                let page = String(buffer: try await session.get(next).body)
                seen += page.matches(of: #/token tok_(\d+)/#).map { String($0.output.1) }
                path = page.firstMatch(of: #/class="earlier" href="([^"]+)"/#).map {
                    String($0.output.1).replacingOccurrences(of: "&amp;", with: "&")
                }
                pages += 1
            }
            #expect(pages == 2 && seen.count == 620 && Set(seen).count == 620, "\(pages) pages, \(seen.count) rows")
            #expect(try await session.get("/console/audit?before=yesterday").status == .badRequest)
        }
    }

    @Test("wrong-password sign-ins from four addresses at once, each under its limits, never make the operator's own sign-ins fail")
    func signInFlood() async throws {
        let directory = ServerTool.temporaryDirectory("gds-flood-sign-in")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let password = "correct horse \(UUID().uuidString)"
        let made = try await runProcess(
            ServerTool.executable,
            ["admin", "create", "--create", "--data-dir", directory, "--name", "ops"],
            stdin: Data((password + "\n").utf8)
        )
        #expect(made.status == 0, "\(made.stderr)")
        let server = try await ServerProcess(dataDirectory: directory)
        defer { server.signal(SIGTERM) }
        let base = "http://127.0.0.1:\(server.port)/console/sign-in"
        let form = try await Curl.run(["-D", "-", base])
        let csrf = try #require(form.stdout.firstMatch(of: #/name="csrf" value="([^"]+)"/#)?.output.1)
        let cookie = try #require(form.stdout.firstMatch(of: #/gd_console_signin=([^;]+);/#)?.output.1)
        /// One sign-in from `address`: its HTTP status.
        @Sendable func signIn(from address: String, name: String, password: String) async throws -> String {
            try await Curl.run([
                "--interface", address, "-H", "Cookie: gd_console_signin=\(cookie)", "-o", "/dev/null", "-w", "%{http_code}",
                "--data-urlencode", "csrf=\(csrf)", "--data-urlencode", "name=\(name)", "--data-urlencode", "password=\(password)", base,
            ]).stdout
        }
        let (flood, own) = try await withThrowingTaskGroup(of: (flood: [String], own: [String]).self) { group in
            // Four addresses, each two waves of four at once under four names: 8 failures per
            // address (30 allowed), 2 per name and address (10 allowed).
            for address in 2...5 {
                group.addTask {
                    var statuses: [String] = []
                    for wave in 0..<2 {
                        statuses += try await withThrowingTaskGroup(of: String.self) { wave4 in
                            for n in 0..<4 {
                                wave4.addTask { try await signIn(from: "127.0.0.\(address)", name: "guess\(n)", password: "wrong \(wave)") }
                            }
                            return try await wave4.reduce(into: []) { $0.append($1) }
                        }
                    }
                    return (statuses, [])
                }
            }
            group.addTask {
                var statuses: [String] = []
                for _ in 0..<4 { statuses.append(try await signIn(from: "127.0.0.1", name: "ops", password: password)) }
                return ([], statuses)
            }
            return try await group.reduce(into: ([String](), [String]())) {
                $0.0 += $1.flood
                $0.1 += $1.own
            }
        }
        #expect(own == ["303", "303", "303", "303"], "the operator's sign-ins: \(own)")
        #expect(flood.count == 32 && flood.allSatisfy { $0 == "401" }, "\(flood)")
    }
}

/// An answer of the live server: its status and body.
private struct Answer {
    var status: HTTPResponse.Status
    var body: Data

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try JSONDecoder().decode(T.self, from: body) }

    /// The error code of a refusal, or nil.
    func error() -> SyncErrorCode? { (try? decode(SyncErrorBody.self))?.error }
}

extension TestClient {
    /// `method uri` with `token` and a JSON `body`.
    fileprivate func call(_ method: HTTPRequest.Method, _ uri: String, token: String, body: Data? = nil) async throws -> Answer {
        var headers = API.auth(token)
        if body != nil { headers[.contentType] = "application/json" }
        let response = try await execute(TestClient.Request(uri, method: method, headers: headers, body: body.map { ByteBuffer(bytes: $0) }))
        return Answer(status: response.status, body: response.body.map { Data($0.readableBytesView) } ?? Data())
    }
}
