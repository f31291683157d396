import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsWire
import TestSupport
import Testing

@testable import GroupDefaultsSync

/// The sharing commands stopped at each step (issue 47): `share`, `configure --invitation`,
/// `unshare` and `leave` are stopped at every step their interruption log lists
/// (`InterruptionPoint`), by SIGKILL (a crash) and SIGINT (a Ctrl-C), and the next run of the same
/// command (or the owner's next sync) completes or undoes what was begun. One encrypted suite of
/// alice's, shared with bob and carol, serves every case.
@Suite("Sharing commands stopped at each step", .timeLimit(.minutes(4)))
struct SharingInterruptionTests {
    @Test("share, configure --invitation, unshare and leave, stopped at each step, are completed or undone by the next run")
    func interruptedAtEachStep() async throws {
        try await SyncServer.with(.lmdb) { server in
            let alice = ToolDevice("family")
            let bob = ToolDevice("family")
            let carol = ToolDevice("family")
            let dave = ToolDevice("family")
            defer { for device in [alice, bob, carol, dave] { device.remove() } }
            try await RemovalRotationTests.ownEncrypted(alice, server)
            try await RemovalRotationTests.join(bob, "bob", alice, server)
            try await RemovalRotationTests.join(carol, "carol", alice, server)
            let owner = server.client("family")
            let log = alice.directory.appendingPathComponent("interruptions.log").path

            // share: the steps it reaches, then each of them stopped by each signal. Whatever was
            // left waiting is revoked: at once on SIGINT once it waits, by the next `invitations`
            // after a crash.
            let listed = try await Self.run(alice, ["share", "family", "--role", "write"], log: log, stopAt: "share.waiting@SIGINT")
            #expect(listed.status == 130, "\(listed.stderr)")
            #expect(listed.stderr.contains("interrupted: invitation inv_") && listed.stderr.contains("revoked"), "\(listed.stderr)")
            let steps = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
            #expect(steps == ["share.invitation-made", "share.waiting"])
            for step in steps {
                for signal in ["SIGKILL", "SIGINT"] {
                    let stopped = try await Self.run(alice, ["share", "family", "--role", "write"], stopAt: "\(step)@\(signal)")
                    #expect(stopped.status != 0, "\(step)@\(signal)")
                    let cleaned = try await alice.sync("invitations")
                    #expect(cleaned.status == 0, "\(cleaned.stderr)")
                    if signal == "SIGKILL" || step == "share.invitation-made" {
                        #expect(
                            cleaned.stdout.contains("revoked: its code adds nobody (left by a share command that stopped)"),
                            "\(step)@\(signal): \(cleaned.stdout)"
                        )
                    }
                    #expect(try await owner.invitations().invitations.allSatisfy { $0.state != .pending }, "\(step)@\(signal)")
                }
            }

            // configure --invitation stopped (Ctrl-C) while it waits for the keys: it leaves again.
            let daveToken = try await ServerTool.createToken(storage: server.storage, account: "dave")
            let share = try RunningProcess(ToolDevice.syncExecutable, ["share", "family", "--role", "write", "--directory", alice.directory.path])
            let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") })
            share.signal(SIGSTOP)  // the owner's `share` resumes only after the joiner gave up
            let joinArguments = [
                "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString,
                "--token-file", try dave.tokenFile(daveToken, name: "dave.token"), "--directory", dave.directory.path,
            ]
            let joined = try await Self.run(joinArguments, stopAt: "configure-invitation.accepted@SIGINT")
            #expect(joined.status == 130 && joined.stderr.contains("interrupted: this account left the suite again"), "\(joined.stderr)")
            // The same command again: the invitation ended, and it says so (not only "check the code").
            let rerun = try await Self.run(joinArguments, stopAt: nil)
            #expect(rerun.status == 1 && rerun.stderr.contains("the invitation has ended"), "\(rerun.stderr)")
            // The owner's `share`, resumed: the owner's words, not the member's remedy.
            share.signal(SIGCONT)
            let resumed = await share.finish()
            #expect(resumed.status == 1, "\(resumed.stderr)")
            #expect(
                resumed.stderr.contains("dave accepted the invitation") && resumed.stderr.contains("left the suite before its keys"),
                "\(resumed.stderr)"
            )
            #expect(!resumed.stderr.contains("ask its owner"), "\(resumed.stderr)")
            #expect(try await owner.members().members.map(\.account) == ["alice", "bob", "carol"])
            #expect(dave.keyFiles().isEmpty)
            // Killed after accepting while the owner's `share` cannot hand the keys over: `members`
            // names the member that holds none and the remedies; the same command again leaves.
            do {
                let share = try RunningProcess(
                    ToolDevice.syncExecutable,
                    ["share", "family", "--role", "write", "--directory", alice.directory.path]
                )
                let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") })
                share.signal(SIGSTOP)
                let arguments = [
                    "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString,
                    "--token-file", dave.directory.appendingPathComponent("dave.token").path, "--directory", dave.directory.path,
                ]
                #expect(try await Self.run(arguments, stopAt: "configure-invitation.accepted").status != 0)
                let members = try await alice.sync("members")
                #expect(members.stdout.contains("dave  write") && members.stdout.contains("holds no keys yet"), "\(members.stdout)")
                #expect(members.stdout.split(separator: "\n").filter { $0.hasSuffix("holds no keys yet") }.count == 1, "only dave: \(members.stdout)")
                #expect(members.stdout.contains("unshare family --account NAME"), "\(members.stdout)")
                let again = try await Self.run(arguments, stopAt: nil)
                #expect(again.status == 1 && again.stderr.contains("this account left the suite again"), "\(again.stderr)")
                #expect(!(try await alice.sync("members")).stdout.contains("no keys"))
                share.signal(SIGCONT)
                _ = await share.end(with: SIGKILL)
            }

