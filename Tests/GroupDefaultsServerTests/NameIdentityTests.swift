import Foundation
import GroupDefaultsServer
import GroupDefaultsWire
import Hummingbird
import HummingbirdTesting
import TestSupport
import Testing

/// Names are identity, and identity is bytes: two accounts whose names look alike, or are even
/// equal Swift strings (KELVIN SIGN `K` and `K`; `é` and `e` + U+0301), are strangers to each
/// other on every route and in every store; a new name that looks like an existing one is refused.
/// Written from the promise (docs/reference/names.md), over the look-alike pairs of `LookAlikeNames`.
@Suite("Names are their bytes")
struct NameIdentityTests {
    /// The look-alike pairs each test runs over: one of each kind, then random ones.
    static func pairs(random count: Int, seed: UInt64) -> [(String, String)] {
        var rng = SeededGenerator(seed: seed)
        return LookAlikeNames.pairs + (0..<count).map { _ in LookAlikeNames.pair(using: &rng) }
    }

    private static func query(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    @Test(
        "an account whose name looks like another's reaches none of its suites, members or invitations, and deleting it leaves the other whole",
        arguments: StorageBackend.allCases
    )
    func lookAlikeAccountsAreStrangers(backend: StorageBackend) async throws {
        for (index, (owner, stranger)) in Self.pairs(random: 4, seed: 46).enumerated() {
            try await backend.withStorage { storage in
                func token(_ account: String) async throws -> String {
                    let made = Tokens.make(account: account, suitePatterns: ["*"], readOnly: false, device: nil, expires: nil)
                    try await storage.createToken(made.stored)
                    return made.token
                }
                let ownerToken = try await token(owner)
                let strangerToken = try await token(stranger)
                let member = try await token("member\(index)")
                let configuration = ServerConfiguration(port: 0, storage: .embedded(directory: "/nonexistent"))
                let app = try buildApplication(configuration: configuration, storage: storage)
                let id = String(format: "%032x", index + 1)
                try await app.test(.router) { client in
                    #expect(try await client.push("notes", token: ownerToken, API.push([API.set("sound", "mine.caf")])).status == .ok)
                    let invitation = ByteBuffer(bytes: try JSONEncoder().encode(InvitationRequest(invitationID: id, role: .write)))
                    let invited = try await client.execute(
                        uri: "/v1/suites/notes/invitations",
                        method: .post,
                        headers: API.auth(ownerToken),
                        body: invitation
                    )
                    #expect(invited.status == .ok)
                    #expect(try await client.execute(uri: "/v1/invitations/\(id)/accept", method: .post, headers: API.auth(member)).status == .ok)

                    let of = "?owner=\(Self.query(owner))"
                    let what = "\(owner.debugDescription) / \(stranger.debugDescription), \(backend)"
                    let reads = [
                        "snapshot", "changes", "members", "invitations", "keys/sound/history", "history", "key-bags", "events",
                    ].map { "/v1/suites/notes/\($0)\(of)" }
                    for uri in reads {
                        #expect(try await API.error(client.get(uri, token: strangerToken)).error == .notAMember, "\(uri): \(what)")
                    }
                    let push = try await client.execute(
                        uri: "/v1/suites/notes/push\(of)",
                        method: .post,
                        headers: API.auth(strangerToken),
                        body: try API.push([API.set("sound", "theirs.caf")])
                    )
                    #expect(try API.error(push).error == .notAMember, "\(what)")
                    let admin = ByteBuffer(
                        bytes: try JSONEncoder().encode(InvitationRequest(invitationID: String(format: "%032x", 999), role: .admin))
                    )
                    let adminInvitation = try await client.execute(
                        uri: "/v1/suites/notes/invitations\(of)",
                        method: .post,
                        headers: API.auth(strangerToken),
                        body: admin
                    )
                    #expect(try API.error(adminInvitation).error == .notAMember, "\(what)")
                    let removal = try await client.execute(
                        uri: "/v1/suites/notes/members/member\(index)\(of)",
                        method: .delete,
                        headers: API.auth(strangerToken)
                    )
                    #expect(try API.error(removal).error == .notAMember, "\(what)")
                    // Its own suite of that name is its own, and empty.
                    let own = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/notes/snapshot", token: strangerToken))
                    #expect(own.entries.isEmpty, "\(what)")
                    // The operator's lookups by account name: the owner's devices and audit records are not the stranger's.
                    let now = HLC.wallClockMilliseconds()
                    let phoneToken = Tokens.make(account: owner, suitePatterns: ["*"], readOnly: false, device: "phone", expires: nil).stored
                    try await storage.createToken(phoneToken)
                    try await storage.recordDevice(
                        StoredDevice(
                            account: owner,
                            tokenID: phoneToken.id,
                            name: "phone",
                            deviceID: 5,
                            firstSeen: now,
                            lastSeen: now,
                            lastPush: nil,
                            suites: ["notes"]
                        )
                    )
                    try await storage.appendAudit(.commandLine(.tokenCreate, account: owner, target: "token tok_o"))
                    #expect(try await storage.devices(account: stranger).isEmpty, "\(what)")
                    #expect(try await storage.devices(account: owner).contains { $0.tokenID == phoneToken.id }, "\(what)")
                    #expect(try await storage.auditRecords(account: stranger, since: nil, limit: 100).isEmpty, "\(what)")
                    #expect(try await storage.auditRecords(account: owner, since: nil, limit: 100).contains { $0.target == "token tok_o" }, "\(what)")
                    // Two accounts in the list; deleting the stranger leaves the owner, its suite and its member.
                    let listed = try await storage.accountSummaries().map(\.account.exact)
                    #expect(listed.contains(owner.exact) && listed.contains(stranger.exact), "\(what)")
                    #expect(try await storage.deleteAccount(stranger))
                    let kept = try API.decode(SnapshotPage.self, try await client.get("/v1/suites/notes/snapshot", token: ownerToken))
                    #expect(kept.entries.map(\.value) == [.string("mine.caf")], "\(what)")
                    let members = try API.decode(MemberList.self, try await client.get("/v1/suites/notes/members", token: ownerToken))
                    #expect(Set(members.members.map(\.account.exact)) == [owner.exact, ExactName("member\(index)")], "\(what)")
                    #expect(try await storage.accountSummaries().map(\.account.exact).contains(owner.exact), "\(what)")
                }
            }
        }
    }

    @Test(
        "a suite's members list only the devices that used that suite, not one whose name looks alike or is an equal Swift string",
        arguments: StorageBackend.allCases
    )
    func membersListOnlyThatSuitesDevices(backend: StorageBackend) async throws {
        for (suite, lookAlike) in [("Kfam", "\u{212A}fam"), ("caf\u{E9}", "cafe\u{301}")] {
            try await backend.withStorage { storage in
                func token(_ account: String) async throws -> String {
                    let made = Tokens.make(account: account, suitePatterns: ["*"], readOnly: false, device: nil, expires: nil)
                    try await storage.createToken(made.stored)
                    return made.token
                }
                let ana = try await token("ana")
                let ben = try await token("ben")
                // ana's phone used the suite, her tablet only its look-alike (both from one folder of hers).
                let now = HLC.wallClockMilliseconds()
                for (name, deviceID, used) in [("phone", UInt64(1), suite), ("tablet", UInt64(2), lookAlike)] {
                    let deviceToken = Tokens.make(account: "ana", suitePatterns: ["*"], readOnly: false, device: name, expires: nil).stored
                    try await storage.createToken(deviceToken)
                    try await storage.recordDevice(
                        StoredDevice(
                            account: "ana",
                            tokenID: deviceToken.id,
                            name: name,
                            deviceID: deviceID,
                            firstSeen: now,
                            lastSeen: now,
                            lastPush: nil,
                            suites: [used]
                        )
                    )
                }
                let configuration = ServerConfiguration(port: 0, storage: .embedded(directory: "/nonexistent"))
                let app = try buildApplication(configuration: configuration, storage: storage)
                let encoded = suite.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed)!
                let path = "/v1/suites/\(encoded)"
                try await app.test(.router) { client in
                    #expect(try await client.push(encoded, token: ana, API.push([API.set("sound", "mine.caf")])).status == .ok)
                    let id = String(format: "%032x", 7)
                    let invitation = ByteBuffer(bytes: try JSONEncoder().encode(InvitationRequest(invitationID: id, role: .admin)))
                    let invited = try await client.execute(uri: "\(path)/invitations", method: .post, headers: API.auth(ana), body: invitation)
                    #expect(invited.status == .ok)
                    #expect(try await client.execute(uri: "/v1/invitations/\(id)/accept", method: .post, headers: API.auth(ben)).status == .ok)
                    // The owner, and an admin of the suite: ana's phone only.
                    for (who, uri) in [("ana", "\(path)/members"), ("ben", "\(path)/members?owner=ana")] {
                        let list = try API.decode(MemberList.self, try await client.get(uri, token: who == "ana" ? ana : ben))
                        let owner = try #require(list.members.first { $0.account.isSameName(as: "ana") })
                        let devices = owner.devices ?? []
                        let what = "\(who), \(suite.debugDescription), \(backend): \(devices)"
                        #expect(devices.contains { $0.deviceID == 1 } && !devices.contains { $0.deviceID == 2 }, "\(what)")
                        #expect(devices.allSatisfy { $0.suites.map(\.exact) == [suite.exact] }, "\(what)")
                    }
                }
            }
        }
    }

