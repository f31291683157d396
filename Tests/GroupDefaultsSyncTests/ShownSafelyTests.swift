import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsServer

/// Names and values holding control characters, through every listing of the three tools, the
/// real executables beside a real server (issue 46, "Shown safely everywhere"): each listing
/// prints one line per record with the characters escaped, and the record of issue 46 that a
/// suite's name forged is not there; `--json` keeps them exact. Names the rules now refuse (an
/// account, a suite, a device name with a line break) are written to the store directly, as a store
/// made before the rules holds them.
@Suite("Names and values shown safely", .timeLimit(.minutes(2)))
struct ShownSafelyTests {
    /// What follows a name: a line break and a well-formed audit record, a tab, the terminal's
    /// "erase line", a line separator and a right-to-left override.
    static let forged = "\n2026-11-29T04:00:00Z\tadmin-remove\t-\toperator ops\tby command line\u{1B}[2K\u{2028}\u{202E}"
    /// `forged` as a line shows it.
    static let shown = "\\n2026-11-29T04:00:00Z\\tadmin-remove\\t-\\toperator ops\\tby command line\\u{1B}[2K\\u{2028}\\u{202E}"

    static func hostile(_ name: String) -> String { name + forged }
    static func shown(_ name: String) -> String { name + shown }

    /// `result` succeeded and printed `lines` lines, none of them the forged record, with no
    /// control character but the line ends (and the tabs between fields), holding each of `names`
    /// as `shown` writes it.
    static func expectShownSafely(
        _ result: (status: Int32, stdout: String, stderr: String),
        lines: Int,
        holding names: [String],
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == 0, "\(result.stderr)", sourceLocation: sourceLocation)
        expectOneLineEach(result.stdout, lines: lines, holding: names, sourceLocation: sourceLocation)
    }

    static func expectOneLineEach(_ text: String, lines: Int, holding names: [String], sourceLocation: SourceLocation = #_sourceLocation) {
        let printed = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(printed.count == lines, "\(printed)", sourceLocation: sourceLocation)
        #expect(!printed.contains { $0.hasPrefix("2026-11-29T04:00:00Z") }, "a forged line: \(printed)", sourceLocation: sourceLocation)
        let control = text.unicodeScalars.filter { NameKind.isControl($0) && $0 != "\n" && $0 != "\t" }
        #expect(control.isEmpty, "control characters printed: \(control.map(\.value))", sourceLocation: sourceLocation)
        for name in names { #expect(text.contains(shown(name)), "\(name) not shown escaped in \(text)", sourceLocation: sourceLocation) }
    }

    /// `result` failed with exit status 1 and one line on stderr, escaped.
    static func expectOneLineFailure(
        _ result: (status: Int32, stdout: String, stderr: String),
        _ words: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == 1, "\(result)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(words), "\(result.stderr)", sourceLocation: sourceLocation)
        expectOneLineEach(result.stderr, lines: 1, holding: [], sourceLocation: sourceLocation)
    }

    @Test(
        "groupdefaults-server audit, accounts list, devices list, token list: one line per record, escaped; --json exact; a device name with a line break is refused by token create and by a pairing claim (400 malformed), nothing made"
    )
    func serverListings() async throws {
        try await SyncServer.with(.lmdb) { server in
            let account = Self.hostile("ana")
            let suite = Self.hostile("group.x")
            let device = Self.hostile("phone")
            let key = Self.hostile("key")
            let source = Self.hostile("127.0.0.1")
            let made = Tokens.make(account: account, suitePatterns: [suite], readOnly: false, device: device, expires: nil)
            let store = try LMDBSyncStorage(directory: server.storage[1])
            do {
                try await store.createToken(made.stored)
                let push = PushRequest(
                    deviceID: 7,
                    batchID: "b1",
                    ops: [PushOp(key: key, value: .string(Self.hostile("value")), hlc: HLC(milliseconds: HLC.wallClockMilliseconds(), counter: 0))]
                )
                _ = try await store.push(
                    account: account,
                    suite: suite,
                    request: push,
                    quota: SuiteQuota(maxKeys: 100, maxBytes: 1 << 20),
                    serverTime: TypedJSONDate.format(Date()) ?? ""
                )
                let now = HLC.wallClockMilliseconds()
                try await store.recordDevice(
                    StoredDevice(
                        account: account,
                        tokenID: made.stored.id,
                        name: device,
                        deviceID: 7,
                        firstSeen: now,
                        lastSeen: now,
                        lastPush: now,
                        suites: [suite]
                    )
                )
                try await store.appendAudit(
                    AuditRecord(actor: "token \(made.stored.id)", act: .invitationCreate, account: account, target: "suite \(suite)", source: source)
                )
            } catch {
                try? await store.shutdown()
                throw error
            }
            try await store.shutdown()

            let audit = try await ServerTool.run(["audit"] + server.storage)
            let auditJSON = try await ServerTool.run(["audit", "--json"] + server.storage)
            let records = try #require(try JSONSerialization.jsonObject(with: Data(auditJSON.stdout.utf8)) as? [[String: Any]])
            Self.expectShownSafely(audit, lines: records.count, holding: ["account ana", "suite group.x", "from 127.0.0.1"])
            let record = try #require(records.last)
            #expect(
                record["account"] as? String == account && record["target"] as? String == "suite \(suite)" && record["source"] as? String == source
            )

            let accounts = try await ServerTool.run(["accounts", "list"] + server.storage)
            let accountsJSON = try await ServerTool.run(["accounts", "list", "--json"] + server.storage)
            let summaries = try #require(try JSONSerialization.jsonObject(with: Data(accountsJSON.stdout.utf8)) as? [[String: Any]])
            Self.expectShownSafely(accounts, lines: summaries.count, holding: ["ana", "group.x"])
            #expect(summaries.contains { $0["account"] as? String == account && $0["suites"] as? [String] == [suite] }, "\(accountsJSON)")

            let devices = try await ServerTool.run(["devices", "list", "--account", account] + server.storage)
            Self.expectShownSafely(devices, lines: 1, holding: ["phone", "group.x"])
            let devicesJSON = try await ServerTool.run(["devices", "list", "--account", account, "--json"] + server.storage)
            let infos = try JSONDecoder().decode([DeviceInfo].self, from: Data(devicesJSON.stdout.utf8))
            #expect(infos.map(\.name) == [device] && infos.map(\.suites) == [[suite]])

            let tokens = try await ServerTool.run(["token", "list"] + server.storage)
            Self.expectShownSafely(tokens, lines: 2, holding: ["ana", "group.x", "device phone"])

            // A device name with a line break: refused by token create, one line, nothing made.
            let refused = try await ServerTool.run(["token", "create"] + server.storage + ["--account", "bob", "--device", "evil\nphone"])
            Self.expectOneLineFailure(refused, "device name must not contain control characters")
            #expect(refused.stdout.isEmpty)
            // An error that echoes a name is one line too.
            let unknown = try await ServerTool.run(["accounts", "export", Self.hostile("nobody")] + server.storage)
            Self.expectOneLineFailure(unknown, "no account is named '" + Self.shown("nobody") + "'")

            // A pairing claim naming the device "evil\nphone": 400 malformed; the pairing stays
            // unclaimed and no token is made. The same claim with a plain name is taken.
            let pairingID = String(repeating: "ab", count: 16)
            let owner = server.client("group.pairing")
            _ = try await owner.createPairing(pairingID: pairingID)
            let anonymous = SyncClient(server: server.url, suite: "group.pairing", http: server.http) {
                throw SyncError(.authenticationNeeded, "none")
            }
            let key32 = Data(repeating: 7, count: 32).base64EncodedString()
            do {
                _ = try await anonymous.claimPairing(pairingID: pairingID, PairingClaim(publicKey: key32, proof: key32, deviceName: "evil\nphone"))
                Issue.record("a device name with a line break was accepted")
            } catch let error as SyncError {
                #expect(error.code == .malformed && error.detail.contains("control characters"), "\(error)")
            }
            #expect(try await owner.pairing(pairingID: pairingID).state == .waiting)
            #expect(try await ServerTool.tokenIDs(storage: server.storage).count == 2)
            _ = try await anonymous.claimPairing(pairingID: pairingID, PairingClaim(publicKey: key32, proof: key32, deviceName: "phone"))
            #expect(try await owner.pairing(pairingID: pairingID).state == .claimed)
        }
    }

    @Test(
        "groupdefaults-sync members, invitations, history and groupdefaults watch: an account, a device name, a key and a value with control characters, one line per record, escaped; --json exact; configure --device refuses one"
    )
    func syncAndCLIListings() async throws {
        try await SyncServer.with(.lmdb) { server in
            let account = Self.hostile("bob")
            let device = Self.hostile("tablet")
            let value = Self.hostile("value")
            // A new key holds no control character (`NameKind.key`); a value may, and a read may name one.
            let key = "key"
            let hostileKey = Self.hostile("key")
            // bob's account and device name, made before names were checked.
            let made = Tokens.make(account: account, suitePatterns: ["*"], readOnly: false, device: device, expires: nil)
            let store = try LMDBSyncStorage(directory: server.storage[1])
            do { try await store.createToken(made.stored) } catch {
                try? await store.shutdown()
                throw error
            }
            try await store.shutdown()

            let alice = ToolDevice("family")
            let bob = ToolDevice("home")
            defer {
                alice.remove()
                bob.remove()
            }
            try await alice.configure(server)
            try alice.open().set("ding.caf", forKey: "doorbell")
            try await expectOK(alice.sync("sync"))
            let shared = try await alice.sync("share", ["--role", "write"])
            #expect(shared.status == 0, "\(shared.stderr)")
            let code = try #require(shared.stdout.split(separator: "\n").first { $0.hasPrefix("code: ") }).dropFirst("code: ".count)
            let joined = try await bob.syncTool([
                "configure", "--invitation", String(code), "--server", server.url.absoluteString, "--token-file",
                try bob.tokenFile(made.token), "--as", "home",
            ])
            #expect(joined.status == 0, "\(joined.stderr)")
            try bob.open().set(value, forKey: "note")
            try await expectOK(bob.sync("sync"))

            // members: the owner's line, then each member and its devices, a line each.
            let membersJSON = try await alice.sync("members", ["--json"])
            let list = try JSONDecoder().decode(MemberList.self, from: Data(membersJSON.stdout.utf8))
            let bobs = try #require(list.members.first { $0.account == account }, "\(membersJSON.stdout)")
            #expect(bobs.devices?.map(\.name) == [device])
            let members = try await alice.sync("members")
            Self.expectShownSafely(members, lines: 1 + list.members.map { 1 + ($0.devices?.count ?? 0) }.reduce(0, +), holding: ["bob", "tablet"])

            let invitationsJSON = try await alice.sync("invitations", ["--json"])
            let invitations = try JSONDecoder().decode(InvitationList.self, from: Data(invitationsJSON.stdout.utf8)).invitations
            #expect(invitations.map(\.acceptedBy) == [account])
            Self.expectShownSafely(try await alice.sync("invitations"), lines: 1, holding: ["by bob"])

            try await expectOK(alice.sync("sync"))
            let historyJSON = try await alice.sync("history", ["note", "--json"])
            let history = try JSONDecoder().decode(KeyHistory.self, from: Data(historyJSON.stdout.utf8))
            #expect(history.versions.map(\.entry.value) == [.string(value)] && history.versions.map(\.entry.account) == [account])
            let historyText = try await alice.sync("history", ["note"])
            Self.expectShownSafely(historyText, lines: 1, holding: ["of account bob"])
            #expect(historyText.stdout.contains(#"{"string":"value\n2026-11-29T04:00:00Z\tadmin-remove"#), "\(historyText.stdout)")

            // watch: a value with control characters, one line each; JSON exact.
            #expect(throws: SharedDefaultsError.self) { try alice.open().write { try $0.set(.string(value), forKey: hostileKey) } }
            try alice.open().set(value, forKey: key)
            try alice.open().removeObject(forKey: key)
            let watched = try await alice.defaultsTool(["watch", "family", key, "note", "--since", "0", "--count", "3"])
            Self.expectShownSafely(watched, lines: 3, holding: ["value"])
            let watchedJSON = try await alice.defaultsTool(["watch", "family", key, "note", "--since", "0", "--count", "3", "--json"])
            let changes = try watchedJSON.stdout.split(separator: "\n").map {
                try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
            }
            #expect(changes.map { $0["key"] as? String } == ["note", key, key], "\(watchedJSON.stdout)")
            #expect(changes.map { $0["value"] as? String } == [value, value, nil])

            // Failures that echo a name or value are one line, escaped.
            let missing = try await alice.defaultsTool(["read", "family", hostileKey])
            Self.expectOneLineFailure(missing, "(family, " + Self.shown("key") + ") does not exist")
            let paired = ToolDevice("paired")
            defer { paired.remove() }
            let named = try await paired.sync(
                "configure",
                ["--server", server.url.absoluteString, "--pairing-code", "0000-0000", "--token-file", "/nonexistent/t", "--device", device]
            )
            Self.expectOneLineFailure(named, "device name must not contain control characters")
        }
    }
}