            // Ctrl-C just as it sends its acceptance, and as the server's answer comes (as if the
            // answer were lost): no member without keys is left behind.
            for step in ["configure-invitation.accepting", "configure-invitation.answered"] {
                let (share, arguments) = try await Self.invite(dave, by: alice, server)
                let stopped = try await Self.run(arguments, stopAt: "\(step)@SIGINT")
                #expect(stopped.status == 130, "\(step): \(stopped.stderr)")
                #expect(try await owner.members().members.map(\.account) == ["alice", "bob", "carol"], "\(step): \(stopped.stderr)")
                _ = await share.end(with: SIGKILL)
            }

            // Killed after accepting, no keys yet: the same command again leaves the suite again.
            // Killed once the keys are written: the same command again finishes the join. Then the
            // same into the copy dave kept when he left (the local suite exists before the join).
            let joinSteps = [("configure-invitation.accepted", false), ("configure-invitation.keys-written", true)]
            for (index, (step, joins)) in (joinSteps + joinSteps).enumerated() {
                if index == joinSteps.count {
                    let left = try await dave.sync("leave")
                    #expect(left.status == 0, "\(left.stderr)")
                }
                let (share, arguments) = try await Self.invite(dave, by: alice, server)
                let killed = try await Self.run(arguments, stopAt: step)
                #expect(killed.status != 0, "\(step)")
                if joins {
                    let shared = await share.finish()
                    #expect(shared.status == 0, "\(step), \(index): \(killed.stderr) \(shared.stderr)")
                }
                let again = try await Self.run(arguments, stopAt: nil)
                if joins {
                    #expect(again.status == 0 && again.stdout.contains("alice's suite family, as a write member"), "\(index): \(again.stderr)")
                    try await expectOK(dave.sync("sync"))
                    #expect(try dave.open().string(forKey: "doorbell") == "ding.caf")
                } else {
                    #expect(again.status == 1 && again.stderr.contains("this account left the suite again"), "\(again.stderr)")
                    #expect(!again.stderr.contains("the server refused"), "the device's own words: \(again.stderr)")
                    #expect(try await owner.members().members.map(\.account) == ["alice", "bob", "carol"])
                    _ = await share.end(with: SIGKILL)
                }
            }