    @Test("an account's export keeps both spellings of a key, with their own values and histories", arguments: StorageBackend.allCases)
    func exportKeepsBothSpellings(backend: StorageBackend) async throws {
        try await backend.withStorage { storage in
            let quota = SuiteQuota(maxKeys: 1000, maxBytes: 1 << 20)
            let pairs = Self.pairs(random: 3, seed: 7)
            var ops: [PushOp] = []
            for (index, pair) in pairs.enumerated() {
                ops.append(PushOp(key: pair.0, value: .integer(2 * index), hlc: HLC(rawValue: 1 << 40)))
                ops.append(PushOp(key: pair.1, value: .integer(2 * index + 1), hlc: HLC(rawValue: 1 << 40)))
            }
            // Each key distinct by bytes once (LookAlikeNames repeats "ana").
            var seen = Set<ExactName>()
            ops = ops.filter { seen.insert($0.key.exact).inserted }
            let request = PushRequest(deviceID: 7, batchID: "b", ops: ops)
            _ = try await storage.push(account: "ana", suite: "s", request: request, quota: quota, serverTime: "2026-11-29T00:00:00.000Z")
            let export = try await AccountExport.read(account: "ana", from: storage)
            let json = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(export)) as? [String: Any]
            let suite = try #require((json?["suites"] as? [[String: Any]])?.first)
            let entries = (suite["entries"] as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
            let history = (suite["history"] as? [[String: Any]] ?? []).compactMap { $0["key"] as? String }
            #expect(Set(entries.map(\.exact)) == seen && entries.count == seen.count, "\(entries)")
            #expect(Set(history.map(\.exact)) == seen && history.count == seen.count, "\(history)")
        }
    }

