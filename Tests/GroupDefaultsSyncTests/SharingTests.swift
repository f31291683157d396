import AsyncHTTPClient
import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import TestSupport
import Testing

/// Shared suites, with the real tools and the real server on both backends: an owner account
/// (alice) and a member account (bob), two devices each. What is promised: a `write` member's
/// devices and the owner's converge; a `read` member changes nothing; removal ends access at once;
/// every bad invitation is one line, exit 1, and changes nothing on either side.
@Suite("Shared suites", .timeLimit(.minutes(3)))
struct SharingTests {
    /// The four devices: alice's two of `family`, bob's two of his local `home`.
    struct Family {
        let server: SyncServer
        let bobToken: String
        let alicePhone: ToolDevice
        let aliceTablet: ToolDevice
        let bobPhone: ToolDevice
        let bobTablet: ToolDevice

        var all: [ToolDevice] { [alicePhone, aliceTablet, bobPhone, bobTablet] }

        /// alice's devices configured for `family` (the phone holding `doorbell`, synced).
        static func with(_ backend: StorageBackend, _ body: (Family) async throws -> Void) async throws {
            try await SyncServer.with(backend) { server in
                let bobToken = try await ServerTool.createToken(storage: server.storage, account: "bob")
                let family = Family(
                    server: server,
                    bobToken: bobToken,
                    alicePhone: ToolDevice("family"),
                    aliceTablet: ToolDevice("family"),
                    bobPhone: ToolDevice("home"),
                    bobTablet: ToolDevice("home")
                )
                defer { for device in family.all { device.remove() } }
                try await family.alicePhone.configure(server)
                try await family.aliceTablet.configure(server)
                try family.alicePhone.open().set("ding.caf", forKey: "doorbell")
                try await expectOK(family.alicePhone.sync("sync"))
                try await body(family)
            }
        }

