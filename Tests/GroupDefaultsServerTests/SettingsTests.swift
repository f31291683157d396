import Foundation
import Glibc
import GroupDefaultsServer
import TestSupport
import Testing

@testable import groupdefaults_server

/// `serve` and `check-config` take settings from a file (`--config`) and the environment as well
/// as flags: flags win over the environment, which wins over the file; a bad file or value is one
/// line naming where it is, exit status 1. Through the real executable.
@Suite("Settings file and environment")
struct SettingsTests {
    func settingsFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("gds-settings-\(UUID().uuidString).conf").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func checkConfig(_ arguments: [String], environment: [String: String] = [:]) async throws -> (status: Int32, stdout: String, stderr: String) {
        var base = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GROUPDEFAULTS_SERVER_") }
        base.merge(environment) { $1 }
        return try await BuiltExecutable.run(ServerTool.executable, ["check-config"] + arguments, environment: base)
    }

    /// `name = value  (source)` lines, by name.
    func settings(_ output: String) -> [String: (value: String, source: String)] {
        var settings: [String: (String, String)] = [:]
        for line in output.split(separator: "\n") {
            let parts = line.split(separator: " = ", maxSplits: 1)
            guard parts.count == 2, let open = parts[1].range(of: "  (", options: .backwards) else { continue }
            settings[String(parts[0])] = (String(parts[1][..<open.lowerBound]), String(parts[1][open.upperBound...].dropLast()))
        }
        return settings
    }

    @Test("flags win over the environment, which wins over the file; the rest are defaults; check-config says which")
    func precedence() async throws {
        let path = try settingsFile(
            """
            # the packaged settings
            GROUPDEFAULTS_SERVER_PORT=9000
            GROUPDEFAULTS_SERVER_HISTORY = "3"

            GROUPDEFAULTS_SERVER_MAX_WAIT='20'
            GROUPDEFAULTS_SERVER_DATA_DIR=/srv/from-file
            """
        )
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = try await checkConfig(
            ["--config", path, "--port", "1234", "--postgres-url", "postgres://u:secret@db:5432/gd"],
            environment: ["GROUPDEFAULTS_SERVER_HISTORY": "5"]
        )
        #expect(result.status == 0, "\(result.stderr)")
        let shown = settings(result.stdout)
        #expect(shown["port"]?.value == "1234" && shown["port"]?.source == "flag")
        #expect(shown["history"]?.value == "5" && shown["history"]?.source == "environment")
        #expect(shown["max-wait"]?.value == "20" && shown["max-wait"]?.source == "\(path):5")
        #expect(shown["host"]?.source == "default")
        #expect(shown["data-dir"] == nil, "a storage flag replaces the file's storage")
        #expect(shown["postgres-url"]?.value == "postgres://u:redacted@db:5432/gd", "no password shown")
        #expect(!result.stdout.contains("secret"))
        #expect(result.stdout.contains("ok: serve would listen on http://127.0.0.1:1234"))
    }

    @Test("--metrics-token-file: taken from the settings too; refused when others can read it or it holds no token")
    func metricsTokenFile() async throws {
        let token = try settingsFile("metrics-0123456789abcdef\n")
        defer { try? FileManager.default.removeItem(atPath: token) }
        chmod(token, 0o644)
        let open = try await checkConfig(["--data-dir", "/tmp/gds-unused"], environment: ["GROUPDEFAULTS_SERVER_METRICS_TOKEN_FILE": token])
        #expect(open.status == 1 && open.stderr.contains("chmod 600"), "\(open.stderr)")
        chmod(token, 0o600)
        let fine = try await checkConfig(["--data-dir", "/tmp/gds-unused"], environment: ["GROUPDEFAULTS_SERVER_METRICS_TOKEN_FILE": token])
        #expect(fine.status == 0, "\(fine.stderr)")
        #expect(settings(fine.stdout)["metrics-token-file"]?.source == "environment")
        #expect(!fine.stdout.contains("metrics-0123456789abcdef"), "the token itself is never shown")
        let short = try settingsFile("short\n")
        defer { try? FileManager.default.removeItem(atPath: short) }
        chmod(short, 0o600)
        let refused = try await checkConfig(["--data-dir", "/tmp/gds-unused", "--metrics-token-file", short])
        #expect(refused.status == 1 && refused.stderr.contains("at least 16 characters"), "\(refused.stderr)")
    }