    @Test("a new account or operator name that looks like an existing one is refused; the existing name given exactly is that one")
    func newNamesRefuseLookAlikes() throws {
        for (existing, given) in Self.pairs(random: 200, seed: 8265) {
            for kind in [NameKind.account, .operator] where Username.problem(withNew: existing, kind: kind) == nil {
                #expect(throws: NewNames.Refusal.self, "\(given.debugDescription) beside \(existing.debugDescription)") {
                    try NewNames.resolve(given, kind: kind, existing: [existing])
                }
                let same = try NewNames.resolve(existing, kind: kind, existing: [existing])
                #expect(same.name.isSameName(as: existing) && !same.isNew)
            }
        }
        // The measured attacks: the Kelvin sign and an NFD spelling are collisions, said so.
        for (existing, given) in [("Kim", "\u{212A}im"), ("jos\u{E9}", "jose\u{301}"), ("ana", "\u{FF41}na"), ("Ana", "ana")] {
            do {
                _ = try NewNames.resolve(given, kind: .account, existing: [existing])
                Issue.record("\(given.debugDescription) was admitted beside \(existing)")
            } catch {
                #expect(error.isCollision, "\(error)")
            }
        }
        // A new name is kept in its mapped form: NFC, usual width; case kept.
        #expect(try NewNames.resolve("\u{FF21}na", kind: .account, existing: []).name == "Ana")
        #expect(Array(try NewNames.resolve("jose\u{301}", kind: .account, existing: []).name.utf8) == Array("jos\u{E9}".utf8))
        // What no new name may hold.
        for name in [
            "an a", "an\u{200B}a", "\u{FB01}le", "x\ny", "esc\u{1B}[2K", "a/b", " ana", "\u{301}ana", "\u{2028}", "a\u{202E}b", "ok\u{1F600}",
        ] {
            #expect(Username.problem(withNew: name, kind: .account) != nil, "\(name.debugDescription)")
        }
        for name in ["ana", "Ana.Bell", "jos\u{E9}", "\u{5F20}\u{4F1F}", "\u{41C}\u{430}\u{448}\u{430}", "ana@example.com"] {
            #expect(Username.problem(withNew: name, kind: .account) == nil, "\(name.debugDescription)")
        }
        // Every kind refuses control characters in a new name; a stored account name with one still works.
        for kind in NameKind.allCases {
            #expect(kind.problem(with: "a\u{1B}b") != nil && kind.problem(with: "a\nb") != nil && kind.problem(with: "") != nil, "\(kind)")
        }
        #expect(NameKind.account.problem(withStored: "old\naccount") == nil)
        #expect(NameKind.key.problem(with: "caf\u{E9}") == nil && NameKind.key.problem(with: "cafe\u{301}") == nil)
    }

    @Test("stored names that already look alike are named, once per group, with what to do")
    func lookAlikeStoredNames() {
        let notes = NewNames.lookAlikeNotes(["Kim", "\u{212A}im", "ana", "jos\u{E9}", "jose\u{301}", "bob"], kind: .account)
        #expect(notes.count == 2, "\(notes)")
        #expect(notes.allSatisfy { $0.contains("accounts delete") && !$0.contains("\n") })
    }

    @Test(
        "accounts export and delete, devices list and audit given a look-alike of an account name say there is no such account, naming its code points"
    )
    func unknownLookAlikeAccountIsShownByItsCodePoints() async throws {
        let directory = ServerTool.temporaryDirectory("gds-unknown-names")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func server(_ arguments: [String]) async throws -> ProcessResult {
            try await runProcess(ServerTool.executable, arguments + ["--data-dir", directory], stdin: Data())
        }
        for (existing, lookAlike, codePoints) in [
            ("Kim", "\u{212A}im", "(U+212A U+0069 U+006D)"), ("jos\u{E9}", "jose\u{301}", "(U+006A U+006F U+0073 U+0065 U+0301)"),
        ] {
            #expect(try await server(["token", "create", "--create", "--account", existing]).status == 0)
            let unknown = "no account is named '\(lookAlike)' \(codePoints) (see `groupdefaults-server accounts list --data-dir \(directory)`)"
            for command in [["accounts", "export", lookAlike], ["accounts", "delete", lookAlike, "--yes"]] {
                let refused = try await server(command)
                #expect(refused.status == 1 && refused.stderr.contains(unknown), "\(command): \(refused)")
            }
            let devices = try await server(["devices", "list", "--account", lookAlike])
            #expect(devices.status == 0 && devices.stdout == "no devices seen: \(unknown)\n", "\(devices)")
            let audit = try await server(["audit", "--account", lookAlike])
            #expect(audit.status == 0 && audit.stdout == "no records: \(unknown)\n", "\(audit)")
            // The name itself is found, and said as before.
            #expect(
                try await server(["devices", "list", "--account", existing]).stdout.utf8.elementsEqual("account \(existing): no devices seen\n".utf8)
            )
            #expect(try await server(["accounts", "export", existing]).status == 0)
        }
    }

    @Test("token create and admin create refuse a look-alike of an existing name with one line and exit 1, and make nothing")
    func commandsRefuseLookAlikes() async throws {
        let directory = ServerTool.temporaryDirectory("gds-names")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func server(_ arguments: [String], stdin: Data? = nil) async throws -> ProcessResult {
            try await runProcess(ServerTool.executable, arguments + ["--data-dir", directory], stdin: stdin ?? Data())
        }
        #expect(try await server(["token", "create", "--create", "--account", "Kim"]).status == 0)
        #expect(try await server(["token", "create", "--account", "jos\u{E9}"]).status == 0)
        for given in ["\u{212A}im", "kim", "jose\u{301}", "\u{FF2B}im"] {
            let refused = try await server(["token", "create", "--account", given])
            #expect(refused.status == 1, "\(given.debugDescription): \(refused)")
            #expect(
                refused.stderr.split(separator: "\n").count == 1 && refused.stderr.contains("the existing account 'Kim'")
                    || refused.stderr.contains("the existing account 'jos\u{E9}'"),
                "\(refused.stderr)"
            )
            #expect(refused.stdoutData.isEmpty)
        }
        let bad = try await server(["token", "create", "--account", "x\n2026-11-29T04:00:00Z\tforged"])
        #expect(bad.status == 1 && bad.stderr.contains("control characters"), "\(bad)")
        let tokens = try await server(["token", "list"])
        #expect(tokens.stdout.split(separator: "\n").count == 2, "\(tokens.stdout)")

        #expect(try await server(["admin", "create", "--name", "ops"], stdin: Data("correct horse\n".utf8)).status == 0)
        let upper = try await server(["admin", "create", "--name", "OPS"], stdin: Data("correct horse\n".utf8))
        #expect(upper.status == 1 && upper.stderr.contains("looks like the existing operator 'ops'"), "\(upper)")
        #expect(try await server(["admin", "list"]).stdout.split(separator: "\n").count == 1)
    }
}