        /// `share family --role ROLE` on alice's phone: the code it prints.
        func invite(_ role: String, by device: ToolDevice? = nil, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
            let result = try await (device ?? alicePhone).sync("share", ["--role", role])
            #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
            let line = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("code: ") }, sourceLocation: sourceLocation)
            return String(line.dropFirst("code: ".count))
        }

        /// `configure --invitation CODE --as home` on bob's phone (bob's token).
        func join(
            _ code: String,
            on device: ToolDevice? = nil,
            as name: String = "home"
        ) async throws -> (status: Int32, stdout: String, stderr: String) {
            let device = device ?? bobPhone
            let file = try device.tokenFile(bobToken, name: "bob.token")
            return try await device.syncTool([
                "configure", "--invitation", code, "--server", server.url.absoluteString, "--token-file", file, "--as", name,
            ])
        }

        /// bob's tablet, configured as another device of the member account.
        func configureBobTablet() async throws {
            let file = try bobTablet.tokenFile(bobToken, name: "bob.token")
            try await expectOK(
                bobTablet.sync("configure", ["--server", server.url.absoluteString, "--token-file", file, "--shared-from", "alice/family"])
            )
        }
    }

    @Test(
        "a write member's two devices and the owner's two converge on edits made offline on all four; the member's changes count against the owner's suite",
        arguments: StorageBackend.allCases
    )
    func fourDevicesConverge(backend: StorageBackend) async throws {
        try await Family.with(backend) { family in
            let joined = try await family.join(try await family.invite("write"))
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(joined.stdout.contains("alice's suite family, as a write member"), "\(joined.stdout)")
            try await family.configureBobTablet()
            for device in family.all { try await expectOK(device.sync("sync")) }
            #expect(try family.bobTablet.open().string(forKey: "doorbell") == "ding.caf")

            // Offline: each device writes a key of its own, the first three the common one, in
            // turn, and bob's tablet, last, removes it: the member's deletion is the last write.
            for (index, device) in family.all.enumerated() {
                let defaults = try device.open()
                defaults.set(index, forKey: "own.\(index)")
                if index < 3 { defaults.set("sound-\(index).caf", forKey: "doorbell") } else { defaults.removeObject(forKey: "doorbell") }
                try await Task.sleep(for: .milliseconds(3))  // distinct HLC milliseconds: the order is the test's
            }
            for _ in 0..<2 {
                for device in family.all { try await expectOK(device.sync("sync")) }
            }
            let expected: [String: PropertyListValue] = ["own.0": .integer(0), "own.1": .integer(1), "own.2": .integer(2), "own.3": .integer(3)]
            for device in family.all {
                let values = try device.open().propertyListValues()
                #expect(values == expected, "\(device.suite) in \(device.directory.lastPathComponent): \(values)")
            }
            // The change feed names the account of another account's device, and only of those.
            let origins = try family.all.map { try $0.open().origin }
            for (index, device) in family.all.enumerated() {
                let sources = try remoteSources(device.open())
                for (other, origin) in origins.enumerated() where other != index {
                    let expected: SharedDefaults.Change.Source =
                        index / 2 == other / 2
                        ? .anotherDevice(deviceID: origin) : .anotherAccount(account: other < 2 ? "alice" : "bob", deviceID: origin)
                    #expect(
                        sources["own.\(other)"] == expected,
                        "device \(index) saw own.\(other) from \(sources["own.\(other)"].map { "\($0)" } ?? "nowhere")"
                    )
                }
            }
            // The server says who pushed each of the suite's entries: the member's, not the owner's.
            let owner = family.server.token
            let page = try await SyncClient(server: family.server.url, suite: "family", http: family.server.http) { owner }.changes(since: 0)
            let pushers = Dictionary(uniqueKeysWithValues: page.entries.map { ($0.key, $0.account ?? "owner") })
            #expect(pushers == ["own.0": "owner", "own.1": "owner", "own.2": "bob", "own.3": "bob", "doorbell": "bob"], "\(pushers)")
            // The member's pushes are the owner's suite: alice's own list shows its keys.
            let listed = try await suites(family.server, token: family.server.token)
            #expect(listed.first { $0.name == "family" }?.keys == 4, "\(listed)")
            let bobs = try await suites(family.server, token: family.bobToken)
            #expect(bobs.map(\.name) == ["family"] && bobs.first?.owner == "alice" && bobs.first?.role == .write, "\(bobs)")
        }
    }

    @Test("a read member's devices change nothing: local writes stay local and are reported (exit 1), the server answers 403 to a push anyway")
    func readMemberChangesNothing() async throws {
        try await Family.with(.lmdb) { family in
            #expect(try await family.join(try await family.invite("read")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            #expect(try family.bobPhone.open().string(forKey: "doorbell") == "ding.caf")

            try family.bobPhone.open().set("bob.caf", forKey: "doorbell")
            let sync = try await family.bobPhone.sync("sync")
            #expect(sync.status == 1, "\(sync)")
            #expect(sync.stderr.contains("stay on this device, not sent: this account is a read member of alice's suite family"), "\(sync.stderr)")
            #expect(sync.stderr.split(separator: "\n").count == 1, "\(sync.stderr)")
            try await expectOK(family.aliceTablet.sync("sync"))
            #expect(try family.aliceTablet.open().string(forKey: "doorbell") == "ding.caf", "nothing reached the server")

            // Past the tool, at the API: 403 insufficient_role, nothing stored.
            var client = SyncClient(server: family.server.url, suite: "family", http: family.server.http) { family.bobToken }
            client.owner = "alice"
            let request = PushRequest(deviceID: 7, batchID: "b1", ops: [PushOp(key: "doorbell", value: .string("x"), hlc: HLC(rawValue: 1 << 40))])
            let body = Array(try JSONEncoder().encode(request))
            let refusal = await #expect(throws: SyncError.self) { _ = try await client.push(body: body) }
            #expect(refusal?.code == .insufficientRole && refusal?.status == 403, "\(String(describing: refusal))")
            #expect(try await client.changes(since: 0, limit: 100).entries.map(\.key) == ["doorbell"])

            // The owner's newer value replaces the local one (kept in the journal), as for anyone.
            try family.alicePhone.open().set("chime.caf", forKey: "doorbell")
            try await expectOK(family.alicePhone.sync("sync"))
            _ = try await family.bobPhone.sync("sync")
            #expect(try family.bobPhone.open().string(forKey: "doorbell") == "chime.caf")
        }
    }

    @Test(
        "a member's device follows its account's role: joined again as read from another device, its next sync keeps its change (exit 1, status says read); joined again as write, it sends it",
        arguments: StorageBackend.allCases
    )
    func memberDeviceFollowsTheRole(backend: StorageBackend) async throws {
        try await Family.with(backend) { family in
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await family.configureBobTablet()
            try await expectOK(family.bobTablet.sync("sync"))
            let laptop = ToolDevice("home")
            defer { laptop.remove() }

            // bob is removed and invited back as a read member, joining from another device; the
            // tablet did not sync meanwhile and still believes it writes.
            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            #expect(try await family.join(try await family.invite("read"), on: laptop).status == 0)
            try family.bobTablet.open().set("tablet.caf", forKey: "doorbell")
            let kept = try await family.bobTablet.sync("sync")
            #expect(kept.status == 1, "\(kept)")
            #expect(kept.stderr.contains("this account is a read member of alice's suite family"), "\(kept.stderr)")
            let status = try await family.bobTablet.sync("status", ["--json"])
            #expect(status.stdout.contains(#""role" : "read""#), "\(status.stdout)")
            try await expectOK(family.alicePhone.sync("sync"))
            #expect(try family.alicePhone.open().string(forKey: "doorbell") == "ding.caf", "nothing reached the server")

            // Invited back as a writer: the tablet's kept change is sent at its next sync.
            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            let writer = ToolDevice("home")
            defer { writer.remove() }
            #expect(try await family.join(try await family.invite("write"), on: writer).status == 0)
            try await expectOK(family.bobTablet.sync("sync"))
            try await expectOK(family.alicePhone.sync("sync"))
            #expect(try family.alicePhone.open().string(forKey: "doorbell") == "tablet.caf")
        }
    }

    @Test(
        "removing a member ends its access at once: an open event stream ends, the next sync is refused, its values stay; a member may leave",
        arguments: StorageBackend.allCases
    )
    func removalEndsAccess(backend: StorageBackend) async throws {
        try await Family.with(backend) { family in
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await family.configureBobTablet()
            try await expectOK(family.bobPhone.sync("sync"))
            try await expectOK(family.bobTablet.sync("sync"))

            // bob's stream is open; the removal wakes it, it ends with `forbidden` (long before
            // the 15 s heartbeat would have made it look).
            var client = SyncClient(server: family.server.url, suite: "family", http: family.server.http) { family.bobToken }
            client.owner = "alice"
            let opened = AsyncStream<Void>.makeStream()
            let events = Task { () -> [ServerSentEvent] in
                let collected = EventBox()
                try await client.events(after: 0, onOpen: { opened.continuation.yield() }) { collected.append($0) }
                return collected.events
            }
            for await _ in opened.stream { break }
            let started = ContinuousClock.now
            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            let ended = try await events.value
            // The heartbeat would have made it look 15 s after it opened; the unshare (a process
            // that syncs, then removes) took 10.02 s once on a machine building beside the tests.
            #expect(ContinuousClock.now - started < .seconds(14), "the stream ended at the removal, not at a heartbeat")
            #expect(ended.last?.event == "not_a_member", "\(ended)")

            let refused = try await family.bobPhone.sync("sync")
            #expect(refused.status == 3 && refused.stderr.contains("not shared with this account"), "\(refused)")
            #expect(try family.bobPhone.open().string(forKey: "doorbell") == "ding.caf", "the values stay")
            let members = try await family.alicePhone.sync("members", ["--json"])
            let list = try JSONDecoder().decode(MemberList.self, from: Data(members.stdout.utf8))
            #expect(list.members.map(\.account) == ["alice"])
            let status = try await family.bobPhone.sync("status")
            #expect(status.status == 3 && status.stdout.contains("state: not shared:"), "\(status)")

            // Invited again, bob joins with the copy he kept (the local name exists: it is this suite's).
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            #expect(try family.bobPhone.open().string(forKey: "doorbell") == "ding.caf")

            // bob's tablet leaves: the membership ends for the account, and the tablet's copy
            // stops syncing and keeps its values.
            let left = try await family.bobTablet.sync("leave")
            #expect(left.status == 0 && left.stdout.contains("left alice's suite family"), "\(left)")
            #expect(try family.bobTablet.open().string(forKey: "doorbell") == "ding.caf")
            #expect(try await family.bobTablet.sync("status").stdout.contains("not synced"))
            let after = try await family.alicePhone.sync("members", ["--json"])
            #expect(try JSONDecoder().decode(MemberList.self, from: Data(after.stdout.utf8)).members.map(\.account) == ["alice"])

            // The copy it kept is alice's: no hint, and no plain configure, makes it bob's own suite
            // (that uploaded alice's values into bob's account); an invitation joins it again.
            let hint = try await family.bobTablet.sync("sync")
            #expect(hint.status == 1, "\(hint)")
            #expect(hint.stderr.contains("home holds a copy of alice's suite family, which this account left"), "\(hint.stderr)")
            #expect(
                hint.stderr.contains("configure --directory \(family.bobTablet.directory.path) --invitation CODE")
                    && !hint.stderr.contains("home --server"),
                "\(hint.stderr)"
            )
            let token = try family.bobTablet.tokenFile(family.bobToken, name: "bob.token")
            let own = try await family.bobTablet.sync("configure", ["--server", family.server.url.absoluteString, "--token-file", token])
            #expect(own.status == 1 && own.stderr.contains("would upload alice's values"), "\(own)")
            let bobs = try await ServerTool.createToken(storage: family.server.storage, account: "bob")
            #expect(try await family.server.client("home", token: bobs).snapshot(after: nil, limit: 10).entries.isEmpty, "nothing uploaded")
            #expect(try await family.join(try await family.invite("write"), on: family.bobTablet).status == 0)
            try await expectOK(family.bobTablet.sync("sync"))
            #expect(try await family.bobTablet.sync("status").stdout.contains("alice's suite family"))
        }
    }

    @Test(
        "a removed member's copy stays the owner's after unconfigure; a copy of a deleted owner's suite joins none of the new account of that name, nor the member's own",
        arguments: StorageBackend.allCases
    )
    func copiesNeverChangeHands(backend: StorageBackend) async throws {
        try await Family.with(backend) { family in
            let token = try family.bobPhone.tokenFile(family.bobToken, name: "bob.token")
            let asOwn = ["--server", family.server.url.absoluteString, "--token-file", token]
            let bobs = try await ServerTool.createToken(storage: family.server.storage, account: "bob")
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))

            // Removed, then unconfigured as the hint says: the copy is still alice's.
            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            #expect(try await family.bobPhone.sync("sync").status == 3)
            try await expectOK(family.bobPhone.sync("unconfigure"))
            let own = try await family.bobPhone.sync("configure", asOwn)
            #expect(own.status == 1 && own.stderr.contains("would upload alice's values"), "\(own)")
            // Nor as a copy of bob's own suite, or of another one.
            for other in ["bob", "bob/home"] {
                let disguised = try await family.bobPhone.sync("configure", asOwn + ["--shared-from", other])
                #expect(disguised.status == 1 && disguised.stderr.contains("would upload alice's values"), "\(other): \(disguised)")
            }
            #expect(try await family.server.client("home", token: bobs).snapshot(after: nil, limit: 10).entries.isEmpty, "nothing uploaded")

            // Joined again; then alice's account is deleted and a new account takes her name.
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            #expect(try await ServerTool.run(["accounts", "delete", "alice", "--yes"] + family.server.storage).status == 0)
            let newAlice = try await ServerTool.createToken(storage: family.server.storage, account: "alice")
            let paused = try await family.bobPhone.sync("sync")
            #expect(paused.status == 3, "\(paused)")
            #expect(
                paused.stderr.contains("`groupdefaults-sync unconfigure") && !paused.stderr.contains("configure the suite again"),
                "\(paused.stderr)"
            )
            // A plain configure keeps it alice's copy: it uploads nothing anywhere.
            _ = try await family.bobPhone.sync("configure", asOwn)
            #expect(try await family.bobPhone.sync("sync").status != 0)
            // The new alice shares a suite of the same name: the old copy does not join it.
            let newPhone = ToolDevice("family")
            defer { newPhone.remove() }
            try await newPhone.configure(family.server, token: newAlice)
            try newPhone.open().set("new.caf", forKey: "doorbell")
            try await expectOK(newPhone.sync("sync"))
            let rejoined = try await family.join(try await family.invite("write", by: newPhone))
            #expect(rejoined.status == 1 && rejoined.stderr.contains("from before the account alice was deleted"), "\(rejoined)")
            // Bob joins the new alice's suite under another name; the old copy, unconfigured as its
            // hint says, is refused as a copy of it (the server knows the incarnation it remembers).
            #expect(try await family.join(try await family.invite("write", by: newPhone), as: "fresh").status == 0)
            try await expectOK(family.bobPhone.sync("unconfigure"))
            let sharedFrom = try await family.bobPhone.sync("configure", asOwn + ["--shared-from", "alice/family"])
            #expect(sharedFrom.status == 1 && sharedFrom.stderr.contains("from before the account alice was deleted"), "\(sharedFrom)")
            #expect(!sharedFrom.stderr.contains("  "), "one line, single spaces: \(sharedFrom.stderr)")
            let newFamily = try await family.server.client("family", token: newAlice).snapshot(after: nil, limit: 10).entries
            #expect(newFamily.map(\.key) == ["doorbell"] && newFamily.first?.value == .string("new.caf"), "\(newFamily)")
            #expect(try await family.server.client("home", token: bobs).snapshot(after: nil, limit: 10).entries.isEmpty, "nothing uploaded")
            #expect(try family.bobPhone.open().string(forKey: "doorbell") == "ding.caf", "the copy is kept on the device")
        }
    }

    @Test("a member's `run` pauses when it is removed and resumes once it joins again with a new invitation; status says what stands")
    func runResumesAfterRejoining() async throws {
        try await Family.with(.lmdb) { family in
            #expect(try await family.join(try await family.invite("write")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            let run = try family.bobPhone.start("run", ["--log-level", "warning"])
            defer { run.signal(SIGKILL) }
            let bob = try family.bobPhone.open()
            var changes = bob.changes(forKeys: ["doorbell"]).makeAsyncIterator()

            try await expectOK(family.alicePhone.sync("unshare", ["--account", "bob"]))
            // The run notices at once (its stream ends); status says so, exit 3.
            #expect(
                try await eventually(within: .seconds(20), every: .milliseconds(200)) {
                    try await family.bobPhone.sync("status").stdout.contains("state: not shared:")
                }
            )
            #expect(try await family.join(try await family.invite("write")).status == 0)
            let status = try await family.bobPhone.sync("status")
            #expect(status.status == 0 && !status.stdout.contains("not shared"), "configure clears the paused state: \(status)")

            // The same run, not restarted, takes the owner's next change.
            try family.alicePhone.open().set("chime.caf", forKey: "doorbell")
            try await expectOK(family.alicePhone.sync("sync"))
            while let change = await changes.next() {
                if change.isRemote, change.value == .string("chime.caf") { break }
            }
            #expect(bob.string(forKey: "doorbell") == "chime.caf")
            #expect(run.stderr.contains("no longer shared with this account"), "\(run.stderr)")
            #expect(await run.terminate().status == 0, "\(run.stderr)")
        }
    }

    @Test(
        "a read member's status says its changes stay on the device (exit 1); `--shared-from` naming a suite not shared is exit 1, a token that cannot join exit 3, nothing changed"
    )
    func statusAndConfigureMistakes() async throws {
        try await Family.with(.lmdb) { family in
            #expect(try await family.join(try await family.invite("read")).status == 0)
            try await expectOK(family.bobPhone.sync("sync"))
            try family.bobPhone.open().set("mine", forKey: "note")
            let status = try await family.bobPhone.sync("status")
            #expect(status.status == 1 && status.stdout.contains("kept on this device"), "\(status)")
            #expect(
                status.stderr.contains("stay on this device, not sent: this account is a read member of alice's suite family"),
                "\(status.stderr)"
            )

            let file = try family.bobTablet.tokenFile(family.bobToken, name: "bob.token")
            let typo = try await family.bobTablet.sync(
                "configure",
                ["--server", family.server.url.absoluteString, "--token-file", file, "--shared-from", "alice/famly"]
            )
            #expect(typo.status == 1 && typo.stderr.contains("alice shares no suite 'famly' with this account"), "\(typo)")
            #expect(!FileManager.default.fileExists(atPath: family.bobTablet.directory.appendingPathComponent("home.lmdb").path))

            let narrow = try await ServerTool.createToken(storage: family.server.storage, account: "carol", ["--suites", "other.*"])
            let narrowFile = try family.bobTablet.tokenFile(narrow, name: "carol.token")
            let joined = try await family.bobTablet.syncTool([
                "configure", "--invitation", try await family.invite("read"), "--server", family.server.url.absoluteString,
                "--token-file", narrowFile, "--as", "carols",
            ])
            #expect(joined.status == 3 && joined.stderr.contains("a token of this account that covers the owner's name"), "\(joined)")
            #expect(joined.stderr.split(separator: "\n").count == 1)
        }
    }

    @Test(
        "bad invitations and refused sharing: used, revoked, mistyped, a local name that exists, removing the owner, an inviter that cannot administer: one line, exit 1, nothing changed"
    )
    func badInput() async throws {
        try await Family.with(.postgres) { family in
            func expectRefused(
                _ result: (status: Int32, stdout: String, stderr: String),
                _ words: String,
                sourceLocation: SourceLocation = #_sourceLocation
            ) {
                #expect(result.status == 1, "\(result)", sourceLocation: sourceLocation)
                #expect(result.stderr.contains(words), "\(result.stderr)", sourceLocation: sourceLocation)
                #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)", sourceLocation: sourceLocation)
            }
            // Mistyped: caught by the code's check characters, before the server is asked.
            let code = try await family.invite("write")
            var typo = Array(code)
            typo[0] = typo[0] == "A" ? "B" : "A"
            expectRefused(try await family.join(String(typo)), "does not check out")
            // A local name that exists: nothing is accepted.
            try family.bobPhone.open().set(1, forKey: "mine")
            expectRefused(try await family.join(code, as: "home"), "a suite named home exists here already")
            #expect(try family.bobPhone.open().propertyListValues() == ["mine": .integer(1)])
            let pending = try await family.alicePhone.sync("invitations", ["--json"])
            let invitations = try JSONDecoder().decode(InvitationList.self, from: Data(pending.stdout.utf8)).invitations
            #expect(invitations.map(\.state) == [.pending], "\(pending)")
            // Used: the second account to try gets nothing.
            #expect(try await family.join(code, as: "shared").status == 0)
            expectRefused(try await family.join(code, on: family.bobTablet, as: "home"), "already used")
            #expect(!FileManager.default.fileExists(atPath: family.bobTablet.directory.appendingPathComponent("home.lmdb").path))
            // Revoked.
            let revokedCode = try await family.invite("read")
            let list = try JSONDecoder().decode(
                InvitationList.self,
                from: Data(try await family.alicePhone.sync("invitations", ["--json"]).stdout.utf8)
            )
            let waiting = try #require(list.invitations.first { $0.state == .pending })
            try await expectOK(family.alicePhone.sync("invitations", ["--revoke", waiting.id]))
            expectRefused(try await family.join(revokedCode, on: family.bobTablet, as: "home"), "revoked")
            // A write member cannot invite; nobody removes the owner.
            let bobShared = try await family.bobPhone.syncTool(["share", "shared", "--role", "read"])
            expectRefused(bobShared, "only the suite's owner or an admin member invites")
            expectRefused(try await family.bobPhone.syncTool(["unshare", "shared", "--account", "alice"]), "owns the suite and cannot be removed")
            expectRefused(try await family.alicePhone.sync("unshare", ["--account", "alice"]), "owns the suite and cannot be removed")
            let members = try JSONDecoder().decode(
                MemberList.self,
                from: Data(try await family.alicePhone.sync("members", ["--json"]).stdout.utf8)
            )
            #expect(members.members.map(\.account) == ["alice", "bob"] && members.members.last?.role == .write)
        }
    }
}