            // unshare stopped after the removal, before its rotation: the owner's next sync rotates.
            let unshared = try await Self.run(alice, ["unshare", "family", "--account", "carol"], stopAt: "unshare.removed")
            #expect(unshared.status != 0)
            #expect(try await owner.keyBags().rotationDue?.removed.contains("carol") == true)
            let synced = try await alice.sync("sync")
            #expect(synced.status == 0 && synced.stdout.contains("rotated family to key epoch 2"), "\(synced.stdout) \(synced.stderr)")
            #expect(try await owner.keyBags().rotationDue == nil)

            // leave stopped after the server's part: the next leave finishes the local part.
            let left = try await Self.run(bob, ["leave", "family"], stopAt: "leave.left")
            #expect(left.status != 0)
            let again = try await bob.sync("leave")
            #expect(again.status == 0 && again.stdout.contains("left alice's suite family"), "\(again.stdout) \(again.stderr)")
            try await expectOK(alice.sync("sync"))  // and the rotation its leaving made due
            #expect(try await owner.keyBags().rotationDue == nil)

            // Ctrl-C once the join is done (its suite set up): the join stands, and is reported.
            do {
                let share = try RunningProcess(
                    ToolDevice.syncExecutable,
                    ["share", "family", "--role", "write", "--directory", alice.directory.path]
                )
                let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") })
                let late = ToolDevice("family")
                defer { late.remove() }
                let erinToken = try await ServerTool.createToken(storage: server.storage, account: "erin")
                let arguments = [
                    "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString,
                    "--token-file", try late.tokenFile(erinToken, name: "erin.token"), "--directory", late.directory.path,
                ]
                let stopped = try await Self.run(arguments, stopAt: "configure-invitation.joined@SIGINT")
                #expect(stopped.status == 0 && stopped.stdout.contains("alice's suite family, as a write member"), "\(stopped.stderr)")
                #expect(await share.finish().status == 0)
                #expect(try await owner.members().members.map(\.account).contains("erin"))
                try await expectOK(late.sync("sync"))
                #expect(try late.open().string(forKey: "doorbell") == "ding.caf")
            }
        }
    }

    @Test("invitations leaves alone the invitation of a share still waiting in another process, and ends one whose share was killed")
    func runningShareIsLeftAlone() async throws {
        try await SyncServer.with(.lmdb) { server in
            let alice = ToolDevice("family")
            let bob = ToolDevice("family")
            defer { for device in [alice, bob] { device.remove() } }
            try await RemovalRotationTests.ownEncrypted(alice, server)
            let owner = server.client("family")
            let arguments = ["share", "family", "--role", "write", "--directory", alice.directory.path]

            // share waits in one process; invitations in another ends nothing, and the join completes.
            let share = try RunningProcess(ToolDevice.syncExecutable, arguments)
            defer { share.stop() }
            let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") })
            let listed = try await alice.sync("invitations")
            #expect(listed.status == 0 && listed.stdout.contains("pending") && !listed.stdout.contains("left by"), "\(listed.stdout)")
            #expect(try await owner.invitations().invitations.map(\.state) == [.pending])
            let bobToken = try await ServerTool.createToken(storage: server.storage, account: "bob")
            let joined = try await bob.syncTool(
                [
                    "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString,
                    "--token-file", try bob.tokenFile(bobToken, name: "bob.token"),
                ]
            )
            #expect(joined.status == 0, "\(joined.stderr)")
            #expect(await share.finish().status == 0)
            #expect(try await owner.members().members.map(\.account) == ["alice", "bob"])
            try await expectOK(bob.sync("sync"))
            #expect(try bob.open().string(forKey: "doorbell") == "ding.caf")

            // share killed while it waits: the next invitations revokes what it left.
            let killed = try RunningProcess(ToolDevice.syncExecutable, arguments)
            defer { killed.stop() }
            #expect(await killed.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") })
            #expect(await killed.end(with: SIGKILL)?.reason == .uncaughtSignal)
            let cleaned = try await alice.sync("invitations")
            #expect(cleaned.stdout.contains("revoked: its code adds nobody (left by a share command that stopped)"), "\(cleaned.stdout)")
            #expect(try await owner.invitations().invitations.allSatisfy { $0.state != .pending })
        }
    }

    @Test(
        "an invitation a killed share left, accepted by an account that left and joined again through a later one: ending it leaves that member alone"
    )
    func leftOverNeverRemovesAMemberWithKeys() async throws {
        try await SyncServer.with(.lmdb) { server in
            let alice = ToolDevice("family")
            let dave = ToolDevice("family")
            defer { for device in [alice, dave] { device.remove() } }
            try await RemovalRotationTests.ownEncrypted(alice, server)
            let owner = server.client("family")
            // share killed while it waits (its invitation left over); dave accepts that code and is
            // stopped while waiting for keys nobody hands over: it leaves again.
            let killed = try await Self.run(alice, ["share", "family", "--role", "write"], stopAt: "share.waiting@SIGKILL")
            let line = try #require(killed.stdout.split(separator: "\n").first { $0.hasPrefix("code: ") }, "\(killed)")
            let daveToken = try await ServerTool.createToken(storage: server.storage, account: "dave")
            let joined = try await Self.run(
                [
                    "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString,
                    "--token-file", try dave.tokenFile(daveToken, name: "dave.token"), "--directory", dave.directory.path,
                ],
                stopAt: "configure-invitation.accepted@SIGINT"
            )
            #expect(joined.status == 130, "\(joined.stderr)")
            // A second share and join: dave is a member with the keys.
            try await RemovalRotationTests.join(dave, "dave", alice, server)
            let listed = try await alice.sync("invitations")
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(!listed.stdout.contains("was removed again"), "\(listed.stdout)")
            #expect(try await owner.members().members.map(\.account) == ["alice", "dave"])
            try await expectOK(dave.sync("sync"))
            #expect(try dave.open().string(forKey: "doorbell") == "ding.caf")
        }
    }

    /// This process's environment, with `GROUPDEFAULTS_INTERRUPT_AT` (and the log) set.
    static func environment(stopAt: String?, log: String? = nil) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["GROUPDEFAULTS_INTERRUPT_AT"] = stopAt
        environment["GROUPDEFAULTS_INTERRUPT_LOG"] = log
        return environment
    }

    /// `groupdefaults-sync ARGUMENTS… --directory DIR` on `device`, stopped at `stopAt`.
    static func run(
        _ device: ToolDevice,
        _ arguments: [String],
        log: String? = nil,
        stopAt: String
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await run(arguments + ["--directory", device.directory.path], stopAt: stopAt, log: log)
    }

    /// `groupdefaults-sync ARGUMENTS…` stopped at `stopAt`, with SIGINT and SIGTERM unblocked (as
    /// in a terminal: a child inherits the mask of the thread that starts it, and a signal sent
    /// while blocked would wait until the command ignores it).
    /// `share family --role write` on `owner`, kept running, and the `configure --invitation`
    /// arguments that join with its code on `device` (its `dave.token`).
    static func invite(_ device: ToolDevice, by owner: ToolDevice, _ server: SyncServer) async throws -> (RunningProcess, [String]) {
        let share = try RunningProcess(ToolDevice.syncExecutable, ["share", "family", "--role", "write", "--directory", owner.directory.path])
        let line = try #require(await share.firstLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") })
        let arguments = [
            "configure", "--invitation", String(line.dropFirst("code: ".count)), "--server", server.url.absoluteString,
            "--token-file", device.directory.appendingPathComponent("dave.token").path, "--directory", device.directory.path,
        ]
        return (share, arguments)
    }

    static func run(_ arguments: [String], stopAt: String?, log: String? = nil) async throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try RunningProcess(
            ToolDevice.syncExecutable,
            arguments,
            environment: environment(stopAt: stopAt, log: log),
            terminationSignals: .unblocked
        )
        let result = await process.finish()
        return (result.status, String(decoding: result.stdoutData, as: UTF8.self), result.stderr)
    }
}
