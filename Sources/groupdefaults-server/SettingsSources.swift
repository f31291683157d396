import ArgumentParser
import CommandLineSupport
import Foundation

/// Where the server's commands take their settings from besides flags: a settings file
/// (`--config PATH`) and the environment. Both use the same names, `GROUPDEFAULTS_SERVER_` and a
/// `serve` option's long name in capitals with underscores (`--max-wait` → `GROUPDEFAULTS_SERVER_MAX_WAIT`);
/// the file holds one `NAME=value` a line (`#` comments, blank lines, optional quotes), the syntax
/// of a systemd `EnvironmentFile=`. Flags win over the environment, which wins over the file.
///
/// They become options placed before the command line's own, so that ArgumentParser checks them
/// as it checks flags and a flag given again wins (the last value of an option is the one used).
/// `serve` and `check-config` take every setting; the commands that use storage (`token create`,
/// `devices list`, …) take the storage settings (`data-dir`, `postgres-url`) from the same file and
/// environment, so that each command finds the store the server uses.
enum SettingsSources {
    static let prefix = "GROUPDEFAULTS_SERVER_"

    /// The `serve` options a file or the environment may set, by long name.
    static let names = [
        "host", "port", "data-dir", "postgres-url", "log-level", "max-wait", "tombstone-days", "tls-cert", "tls-key",
        "rate-limit", "max-value-bytes", "max-keys-per-suite", "max-bytes-per-suite", "max-ops-per-batch", "heartbeat",
        "history", "max-streams-per-token", "max-connections", "request-head-timeout", "idle-timeout",
        "console", "console-session-hours", "metrics-token-file",
    ]
    /// Options of which one replaces the other: a flag for one drops a file's or environment's other.
    static let storageNames: Set = ["data-dir", "postgres-url"]
    /// Options given together or not at all.
    static let pairs = ["tls-cert": "tls-key", "tls-key": "tls-cert"]
    /// The subcommands that take settings; `serve` is also the default one.
    static let commands: Set = ["serve", "check-config"]
    /// The command groups whose verbs use storage: they take the storage settings.
    static let storageCommands: Set = ["token", "devices", "admin", "suites"]
    static let otherCommands: Set = storageCommands.union(["help"])

    /// One setting and where it came from (for `check-config`).
    struct Setting: Equatable {
        var name: String
        var value: String
        var source: String
    }

    /// The command line with the file's and the environment's settings before its own options,
    /// for `serve` (explicit or default) and `check-config`, and their storage settings for a verb
    /// of `token`, `devices`, `admin` and `suites`; other lines (help) as they are.
    ///
    /// - Throws: `CommandFailure` naming the file and the problem (unreadable, a line that is not
    ///   `NAME=value`, a name that is not a setting), or the variable.
    static func commandLine(_ arguments: [String], environment: [String: String]) throws -> [String] {
        guard let first = arguments.first else { return try ["serve"] + settingArguments([], environment: environment) }
        if commands.contains(first) {
            let own = Array(arguments.dropFirst())
            return [first] + (try settingArguments(own, environment: environment)) + own
        }
        if storageCommands.contains(first), arguments.count > 1, !arguments[1].hasPrefix("-"), !isHelpRequest(arguments) {
            let own = Array(arguments.dropFirst(2))
            let storage = try settings(own, environment: environment).filter { storageNames.contains($0.name) }
            return Array(arguments.prefix(2)) + storage.flatMap { ["--\($0.name)", $0.value] } + own
        }
        if otherCommands.contains(first) || !first.hasPrefix("-") || ["-h", "--help", "--version"].contains(first)
            || first.hasPrefix("--generate-completion-script") || first.hasPrefix("--experimental")
        {
            return arguments
        }
        return ["serve"] + (try settingArguments(arguments, environment: environment)) + arguments
    }

    /// Whether the line asks for help (which reads no settings: a bad one must not hide it).
    static func isHelpRequest(_ arguments: [String]) -> Bool {
        arguments.contains { ["-h", "--help"].contains($0) }
    }

    /// The options the file (named by `--config` in `own`) and the environment add before `own`.
    static func settingArguments(_ own: [String], environment: [String: String]) throws -> [String] {
        try settings(own, environment: environment).flatMap { ["--\($0.name)", $0.value] }
    }