/// `GET /v1/suites` with `token`.
/// The source of the last remote change of each key in `defaults`' log.
private func remoteSources(_ defaults: SharedDefaults) throws -> [String: SharedDefaults.Change.Source] {
    let feed = try defaults.changeFeed(since: 0)
    var sources: [String: SharedDefaults.Change.Source] = [:]
    while let change = try feed.nextAvailable() {
        if change.isRemote { sources[change.key] = change.source }
    }
    return sources
}

private func suites(_ server: SyncServer, token: String) async throws -> [SuiteList.Suite] {
    var request = HTTPClientRequest(url: server.url.absoluteString + "/v1/suites")
    request.headers.add(name: "Authorization", value: "Bearer \(token)")
    let response = try await server.http.execute(request, timeout: .seconds(10))
    #expect(response.status == .ok)
    return try JSONDecoder().decode(SuiteList.self, from: Data(buffer: try await response.body.collect(upTo: 1 << 20))).suites
}

extension SharedDefaults {
    /// Every value, by key.
    fileprivate func propertyListValues() -> [String: PropertyListValue] {
        Dictionary(uniqueKeysWithValues: dictionaryRepresentation().keys.compactMap { key in value(forKey: key).map { (key, $0) } })
    }
}

/// Events collected by a stream's callback.
private final class EventBox: @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [ServerSentEvent] = []

    func append(_ events: [ServerSentEvent]) { lock.withLock { collected += events } }
    var events: [ServerSentEvent] { lock.withLock { collected } }
}

/// Expects a tool to have exited 0.
func expectOK(
    _ result: (status: Int32, stdout: String, stderr: String),
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
}