    @Test("a file that cannot be read, a line that is not a setting, an unknown name or a bad value: one line naming it, exit 1")
    func badInput() async throws {
        let cases: [(text: String?, environment: [String: String], expected: String)] = [
            (nil, [:], "no such file"),
            ("GROUPDEFAULTS_SERVER_PORT=80\nport 9000\n", [:], ":2: expected NAME=value"),
            ("PORT=9000\n", [:], ":1: 'PORT' is not a setting"),
            ("GROUPDEFAULTS_SERVER_PROT=9000\n", [:], ":1: GROUPDEFAULTS_SERVER_PROT is not a setting"),
            // Names are exact, as shells and systemd take them; the one meant is named.
            ("GROUPDEFAULTS_SERVER_port=9000\n", [:], ":1: GROUPDEFAULTS_SERVER_port is not a setting; did you mean GROUPDEFAULTS_SERVER_PORT?"),
            (
                "", ["GROUPDEFAULTS_SERVER_MAX-WAIT": "5"],
                "GROUPDEFAULTS_SERVER_MAX-WAIT is not a setting; did you mean GROUPDEFAULTS_SERVER_MAX_WAIT?"
            ),
            ("GROUPDEFAULTS_SERVER_HISTORY=abc\n", [:], ":1: GROUPDEFAULTS_SERVER_HISTORY: "),
            ("GROUPDEFAULTS_SERVER_POSTGRES_URL=mysql://x\n", [:], ":1: GROUPDEFAULTS_SERVER_POSTGRES_URL: "),
            ("", ["GROUPDEFAULTS_SERVER_HEARTBEAT": "99"], "environment: GROUPDEFAULTS_SERVER_HEARTBEAT: "),
        ]
        for (text, environment, expected) in cases {
            let path = try text.map(settingsFile) ?? "/nonexistent/groupdefaults-server.conf"
            defer { try? FileManager.default.removeItem(atPath: path) }
            for verb in [["check-config"], ["serve"], []] {
                var base = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("GROUPDEFAULTS_SERVER_") }
                base.merge(environment) { $1 }
                let result = try await BuiltExecutable.run(ServerTool.executable, verb + ["--config", path, "--port", "0"], environment: base)
                #expect(result.status == 1, "\(verb) \(text ?? "none"): \(result)")
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.count == 1 && lines[0].contains(expected), "\(verb) \(text ?? "none"): \(result.stderr)")
                if text != nil && environment.isEmpty { #expect(lines.first?.contains(path) == true, "the file is named") }
            }
        }
    }

    @Test("serve with a settings file alone stores where the file says, and listens")
    func serveFromFile() async throws {
        let dataDirectory = ServerTool.temporaryDirectory("gds-settings-data")
        defer { try? FileManager.default.removeItem(atPath: dataDirectory) }
        let path = try settingsFile("GROUPDEFAULTS_SERVER_DATA_DIR=\(dataDirectory)\nGROUPDEFAULTS_SERVER_HISTORY=0\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let server = try await ServerProcess(dataDirectory: nil, extraArguments: ["--config", path])
        #expect(FileManager.default.fileExists(atPath: dataDirectory + "/sync.lmdb"))
        server.signal(SIGTERM)
        _ = await server.waitForExit()
    }

    @Test("every option of serve is a declared setting, and every declared setting an option of serve (the settings named where one is unknown)")
    func everyOptionIsASetting() async throws {
        let dump = try await ServerTool.run(["--experimental-dump-help"])
        let root = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let command = try #require(root["command"] as? [String: Any])
        let serve = try #require((command["subcommands"] as? [[String: Any]])?.first { $0["commandName"] as? String == "serve" })
        let options = Set(
            (serve["arguments"] as? [[String: Any]] ?? []).compactMap { argument -> String? in
                guard argument["shouldDisplay"] as? Bool != false, ["option", "flag"].contains(argument["kind"] as? String),
                    let name = (argument["preferredName"] as? [String: Any])?["name"] as? String
                else { return nil }
                return ["config", "help", "version"].contains(name) ? nil : name
            }
        )
        // A switch is two flags, `--console` and `--no-console`: one setting.
        .filter { !($0.hasPrefix("no-") && ServerSettings.named(String($0.dropFirst(3))) is ServerSetting<Bool>) }
        let declared = Set(ServerSettings.all.map(\.name))
        #expect(!options.isEmpty)
        #expect(
            declared == options,
            "options without a setting: \(options.subtracting(declared)); settings without an option: \(declared.subtracting(options))"
        )
        let refused = try await checkConfig([], environment: ["GROUPDEFAULTS_SERVER_NOPE": "1"])
        #expect(refused.status == 1)
        let listed = try #require(refused.stderr.components(separatedBy: "the settings are ").last)
        #expect(listed.trimmingCharacters(in: .whitespacesAndNewlines) == ServerSettings.all.map(\.variable).joined(separator: ", "))
    }

    @Test("each declared setting with a default is its default unless set, and is set alike by a flag, the environment or the file")
    func everySettingFromEverySource() async throws {
        let settings = ServerSettings.all.filter { $0.defaultText != nil && $0.scope == .serve }
        let defaults = try await checkConfig(["--data-dir", "/tmp/gds-unused"])
        #expect(defaults.status == 0, "\(defaults.stderr)")
        for setting in settings {
            #expect(self.settings(defaults.stdout)[setting.name]?.value == setting.defaultText, "\(setting.name)")
            #expect(self.settings(defaults.stdout)[setting.name]?.source == "default", "\(setting.name)")
        }
        // Each given its default's text; the switch as the file and environment write it.
        func text(_ setting: any AnyServerSetting) -> String { setting.defaultText == "on" ? "true" : setting.defaultText ?? "" }
        let flags = settings.flatMap { setting in
            setting.defaultText == "on" ? ["--\(setting.name)"] : ["--\(setting.name)", setting.defaultText ?? ""]
        }
        let path = try settingsFile(settings.map { "\($0.variable)=\(text($0))" }.joined(separator: "\n"))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let environment = Dictionary(uniqueKeysWithValues: settings.map { ($0.variable, text($0)) })
        for (arguments, environment, source) in [
            (flags, [:], { (_: Int) in "flag" }),
            ([], environment, { (_: Int) in "environment" }),
            (["--config", path], [:], { (line: Int) in "\(path):\(line + 1)" }),
        ] as [([String], [String: String], (Int) -> String)] {
            let result = try await checkConfig(["--data-dir", "/tmp/gds-unused"] + arguments, environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            let shown = self.settings(result.stdout)
            for (index, setting) in settings.enumerated() {
                #expect(shown[setting.name]?.value == setting.defaultText, "\(setting.name): \(result.stdout)")
                #expect(shown[setting.name]?.source == source(index), "\(setting.name): \(result.stdout)")
            }
        }
    }

    @Test("--console is a flag (--no-console turns the console off); the file and the environment take on, off, true or false")
    func consoleSwitch() async throws {
        let off = try await checkConfig(["--data-dir", "/tmp/gds-unused", "--no-console"])
        #expect(off.status == 0 && settings(off.stdout)["console"]?.value == "off", "\(off)")
        for (text, shown) in [("on", "on"), ("off", "off"), ("true", "on"), ("false", "off")] {
            let result = try await checkConfig(["--data-dir", "/tmp/gds-unused"], environment: ["GROUPDEFAULTS_SERVER_CONSOLE": text])
            #expect(result.status == 0 && settings(result.stdout)["console"]?.value == shown, "\(text): \(result)")
        }
        let flagWins = try await checkConfig(["--data-dir", "/tmp/gds-unused", "--console"], environment: ["GROUPDEFAULTS_SERVER_CONSOLE": "off"])
        #expect(settings(flagWins.stdout)["console"]?.value == "on" && settings(flagWins.stdout)["console"]?.source == "flag")
        let refused = try await checkConfig(["--data-dir", "/tmp/gds-unused"], environment: ["GROUPDEFAULTS_SERVER_CONSOLE": "maybe"])
        #expect(
            refused.status == 1 && refused.stderr.contains("environment: GROUPDEFAULTS_SERVER_CONSOLE: --console must be on or off"),
            "\(refused)"
        )
        // The flag's earlier form, `--console off`, is told what to write now.
        for old in [["--console", "off"], ["--console=on"]] {
            let told = try await checkConfig(["--data-dir", "/tmp/gds-unused"] + old)
            #expect(told.status == 1 && told.stderr.contains("--console takes no value: give --console or --no-console"), "\(old): \(told)")
        }
    }

    @Test("a settings file that is a folder is named as one; a pipe and /dev/null are read like files")
    func unusualFiles() async throws {
        let folder = ServerTool.temporaryDirectory("gds-settings-folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let refused = try await checkConfig(["--data-dir", "/tmp/gds-unused", "--config", folder])
        #expect(refused.status == 1 && refused.stderr.contains("\(folder): it is a folder"), "\(refused)")
        let empty = try await checkConfig(["--data-dir", "/tmp/gds-unused", "--config", "/dev/null"])
        #expect(empty.status == 0, "\(empty)")
    }

    @Test("bounds that keep the server up: a day's long-poll at most, a century of tombstones, a rate that lets a request through")
    func bounds() async throws {
        for (option, value, expected) in [
            ("--max-wait", "86401", "--max-wait must be 0 to 86400"),
            ("--tombstone-days", "106751991167301", "--tombstone-days must be 1 to 36500"),
            ("--audit-days", "0", "--audit-days must be 1 to 36500"),
            ("--audit-days", "106751991167301", "--audit-days must be 1 to 36500"),
            ("--rate-limit", "0.1", "--rate-limit must be at least 0.5"),
        ] {
            let refused = try await checkConfig(["--data-dir", "/tmp/gds-unused", option, value])
            #expect(refused.status == 1 && refused.stderr.contains(expected), "\(option) \(value): \(refused)")
        }
    }

    @Test("a PostgreSQL URL names one host or several (a primary and its standbys, libpq's form); what the server cannot honour is refused")
    func postgresHosts() throws {
        let several = try PostgresStorageConfiguration(
            url: "postgres://gd:pw%40x@10.0.0.1:5433,[::1],db.example:6000/settings?target_session_attrs=read-write&sslmode=prefer"
        )
        #expect(several.hosts.map(\.description) == ["10.0.0.1:5433", "[::1]:5432", "db.example:6000"])
        #expect(several.username == "gd" && several.password == "pw@x" && several.database == "settings")
        #expect(several.place == "10.0.0.1:5433,[::1]:5432,db.example:6000")
        let one = try PostgresStorageConfiguration(url: "postgresql://gd@h")
        #expect(one.hosts == [.init("h")] && one.database == "gd")
        for (url, said) in [
            ("postgres://gd@h1:5432,/db", "host (empty)"),
            ("postgres://gd@h1:5432,h2:0/db", "host h2:0"),
            ("postgres://h1,h2/db", "names no user"),
            ("postgres://gd@h1,h2/db?target_session_attrs=any", "target_session_attrs=any"),
            ("postgres://gd@h1,h2/db?sslmode=verify-full", "sslmode=verify-full"),
            ("mysql://gd@h1/db", "not a PostgreSQL URL"),
            ("postgres://gd@::1/db", "host ::1 is not host[:port]"),
            ("postgres://gd:%zz@h1/db", "password is not percent-encoded"),
            ("postgres://gd@h1:5432,h2,h1/db", "names the host h1:5432 twice"),
        ] {
            #expect(throws: StorageConfigurationError.self, "\(url)") { try PostgresStorageConfiguration(url: url) }
            do {
                _ = try PostgresStorageConfiguration(url: url)
            } catch {
                #expect("\(error)".contains(said), "\(url): \(error)")
            }
        }
    }

    @Test("a database password and the metrics token are never shown: not in a refused URL, not where a configuration is printed (debug logs)")
    func secretsNotShown() async throws {
        for url in ["postgres://u:secret@h:notaport/db", "postgres://u:secret@h:5432/db?sslmode=require"] {
            let refused = try await checkConfig(["--postgres-url", url])
            #expect(refused.status == 1 && !refused.stderr.contains("secret") && refused.stderr.contains("u:redacted@h"), "\(refused)")
        }
        var configuration = ServerConfiguration(storage: .postgres(try PostgresStorageConfiguration(url: "postgres://u:secret@h/db")))
        configuration.metricsToken = "metrics-token-0123456789"
        let printed = "\(configuration) \(String(reflecting: configuration))"
        #expect(!printed.contains("secret") && !printed.contains("metrics-token"), "\(printed)")
    }
}