    /// The settings the file and the environment give, in the order of `names`, less those that a
    /// flag in `own` sets (a storage flag drops both storage settings).
    static func settings(_ own: [String], environment: [String: String]) throws -> [Setting] {
        var found: [String: Setting] = [:]
        if let path = configPath(own) {
            for setting in try read(file: path) { found[setting.name] = setting }
        }
        for (key, value) in environment where key.hasPrefix(prefix) {
            let name = try settingName(String(key.dropFirst(prefix.count)), where: "the environment variable \(key)")
            // The environment wins over the file: for the storage, its choice replaces the file's.
            if storageNames.contains(name) {
                for other in storageNames where found[other]?.source != "environment" { found[other] = nil }
            }
            found[name] = Setting(name: name, value: value, source: "environment")
        }
        let flags = Set(
            own.compactMap { argument -> String? in
                guard argument.hasPrefix("--") else { return nil }
                return String(argument.dropFirst(2).prefix { $0 != "=" })
            }
        )
        let flagged = flags.contains { storageNames.contains($0) } ? flags.union(storageNames) : flags
        let settings = names.compactMap { found[$0] }.filter { !flagged.contains($0.name) }
        // Each value checked alone, so that a bad one is blamed on its line or variable (an option
        // that goes with another, --tls-cert with --tls-key, given its partner so that only the
        // value is judged; whether both are there is checked with the whole command line).
        for setting in settings {
            do {
                let partner = pairs[setting.name].map { ["--\($0)", setting.value] } ?? []
                _ = try ServeOptions.parse(["--\(setting.name)", setting.value] + partner)
            } catch {
                let problem = oneLine(ServeOptions.message(for: error)) ?? "not a valid value"
                throw CommandFailure("\(setting.source): \(prefix)\(setting.name.uppercased().replacingOccurrences(of: "-", with: "_")): \(problem)")
            }
        }
        return settings
    }

    /// The `--config` path of a command line, if any.
    static func configPath(_ own: [String]) -> String? {
        for (index, argument) in own.enumerated() {
            if argument == "--config", index + 1 < own.count { return own[index + 1] }
            if argument.hasPrefix("--config=") { return String(argument.dropFirst("--config=".count)) }
        }
        return nil
    }

    /// The settings of a file.
    static func read(file path: String) throws -> [Setting] {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            let why =
                !FileManager.default.fileExists(atPath: path)
                ? "no such file"
                : !FileManager.default.isReadableFile(atPath: path) ? "permission denied" : "it is not UTF-8 text"
            throw CommandFailure("cannot read the settings file \(path): \(why)")
        }
        var settings: [Setting] = []
        // As systemd reads an EnvironmentFile: a line may end in CRLF ("\r\n" is one Character, a
        // newline); '#' and ';' start comments.
        for (index, rawLine) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            let place = "\(path):\(index + 1)"
            guard let equals = line.firstIndex(of: "=") else {
                throw CommandFailure("\(place): expected NAME=value, got '\(line.prefix(60))'")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            guard key.hasPrefix(prefix) else {
                throw CommandFailure("\(place): '\(key)' is not a setting; names start with \(prefix) (\(prefix)PORT=8080)")
            }
            let name = try settingName(String(key.dropFirst(prefix.count)), where: place)
            settings.append(
                Setting(
                    name: name,
                    value: unquoted(line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)),
                    source: place
                )
            )
        }
        return settings
    }

    /// `MAX_WAIT` → `max-wait`, if that is a setting.
    static func settingName(_ suffix: String, where place: String) throws -> String {
        let name = suffix.lowercased().replacingOccurrences(of: "_", with: "-")
        guard names.contains(name) else {
            throw CommandFailure(
                "\(place): \(prefix)\(suffix) is not a setting; the settings are "
                    + names.map { prefix + $0.uppercased().replacingOccurrences(of: "-", with: "_") }.joined(separator: ", ")
            )
        }
        return name
    }

    private static func unquoted(_ value: String) -> String {
        for quote in ["\"", "'"] where value.count >= 2 && value.hasPrefix(quote) && value.hasSuffix(quote) {
            return String(value.dropFirst().dropLast())
        }
        return value
    }
}
