import Foundation
import Glibc
import GroupDefaultsWire
import TestSupport
import Testing

/// The server's commands as a newcomer meets them: where they find their store, how they fail at
/// start, and what the three tools share (`--version`, one-line errors with exit status 1, the
/// nearest option for a mistyped one, help with examples and no stray backslashes).
@Suite("Server commands and the tools' shared conventions")
struct ServerCommandLineTests {
    /// `groupdefaults-server ARGUMENTS…` with exactly `environment` (nothing of this process's,
    /// but PATH and HOME, so that no GROUPDEFAULTS_SERVER_ variable leaks in).
    private func server(
        _ arguments: [String],
        environment: [String: String] = [:]
    ) async throws
        -> (status: Int32, stdout: String, stderr: String)
    {
        let result = try await timedServer(arguments, environment: environment)
        return (result.status, result.stdout, result.stderr)
    }

    /// As `server`, with the time from the process's start to its end (`ProcessResult.elapsed`).
    private func timedServer(_ arguments: [String], environment: [String: String] = [:]) async throws -> ProcessResult {
        let base = ProcessInfo.processInfo.environment.filter { ["PATH", "HOME"].contains($0.key) }
        return try await runProcess(ServerTool.executable, arguments, environment: base.merging(environment) { $1 })
    }

    // MARK: B. Start-up errors

    @Test("a refused PostgreSQL connection is one line at once, and nothing else on stderr")
    func postgresRefused() async throws {
        // A connect timeout of a minute: a refusal answered at once is far within it.
        let result = try await timedServer([
            "serve", "--postgres-url", "postgres://u@127.0.0.1:1/db", "--port", "0",
            "--postgres-connect-timeout", "60",
        ])
        #expect(result.status == 1)
        #expect(result.stderr == "groupdefaults-server: cannot reach PostgreSQL at 127.0.0.1:1: connection refused\n")
        #expect(result.stdout.isEmpty)
        #expect(result.elapsed < .seconds(20), "took \(result.elapsed)")
        // The storage commands say the same.
        let token = try await server(["token", "list", "--postgres-url", "postgres://u@127.0.0.1:1/db"])
        #expect(token.status == 1)
        #expect(token.stderr == "groupdefaults-server: cannot reach PostgreSQL at 127.0.0.1:1: connection refused\n")
    }

