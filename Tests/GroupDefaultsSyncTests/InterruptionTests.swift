import Foundation
import Glibc
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import TestSupport
import Testing

/// Multi-step commands stopped at every step they take (`InterruptionPoint`: the log lists the
/// steps of a whole run, then one run stops at each, by SIGKILL, and by SIGINT where the command
/// handles it), with the real tools and the real server: the next run of the same command finishes
/// or undoes what was begun, or the tools name the state and its remedy; no device is left without
/// the keys it needs, no pairing stays claimable, no rotation blocks the suite, and a Ctrl-C is one
/// line saying what was left.
@Suite("Interrupted pairing, rotation and reset", .timeLimit(.minutes(5)))
struct InterruptionTests {
    /// This process's environment with the interruption hook's variables.
    static func environment(log: String? = nil, at step: String? = nil) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["GROUPDEFAULTS_INTERRUPT_LOG"] = log
        environment["GROUPDEFAULTS_INTERRUPT_AT"] = step
        return environment
    }

    /// The steps a run logged, in order, and the log removed.
    static func steps(in log: String) -> [String] {
        defer { unlink(log) }
        return ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// `groupdefaults-sync VERB SUITE --directory DIR ARGUMENTS…` on `device`, with `environment`.
    static func run(
        _ device: ToolDevice,
        _ verb: String,
        _ arguments: [String] = [],
        _ environment: [String: String]
    ) async throws
        -> ProcessResult
    {
        let line = [verb, device.suite, "--directory", device.directory.path] + arguments
        return try await runProcess(ToolDevice.syncExecutable, line, environment: environment)
    }

    /// `step` as `GROUPDEFAULTS_INTERRUPT_AT` names it with `signal` (SIGKILL: the name alone).
    static func target(_ step: String, _ signal: Int32) -> String {
        signal == SIGKILL ? step : "\(step)@SIGINT"
    }

    /// Whether `result` is the end a stop at a step gives: killed, or one line and status 130. A
    /// Ctrl-C at a step where the command waits on nothing may come after its last step: then it
    /// finished (status 0), when `mayFinish`.
    static func expectStopped(
        _ result: ProcessResult,
        by signal: Int32,
        _ what: String,
        mayFinish: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        if signal == SIGKILL {
            #expect(result.reason == .uncaughtSignal && result.status == SIGKILL, "\(what): \(result)", sourceLocation: sourceLocation)
        } else if !(mayFinish && result.status == 0) {
            #expect(result.status == 130, "\(what): \(result)", sourceLocation: sourceLocation)
            #expect(
                result.stderr.hasPrefix("groupdefaults-sync: interrupted: ") && result.stderr.filter { $0 == "\n" }.count == 1,
                "\(what): one line says what was left: \(result.stderr)",
                sourceLocation: sourceLocation
            )
        }
    }

    // MARK: - Pairing

    /// `pair` on `device` in the background, the code it printed, and the lines before it.
    static func startPairing(_ device: ToolDevice, _ environment: [String: String]) async throws -> (RunningProcess, String, [String]) {
        let pair = try RunningProcess(
            ToolDevice.syncExecutable,
            ["pair", device.suite, "--directory", device.directory.path],
            environment: environment
        )
        var before: [String] = []
        var code: String?
        while let line = await pair.nextLine(timeout: .seconds(30)) {
            if line.hasPrefix("pairing code: ") {
                code = String(line.dropFirst("pairing code: ".count))
                break
            }
            before.append(line)
        }
        guard let code else {
            let result = try await Self.ended(pair)
            Issue.record("pair printed no code: \(result)")
            throw FixtureError("pair printed no code")
        }
        return (pair, code, before)
    }

    /// `process`'s end, waited for at most 30 seconds (then it is killed and the issue recorded).
    static func ended(_ process: RunningProcess, sourceLocation: SourceLocation = #_sourceLocation) async throws -> ProcessResult {
        let ended = await process.waitForEnd(timeout: .seconds(30))
        if !ended {
            process.signal(SIGKILL)
            Issue.record("still running after 30 seconds", sourceLocation: sourceLocation)
        }
        return await process.finish()
    }

    /// `configure --pairing-code CODE` on `device`, its token in `paired.token`.
    static func join(_ device: ToolDevice, _ server: SyncServer, _ code: String, _ environment: [String: String]) async throws -> ProcessResult {
        try await run(
            device,
            "configure",
            [
                "--server", server.url.absoluteString, "--pairing-code", code, "--token-file",
                device.directory.appendingPathComponent("paired.token").path,
            ],
            environment
        )
    }

    /// The device's pairing left nothing half done: no progress file, and it syncs and reads the value.
    static func expectPaired(_ device: ToolDevice, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let token = device.directory.appendingPathComponent("paired.token").path
        #expect(!FileManager.default.fileExists(atPath: token + ".pairing"), "the pairing's progress is gone", sourceLocation: sourceLocation)
        let synced = try await device.sync("sync")
        #expect(synced.status == 0, "\(synced.stderr)", sourceLocation: sourceLocation)
        let read = try await device.defaultsTool(["read", device.suite, "sound"])
        #expect(read.stdout == "ring.caf\n", "\(read)", sourceLocation: sourceLocation)
    }

    /// A device the failed pairing left as it was: no token, no keys, no progress, no suite.
    static func expectUntouched(_ device: ToolDevice, sourceLocation: SourceLocation = #_sourceLocation) {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: device.directory.path)) ?? []
        #expect(files.isEmpty, "nothing written: \(files)", sourceLocation: sourceLocation)
    }

    @Test(
        "pair and configure --pairing-code stopped at every step: the new device's next run finishes the pairing; a stopped pair cancels its pairing, at once on Ctrl-C, else at its next run",
        arguments: StorageBackend.allCases
    )
    func pairing(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.interrupt.pairing"
            let phone = ToolDevice(suite)
            var devices = [phone]
            defer { for device in devices { device.remove() } }
            let newDevice = {
                let device = ToolDevice(suite)
                devices.append(device)
                return device
            }
            let configured = try await phone.sync(
                "configure",
                ["--server", server.url.absoluteString, "--token-file", try phone.tokenFile(server.token), "--encrypt"]
            )
            #expect(configured.status == 0, "\(configured.stderr)")
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)
            let plain = Self.environment()
            // A token makes at most five pairings in ten minutes (done ones count): each round
            // pairs with a new token of the phone's.
            var round = 0
            let newToken = {
                round += 1
                let token = try await ServerTool.createToken(storage: server.storage)
                let file = try phone.tokenFile(token, name: "token-\(round)")
                let again = try await phone.sync("configure", ["--server", server.url.absoluteString, "--token-file", file])
                #expect(again.status == 0, "\(again.stderr)")
            }

            // The steps of a whole pairing, on each side.
            let pairLog = phone.directory.appendingPathComponent("pair.log").path
            let joinLog = phone.directory.appendingPathComponent("join.log").path
            let (whole, code, _) = try await Self.startPairing(phone, Self.environment(log: pairLog))
            let first = newDevice()
            #expect(try await Self.join(first, server, code, Self.environment(log: joinLog)).status == 0)
            #expect(try await Self.ended(whole).status == 0)
            try await Self.expectPaired(first)
            let pairSteps = Self.steps(in: pairLog)
            let joinSteps = Self.steps(in: joinLog)
            #expect(pairSteps == ["pair.created", "pair.claimed", "pair.handed-over"])
            #expect(
                joinSteps == [
                    "configure-pairing.claimed", "configure-pairing.keys-received", "configure-pairing.token-written",
                    "configure-pairing.keys-written",
                ]
            )

            // The new device stopped at each step: `pair` hands the keys over all the same, and the
            // same command, run again with the same code, finishes the pairing.
            for step in joinSteps {
                for signal in [SIGKILL, SIGINT] {
                    try await newToken()
                    let device = newDevice()
                    let (pair, code, _) = try await Self.startPairing(phone, plain)
                    let stopped = try await Self.join(device, server, code, Self.environment(at: Self.target(step, signal)))
                    Self.expectStopped(stopped, by: signal, "configure stopped at \(step)", mayFinish: step != "configure-pairing.claimed")
                    #expect(try await Self.ended(pair).status == 0, "pair hands the keys over to the claim")
                    if stopped.status != 0, !stopped.stderr.contains("the pairing had finished") {
                        #expect(signal == SIGKILL || stopped.stderr.contains("run this same command again"), "\(stopped.stderr)")
                        let again = try await Self.join(device, server, code, plain)
                        #expect(again.status == 0, "after \(step) (\(signal)): \(again.stderr)")
                    }
                    try await Self.expectPaired(device)
                }
            }

            // `pair` stopped at each step: a Ctrl-C cancels the pairing at once, a crash leaves it
            // to the next `pair`, which cancels it first; the new device waiting on it then stops,
            // writing nothing, and a new code pairs it.
            for step in pairSteps {
                for signal in [SIGKILL, SIGINT] {
                    try await newToken()
                    let device = newDevice()
                    let (pair, code, _) = try await Self.startPairing(phone, Self.environment(at: Self.target(step, signal)))
                    let joining = step == "pair.created" ? nil : Task { try await Self.join(device, server, code, plain) }
                    let stopped = try await Self.ended(pair)
                    Self.expectStopped(stopped, by: signal, "pair stopped at \(step)", mayFinish: step == "pair.handed-over")
                    if signal == SIGINT, step != "pair.handed-over" {
                        #expect(stopped.stderr.contains("the pairing was cancelled"), "\(stopped.stderr)")
                    }
                    // The next run cancels what a crash left waiting (not a pairing that is done).
                    let (next, fresh, before) = try await Self.startPairing(phone, plain)
                    #expect(
                        before.contains { $0.hasPrefix("cancelled the pairing an interrupted pair left") }
                            == (signal == SIGKILL && step != "pair.handed-over"),
                        "\(step) \(signal): \(before)"
                    )
                    if step == "pair.handed-over" {
                        #expect(try await joining?.value.status == 0)
                        try await Self.expectPaired(device)
                        // A Ctrl-C while it waits cancels it, in one line.
                        next.signal(SIGINT)
                        let cancelled = try await Self.ended(next)
                        #expect(
                            cancelled.status == 130
                                && cancelled.stderr
                                    == "groupdefaults-sync: interrupted: the pairing was cancelled: its code pairs no device; run `groupdefaults-sync pair --directory \(phone.directory.path) \(suite)` again for a new one\n",
                            "\(cancelled)"
                        )
                        continue
                    }
                    let refused = if let joining { try await joining.value } else { try await Self.join(device, server, code, plain) }
                    #expect(refused.status == 1, "the stopped pairing's code pairs nothing (\(step), \(signal)): \(refused)")
                    #expect(refused.stderr.contains("cancelled"), "it says the pairing ended, not only that the code is unknown: \(refused.stderr)")
                    Self.expectUntouched(device)
                    #expect(try await Self.join(device, server, fresh, plain).status == 0)
                    #expect(try await Self.ended(next).status == 0)
                    try await Self.expectPaired(device)
                }
            }
        }
    }

    // MARK: - Rotation

    @Test(
        "rotate-key killed at every step: from its signed bag on, the next sync finishes the rotation (every entry under the new epoch); the next rotate-key is one of its own; the recovery key opens them all",
        arguments: StorageBackend.allCases
    )
    func rotation(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let suite = "group.interrupt.rotation"
            let phone = ToolDevice(suite)
            let recovered = ToolDevice(suite)
            defer {
                phone.remove()
                recovered.remove()
            }
            let recovery = try await phone.configureEncrypted(server)
            #expect(try await phone.defaultsTool(["write", suite, "sound", "ring.caf"]).status == 0)
            #expect(try await phone.sync("sync").status == 0)

            let log = phone.directory.appendingPathComponent("rotate.log").path
            let whole = try await Self.run(phone, "rotate-key", [], Self.environment(log: log))
            #expect(whole.status == 0, "\(whole)")
            let steps = Self.steps(in: log)
            #expect(
                steps == [
                    "rotate-key.synced", "rotate-key.bag-signed", "rotate-key.bag-stored", "rotate-key.pulled", "rotate-key.resealed",
                    "rotate-key.keys-written",
                ]
            )

            var written = ["sound": "ring.caf"]
            for step in steps {
                // A change pending when it starts (the rotation syncs it first).
                written[step] = "before \(step)"
                #expect(try await phone.defaultsTool(["write", suite, step, "before \(step)"]).status == 0)
                let before = try await server.client(suite).keyBags().newestEpoch
                let stopped = try await Self.run(phone, "rotate-key", [], Self.environment(at: step))
                Self.expectStopped(stopped, by: SIGKILL, "rotate-key stopped at \(step)")
                // From the signed bag on, the key file holds the new epoch: the next sync finishes
                // the rotation (says so, and leaves nothing under the retired epoch).
                let synced = try await phone.sync("sync")
                #expect(synced.status == 0, "after \(step): \(synced.stderr)")
                // Stopped at its last step, the rotation was done already.
                let finishes = !["rotate-key.synced", "rotate-key.keys-written"].contains(step)
                #expect(synced.stdout.contains("finished rotating") == finishes, "after \(step): \(synced.stdout)")
                if finishes {
                    let epochs = Set(try await server.snapshot(suite).entries.values.compactMap { $0.sealed?.epoch })
                    #expect(epochs == [before + 1], "after \(step), the sync sealed everything again: \(epochs)")
                }
                let again = try await phone.sync("rotate-key")
                #expect(again.status == 0, "the next rotate-key finishes after \(step): \(again.stderr)")
                #expect(try await phone.sync("sync").status == 0)
                let newest = try await server.client(suite).keyBags().newestEpoch
                // Once the stopped rotation is finished, the next run is a rotation of its own.
                let finished = step != "rotate-key.synced"
                #expect(newest == before + (finished ? 2 : 1), "after \(step): epoch \(before) to \(newest)")
                let epochs = Set(try await server.snapshot(suite).entries.values.compactMap { $0.sealed?.epoch })
                #expect(epochs == [newest], "after \(step): every entry under epoch \(newest), not \(epochs)")
            }

            // Nothing is lost or left under a key only the interrupted runs knew.
            let fromRecovery = try await recovered.sync(
                "configure",
                [
                    "--server", server.url.absoluteString, "--token-file", try recovered.tokenFile(server.token), "--recovery-key",
                    String(recovery),
                ]
            )
            #expect(fromRecovery.status == 0, "\(fromRecovery.stderr)")
            #expect(try await recovered.sync("sync").status == 0)
            for (key, value) in written {
                #expect(try recovered.open().string(forKey: key) == value, "\(key)")
            }
        }
    }

    // MARK: - Suite reset

    @Test(
        "suites reset killed after its transaction: the audit log names the reset, devices join again with everything they hold, and running it again completes (plain and --keys)",
        arguments: StorageBackend.allCases
    )
    func reset(backend: StorageBackend) async throws {
        try await SyncServer.with(backend) { server in
            let plain = ToolDevice("group.interrupt.plain")
            let sealed = ToolDevice("group.interrupt.sealed")
            defer {
                plain.remove()
                sealed.remove()
            }
            for (device, encrypted) in [(plain, false), (sealed, true)] {
                let configured = try await device.sync(
                    "configure",
                    ["--server", server.url.absoluteString, "--token-file", try device.tokenFile(server.token)] + (encrypted ? ["--encrypt"] : [])
                )
                #expect(configured.status == 0, "\(configured.stderr)")
                #expect(try await device.defaultsTool(["write", device.suite, "sound", "ring.caf"]).status == 0)
                #expect(try await device.defaultsTool(["write", device.suite, "volume", "-int", "7"]).status == 0)
                #expect(try await device.sync("sync").status == 0)
            }
            let serverTool = BuiltExecutable.url("groupdefaults-server")
            let resets = { (suite: String) async throws -> Int in
                let audit = try await ServerTool.run(["audit"] + server.storage)
                return audit.stdout.split(separator: "\n").filter { $0.contains("\tsuite-reset\t") && $0.contains("suite \(suite)") }.count
            }
            for (device, keys) in [(plain, false), (sealed, true)] {
                let suite = device.suite
                let command = ["suites", "reset", "--account", "alice", "--suite", suite, "--yes"] + (keys ? ["--keys"] : []) + server.storage
                let log = device.directory.appendingPathComponent("reset.log").path
                let logged = try await runProcess(serverTool, command, environment: Self.environment(log: log))
                #expect(logged.status == 0, "\(logged)")
                #expect(Self.steps(in: log) == ["suites-reset.reset"])
                #expect(try await device.sync("sync").status == 0)
                #expect(try await resets(suite) == 1)

                let stopped = try await runProcess(serverTool, command, environment: Self.environment(at: "suites-reset.reset"))
                #expect(stopped.reason == .uncaughtSignal, "\(stopped)")
                #expect(try await resets(suite) == 2, "the reset and its audit record are one transaction")
                #expect(try await server.snapshot(suite).entries.isEmpty)
                // The device joins again with what it holds.
                #expect(try await device.sync("sync").status == 0)
                #expect(try await server.snapshot(suite).entries.count == 2)
                // Running it again completes it.
                let again = try await ServerTool.run(command)
                #expect(again.status == 0 && again.stdout.contains("reset (2 keys deleted"), "\(again)")
                #expect(try await resets(suite) == 3)
                #expect(try await device.sync("sync").status == 0)
                #expect(try await server.snapshot(suite).entries.count == 2)
                #expect(try device.open().string(forKey: "sound") == "ring.caf")
            }
        }
    }
}