    @Test("a database that accepts the connection and never answers is one line after the connect timeout")
    func postgresSilent() async throws {
        let silent = try SilentListener()
        // 3 s instead of the default 10 s, to keep the test short.
        let result = try await timedServer([
            "serve", "--postgres-url", "postgres://u@127.0.0.1:\(silent.port)/db", "--port", "0",
            "--postgres-connect-timeout", "3",
        ])
        #expect(result.status == 1)
        #expect(
            result.stderr
                == "groupdefaults-server: cannot reach PostgreSQL at 127.0.0.1:\(silent.port): no answer within 3 seconds (the connect timeout)\n"
        )
        #expect(result.elapsed >= .seconds(3) && result.elapsed < .seconds(20), "took \(result.elapsed)")
    }

    @Test("check-config refuses, as serve would, a port in use, a host that is not this machine's and an empty data directory")
    func checkConfigRefusesWhatServeWould() async throws {
        let directory = ServerTool.temporaryDirectory("gds-check")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let running = try await ServerProcess(dataDirectory: directory)
        let taken = try await server(["check-config", "--data-dir", directory + "/other", "--port", String(running.port)])
        #expect(taken.status == 1 && taken.stdout.isEmpty, "\(taken)")
        #expect(
            taken.stderr == "groupdefaults-server: cannot listen on 127.0.0.1:\(running.port): the address is already in use\n",
            "\(taken.stderr)"
        )
        await running.stop()
        let freed = try await server(["check-config", "--data-dir", directory + "/other", "--port", String(running.port)])
        #expect(freed.status == 0 && freed.stdout.hasSuffix("ok: serve would listen on http://127.0.0.1:\(running.port)\n"), "\(freed)")
        let foreign = try await server(["check-config", "--data-dir", directory, "--port", "0", "--host", "192.0.2.1"])
        #expect(
            foreign.status == 1 && foreign.stderr.contains("cannot listen on 192.0.2.1:0: the address is not one of this machine's"),
            "\(foreign)"
        )
        for verb in ["check-config", "serve"] {
            let empty = try await server([verb, "--port", "0"], environment: ["GROUPDEFAULTS_SERVER_DATA_DIR": ""])
            #expect(
                empty.status == 1 && empty.stderr.contains("the data directory is empty (environment: GROUPDEFAULTS_SERVER_DATA_DIR)"),
                "\(verb): \(empty)"
            )
            let flag = try await server([verb, "--port", "0", "--data-dir", ""])
            #expect(flag.status == 1 && flag.stderr.contains("the data directory is empty (--data-dir)"), "\(verb): \(flag)")
        }
    }

    @Test("a port out of range is refused in one line, by serve and check-config (99999 once listened on 34463); the sync tool's --server too")
    func portOutOfRange() async throws {
        let directory = ServerTool.temporaryDirectory("gds-range")
        for verb in ["serve", "check-config"] {
            let result = try await server([verb, "--data-dir", directory, "--port", "99999"])
            #expect(result.status == 1, "\(verb): \(result)")
            #expect(result.stderr.hasPrefix("groupdefaults-server: --port must be 0 to 65535 (0 picks a free one), not 99999"), "\(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1 && result.stdout.isEmpty, "\(result)")
        }
        let sync = try await BuiltExecutable.run(
            BuiltExecutable.url("groupdefaults-sync"),
            ["configure", "--directory", directory, "group.range", "--server", "http://127.0.0.1:99999", "--token-file", directory + "/t"]
        )
        #expect(sync.status == 1)
        #expect(sync.stderr == "groupdefaults-sync: --server names the port 99999: a port is 1 to 65535\n", "\(sync)")
    }

    @Test(
        "HTTPS from a settings file or the environment; files that do not load, or a key of another certificate, refused by check-config as by serve"
    )
    func tlsSettings() async throws {
        let directory = ServerTool.temporaryDirectory("gds-tls-settings")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func certificate(_ name: String) async throws -> (certificate: String, key: String) {
            let (certificate, key) = (directory + "/\(name).pem", directory + "/\(name).key")
            let made = try await BuiltExecutable.run(
                URL(fileURLWithPath: "/usr/bin/openssl"),
                ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", certificate, "-days", "1", "-subj", "/CN=127.0.0.1"]
            )
            #expect(made.status == 0, "\(made.stderr)")
            return (certificate, key)
        }
        let one = try await certificate("one")
        let other = try await certificate("other")
        // A file as the packaged one reads, with CRLF line ends and a ';' comment (systemd reads both).
        let config = directory + "/tls.conf"
        try
            "; HTTPS\r\nGROUPDEFAULTS_SERVER_TLS_CERT=\(one.certificate)\r\nGROUPDEFAULTS_SERVER_TLS_KEY=\(one.key)\r\nGROUPDEFAULTS_SERVER_DATA_DIR=\(directory)/data\r\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        let checked = try await server(["check-config", "--config", config, "--port", "0"])
        #expect(checked.status == 0, "\(checked.stderr)")
        #expect(checked.stdout.hasSuffix("ok: serve would listen on https://127.0.0.1:0\n"), "\(checked.stdout)")
        let fromEnvironment = try await server(
            ["check-config", "--data-dir", directory + "/data", "--port", "0"],
            environment: ["GROUPDEFAULTS_SERVER_TLS_CERT": one.certificate, "GROUPDEFAULTS_SERVER_TLS_KEY": one.key]
        )
        #expect(fromEnvironment.status == 0 && fromEnvironment.stdout.contains("https://"), "\(fromEnvironment)")

        let mismatched = try await server(["check-config", "--data-dir", directory + "/data", "--tls-cert", one.certificate, "--tls-key", other.key])
        #expect(mismatched.status == 1)
        #expect(
            mismatched.stderr == "groupdefaults-server: the TLS key \(other.key) does not belong to the certificate \(one.certificate)\n",
            "\(mismatched)"
        )
        let served = try await server([
            "serve", "--data-dir", directory + "/data", "--port", "0", "--tls-cert", one.certificate, "--tls-key", other.key,
        ])
        #expect(served.status == 1 && served.stderr == mismatched.stderr, "\(served)")
        let junk = directory + "/junk.pem"
        try "not a certificate\n".write(toFile: junk, atomically: true, encoding: .utf8)
        let notPEM = try await server(["check-config", "--data-dir", directory + "/data", "--tls-cert", junk, "--tls-key", one.key])
        #expect(
            notPEM.status == 1 && notPEM.stderr == "groupdefaults-server: the TLS certificate \(junk) is not a PEM certificate (chain)\n",
            "\(notPEM)"
        )

        // The environment's storage wins over the file's other one, as any environment setting.
        let postgresOverFile = try await server(
            ["check-config", "--config", config, "--port", "0"],
            environment: ["GROUPDEFAULTS_SERVER_POSTGRES_URL": "postgres://u@127.0.0.1:1/db"]
        )
        #expect(postgresOverFile.status == 0, "\(postgresOverFile)")
        #expect(postgresOverFile.stdout.contains("postgres-url = postgres://u@127.0.0.1:1/db  (environment)"), "\(postgresOverFile.stdout)")
    }

    @Test("a port in use is one line naming the address and the cause, exit 1")
    func portInUse() async throws {
        let taken = try SilentListener()
        let result = try await timedServer(["serve", "--data-dir", ServerTool.temporaryDirectory("gds-port"), "--port", "\(taken.port)"])
        #expect(result.status == 1)
        #expect(result.stderr == "groupdefaults-server: cannot listen on 127.0.0.1:\(taken.port): the address is already in use\n")
        #expect(result.stdout.isEmpty)
        #expect(result.elapsed < .seconds(20), "took \(result.elapsed)")
        // An address that is not this machine's, a host name that does not resolve.
        let directory = ServerTool.temporaryDirectory("gds-host")
        let foreign = try await server(["serve", "--data-dir", directory, "--host", "192.0.2.1", "--port", "0"])
        #expect(foreign.status == 1)
        #expect(foreign.stderr == "groupdefaults-server: cannot listen on 192.0.2.1:0: the address is not one of this machine's\n")
        let unknown = try await server(["serve", "--data-dir", directory, "--host", "nowhere.invalid", "--port", "0"])
        #expect(unknown.status == 1)
        #expect(unknown.stderr == "groupdefaults-server: cannot listen on nowhere.invalid:0: the host name nowhere.invalid cannot be resolved\n")
    }

    @Test("a TLS file or data directory that cannot be used is one sentence naming it")
    func unusableFiles() async throws {
        let root = ServerTool.temporaryDirectory("gds-files")
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let junk = root + "/junk.pem"
        let missing = root + "/missing.pem"
        try "not a certificate\n".write(toFile: junk, atomically: true, encoding: .utf8)
        let data = ["--data-dir", root + "/data", "--port", "0"]
        let absent = try await server(["serve"] + data + ["--tls-cert", missing, "--tls-key", junk])
        #expect(absent.status == 1)
        #expect(absent.stderr == "groupdefaults-server: cannot read the TLS certificate \(missing): no such file\n")
        let notPEM = try await server(["serve"] + data + ["--tls-cert", junk, "--tls-key", junk])
        #expect(notPEM.stderr == "groupdefaults-server: the TLS certificate \(junk) is not a PEM certificate (chain)\n")
        // A data directory under a file.
        let underFile = try await server(["serve", "--data-dir", junk + "/data", "--port", "0"])
        #expect(underFile.status == 1)
        #expect(underFile.stderr == "groupdefaults-server: cannot create the data directory \(junk)/data: not a directory\n")
    }

    // MARK: A. One settings model

    @Test("every storage command reads --config and the environment as serve does")
    func storageCommandsReadSettings() async throws {
        let directory = ServerTool.temporaryDirectory("gds-settings")
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("gds-\(UUID().uuidString).conf").path
        try "# the server's settings\nGROUPDEFAULTS_SERVER_DATA_DIR=\(directory)\nGROUPDEFAULTS_SERVER_PORT=8099\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: config) }

        // The file: the token goes where the file says.
        let made = try await server(["token", "create", "--create", "--config", config, "--account", "ana"])
        #expect(made.status == 0, "\(made.stderr)")
        let token = made.stdout.split(separator: "\n")
        #expect(token.count == 1 && token[0].hasPrefix("gdt_"))
        // Its id, which `token revoke` takes, on stderr.
        let id = try #require(made.stderr.split(separator: " ").dropFirst().first.map(String.init))
        #expect(made.stderr == "token \(id) for account ana (revoke it with `groupdefaults-server token revoke --config \(config) \(id)`)\n")

        // The environment: the same store, found by every command.
        let environment = ["GROUPDEFAULTS_SERVER_DATA_DIR": directory]
        let listed = try await server(["token", "list"], environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(listed.stdout.hasPrefix(id + "\tana\t"))
        let devices = try await server(["devices", "list", "--account", "ana"], environment: environment)
        #expect(devices.stdout == "account ana: no devices seen\n", "\(devices.stderr)")
        let admins = try await server(["admin", "list"], environment: environment)
        #expect(admins.status == 0 && admins.stdout.isEmpty, "\(admins.stderr)")
        let reset = try await server(["suites", "reset", "--account", "ana", "--suite", "group.a"], environment: environment)
        #expect(reset.stderr.contains("account ana has no suite group.a in this store"), "\(reset.stderr)")
        #expect(try await server(["token", "revoke", id, "--config", config]).status == 0)

        // A flag wins over both.
        let elsewhere = ServerTool.temporaryDirectory("gds-settings-flag")
        let flagged = try await server(["token", "list", "--data-dir", elsewhere], environment: environment)
        #expect(flagged.status == 1)
        #expect(flagged.stderr.contains(elsewhere))
    }

    @Test("a data directory without a store is refused in one line, and nothing is created")
    func missingStoreRefused() async throws {
        let mistyped = ServerTool.temporaryDirectory("gds-servre")
        // The command it names repeats the --data-dir given: pasted as is, it makes the store there.
        let expected =
            "groupdefaults-server: no server store in \(mistyped) (is --data-dir right?): `groupdefaults-server serve --data-dir \(mistyped)` "
            + "creates one there, as --create does on token create and admin create\n"
        for command in [
            ["token", "list"], ["token", "create", "--account", "ana"], ["token", "revoke", "tok_000000000000"],
            ["devices", "list", "--account", "ana"], ["devices", "revoke", "dev_000000000000"], ["admin", "list"],
            ["admin", "remove", "--name", "ops"], ["suites", "reset", "--account", "ana", "--suite", "s"],
            ["suites", "repair-clock", "--account", "ana", "--suite", "s"], ["accounts", "list"], ["accounts", "export", "ana"],
            ["accounts", "delete", "ana", "--yes"], ["audit"],
        ] {
            let result = try await server(command + ["--data-dir", mistyped])
            #expect(result.status == 1, "\(command)")
            #expect(result.stderr == expected, "\(command)")
            #expect(result.stdout.isEmpty, "\(command)")
            #expect(!FileManager.default.fileExists(atPath: mistyped), "\(command) made \(mistyped)")
        }
        // The same from the environment, named as it was given.
        let fromEnvironment = try await server(["token", "list"], environment: ["GROUPDEFAULTS_SERVER_DATA_DIR": mistyped])
        #expect(
            fromEnvironment.stderr
                == expected.replacingOccurrences(of: "is --data-dir right?", with: "is GROUPDEFAULTS_SERVER_DATA_DIR right?")
                .replacingOccurrences(of: "serve --data-dir \(mistyped)`", with: "serve`")
        )
    }

    @Test("admin verbs name the operator with --name (remove still takes it alone)")
    func adminName() async throws {
        let directory = ServerTool.temporaryDirectory("gds-admin")
        for name in ["ops", "ana"] {
            let made = try await runProcess(
                ServerTool.executable,
                ["admin", "create", "--create", "--name", name, "--data-dir", directory],
                stdin: Data("correct horse\n".utf8)
            )
            #expect(made.status == 0, "\(made.stderr)")
        }
        #expect(try await server(["admin", "remove", "--name", "ops", "--data-dir", directory]).stdout == "removed operator ops\n")
        #expect(try await server(["admin", "remove", "ana", "--data-dir", directory]).stdout == "removed operator ana\n")
        #expect(try await server(["admin", "list", "--data-dir", directory]).stdout.isEmpty)
        // Each is audited as the command line's act, without the password.
        let audit = try await server(["audit", "--data-dir", directory])
        let acts = audit.stdout.split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        #expect(
            acts.map { $0.count > 2 ? [$0[1], $0[3]] : [] } == [
                ["admin-create", "operator ops"], ["admin-create", "operator ana"], ["admin-remove", "operator ops"],
                ["admin-remove", "operator ana"],
            ],
            "\(audit)"
        )
        #expect(!audit.stdout.contains("correct horse"))
        let store = try Data(contentsOf: URL(fileURLWithPath: directory + "/sync.lmdb"))
        #expect(store.range(of: Data("correct horse".utf8)) == nil)
        let neither = try await server(["admin", "remove", "--data-dir", directory])
        #expect(neither.status == 1)
        #expect(neither.stderr.hasPrefix("groupdefaults-server: Missing expected argument '--name <name>'"))
    }

    // MARK: C. Three tools that feel like one

    @Test("--version prints the package's version on every tool", arguments: ["groupdefaults", "groupdefaults-server", "groupdefaults-sync"])
    func version(tool: String) async throws {
        let result = try await BuiltExecutable.run(BuiltExecutable.url(tool), ["--version"])
        #expect(result.status == 0)
        #expect(result.stdout == packageVersion + "\n")
    }

    @Test("a mistyped option is named with the nearest one, whatever else is missing; exit 1")
    func mistypedOption() async throws {
        let server = try await server(["token", "create", "--acount", "ana", "--data-dir", "/nonexistent"])
        #expect(server.status == 1)
        #expect(server.stderr == "groupdefaults-server: unknown option '--acount'; did you mean '--account'?\n")
        let serve = try await self.server(["serve", "--prot", "0"])
        #expect(serve.stderr == "groupdefaults-server: unknown option '--prot'; did you mean '--port'?\n")
        let nothingNear = try await self.server(["token", "list", "--zzzzzz"])
        #expect(nothingNear.stderr == "groupdefaults-server: unknown option '--zzzzzz'; see `groupdefaults-server help`\n")
        // A mistyped command, too.
        let command = try await self.server(["token", "crate", "--account", "ana"])
        #expect(command.status == 1)
        #expect(command.stderr == "groupdefaults-server: unknown command 'crate'; did you mean 'create'?\n")
        let group = try await self.server(["tokn", "list"])
        #expect(group.stderr == "groupdefaults-server: unknown command 'tokn'; did you mean 'token'?\n")
        let verb = try await BuiltExecutable.run(BuiltExecutable.url("groupdefaults"), ["reed", "group.a"])
        #expect(verb.stderr == "groupdefaults: unknown command 'reed'; did you mean 'read'?\n")
        let cli = try await BuiltExecutable.run(BuiltExecutable.url("groupdefaults"), ["read", "--directry", "/tmp"])
        #expect(cli.status == 1)
        #expect(cli.stderr.hasPrefix("groupdefaults: unknown option '--directry'; did you mean '--directory'?"), "\(cli.stderr)")
        #expect(cli.stderr.split(separator: "\n").count == 1)
        // A command none is close to: the commands there are (it was an option of another command).
        let far = try await self.server(["admin", "delete", "--name", "ops"])
        #expect(far.status == 1)
        #expect(
            far.stderr == "groupdefaults-server: unknown command 'delete' (the commands: create, list, remove); see `groupdefaults-server help`\n"
        )
        // A negative number was "Missing value for '--tombstone-days'": it is named as what it is,
        // in every tool.
        for (tool, arguments) in [
            ("groupdefaults-server", ["serve", "--tombstone-days", "-1", "--data-dir", "/nonexistent"]),
            ("groupdefaults-server", ["audit", "--since", "-5m", "--data-dir", "/nonexistent"]),
            ("groupdefaults-server", ["serve", "--postgres-connect-timeout", "-1"]),
            ("groupdefaults-sync", ["configure", "group.a", "--server", "http://127.0.0.1:1", "--token-file", "t", "--journal-entries", "-5"]),
        ] {
            let negative = try await BuiltExecutable.run(BuiltExecutable.url(tool), arguments)
            let at = arguments.firstIndex { $0.hasPrefix("-") && $0.dropFirst().first?.isNumber == true }!
            #expect(negative.status == 1, "\(arguments): \(negative.stderr)")
            #expect(
                negative.stderr.hasPrefix("\(tool): \(arguments[at - 1]) \(arguments[at]): a negative number is not accepted here"),
                "\(negative.stderr)"
            )
            #expect(negative.stderr.split(separator: "\n").count == 1)
        }
        // A conflict journal that keeps nothing would lose a replaced value without a trace.
        for option in ["--journal-entries", "--journal-days"] {
            let none = try await BuiltExecutable.run(
                BuiltExecutable.url("groupdefaults-sync"),
                ["configure", "group.a", "--server", "http://127.0.0.1:1", "--token-file", "t", option, "0"]
            )
            #expect(none.status == 1 && none.stderr.contains("\(option) must be 1 or more"), "\(none.stderr)")
        }
        // A value not among the choices: the choices, on the same line.
        let choice = try await self.server(["check-config", "--log-level", "verbose"])
        #expect(
            choice.stderr.hasSuffix("one of the following: trace, debug, info, notice, warning, error, critical; see `groupdefaults-server help`\n"),
            "\(choice.stderr)"
        )
        // The sync tool: `--sever` was answered "Missing expected argument '--server <URL>'".
        let sync = try await BuiltExecutable.run(
            BuiltExecutable.url("groupdefaults-sync"),
            ["configure", "group.a", "--sever", "http://127.0.0.1:1", "--token-file", "t"]
        )
        #expect(sync.status == 1)
        #expect(sync.stderr == "groupdefaults-sync: unknown option '--sever'; did you mean '--server'?\n")
        let syncMissing = try await BuiltExecutable.run(BuiltExecutable.url("groupdefaults-sync"), ["sync"])
        #expect(syncMissing.status == 1)
        #expect(syncMissing.stderr.split(separator: "\n").count == 1, "\(syncMissing.stderr)")
    }

    @Test("a command line that does not parse is one line and exit status 1")
    func usageErrorsExitOne() async throws {
        let missing = try await server(["token", "create"])
        #expect(missing.status == 1)
        #expect(missing.stderr == "groupdefaults-server: Missing expected argument '--account <account>'; see `groupdefaults-server help`\n")
        let cli = try await BuiltExecutable.run(BuiltExecutable.url("groupdefaults"), ["rename"])
        #expect(cli.status == 1)
        #expect(cli.stderr.split(separator: "\n").count == 1, "\(cli.stderr)")
        for tool in ["groupdefaults", "groupdefaults-server", "groupdefaults-sync"] {
            let help = try await BuiltExecutable.run(BuiltExecutable.url(tool), ["--help"])
            let words = help.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(words.contains("Exit status: 0 on success"), "\(tool) --help says its exit statuses")
        }
    }

    @Test(
        "every subcommand's help: no stray backslashes; the server's each with an example",
        arguments: ["groupdefaults", "groupdefaults-server", "groupdefaults-sync"]
    )
    func helpTexts(tool: String) async throws {
        let executable = BuiltExecutable.url(tool)
        let dump = try await BuiltExecutable.run(executable, ["--experimental-dump-help"])
        let tree = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let paths = Self.commandPaths(try #require(tree["command"] as? [String: Any]), prefix: [])
        #expect(paths.count > 3)
        for path in paths {
            let help = try await BuiltExecutable.run(executable, path + ["--help"])
            #expect(help.status == 0, "\(tool) \(path) --help")
            #expect(!help.stdout.contains("\\ ") && !help.stdout.contains("\\\n"), "\(tool) \(path.joined(separator: " ")) --help:\n\(help.stdout)")
            if tool == "groupdefaults-server", !path.isEmpty {
                #expect(
                    help.stdout.contains("Example: groupdefaults-server \(path.joined(separator: " "))"),
                    "\(tool) \(path.joined(separator: " ")) --help has no example"
                )
            }
        }
    }

    /// The path of every command in ArgumentParser's description of a tool (the root as `[]`).
    private static func commandPaths(_ command: [String: Any], prefix: [String]) -> [[String]] {
        let subcommands = command["subcommands"] as? [[String: Any]] ?? []
        return [prefix]
            + subcommands.flatMap { sub in
                guard let name = sub["commandName"] as? String, name != "help" else { return [[String]]() }
                return commandPaths(sub, prefix: prefix + [name])
            }
    }
}
