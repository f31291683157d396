import ArgumentParser
import CommandLineSupport
import Configuration
import Foundation
import GroupDefaultsWire
import Synchronization

/// Where the server's commands take their settings from: flags, the environment
/// (`GROUPDEFAULTS_SERVER_` and a setting's name in capitals with underscores, `--max-wait` →
/// `GROUPDEFAULTS_SERVER_MAX_WAIT`), a settings file (`--config PATH`: one `NAME=value` a line with
/// the same names, `#` comments, blank lines, optional quotes, the syntax of a systemd
/// `EnvironmentFile=`) and the defaults of `ServerSettings`, read with swift-configuration's
/// `ConfigReader` in that order of precedence: flags win over the environment, which wins over the
/// file. Every value is blamed on where it came from (`flag`, `environment`, `FILE:LINE`,
/// `default`), for `check-config` and for the one line that refuses a bad value.
enum SettingsSources {
    /// One setting's text and where it came from.
    struct Setting: Equatable, Sendable {
        var name: String
        var value: String
        var source: String
    }

    /// The settings of the flags given (by name, as text), of `--config`'s file and of the
    /// environment, over the defaults: each checked, a bad one blamed on its flag, line or variable.
    /// `scope` `.storage` reads and checks the storage settings only (what a storage command's
    /// options check before it runs); `.serve` all of them.
    ///
    /// - Throws: `CommandFailure` naming the file and the problem (unreadable, a line that is not
    ///   `NAME=value`, a name that is not a setting, a bad value), or the variable; `ValidationError`
    ///   for a bad flag, or settings that do not go together.
    static func resolve(
        flags: [String: String],
        configPath: String?,
        environment: [String: String],
        scope: SettingScope = .serve
    ) throws -> ResolvedSettings {
        var file = try configPath.map(read(file:)) ?? []
        var fromEnvironment = try self.environment(environment)
        // A storage choice replaces the lower sources' one: the flag's the environment's and the
        // file's, the environment's the file's.
        let choosesStorage = { (name: String) in ServerSettings.storageChoice.contains(name) }
        if flags.keys.contains(where: choosesStorage) {
            fromEnvironment.removeAll { choosesStorage($0.name) }
        }
        if flags.keys.contains(where: choosesStorage) || fromEnvironment.contains(where: { choosesStorage($0.name) }) {
            file.removeAll { choosesStorage($0.name) }
        }
        let layers = [
            SettingsProvider(name: "flags", settings: flags.map { Setting(name: $0.key, value: $0.value, source: "flag") }),
            SettingsProvider(name: "environment", settings: fromEnvironment),
            SettingsProvider(name: configPath ?? "settings file", settings: file),
            SettingsProvider(
                name: "defaults",
                settings: ServerSettings.all.compactMap { setting in
                    setting.defaultText.map { Setting(name: setting.name, value: $0, source: "default") }
                }
            ),
        ]
        let blame = BlameRecorder()
        let reader = ConfigReader(providers: layers, accessReporter: blame)
        var resolved: [Setting] = []
        for setting in ServerSettings.all where scope == .serve || setting.scope == scope {
            guard let value = reader.string(forKey: ConfigKey([setting.name])) else { continue }
            let source = blame.source(of: setting.name)
            if let problem = setting.problem(with: value) {
                guard source != "flag" else { throw ValidationError(problem) }
                throw CommandFailure("\(source): \(setting.variable): \(problem)")
            }
            resolved.append(Setting(name: setting.name, value: value, source: source))
        }
        let settings = ResolvedSettings(settings: resolved)
        for (one, other) in ServerSettings.pairs where settings.has(one) != settings.has(other) {
            throw ValidationError("--\(one) and --\(other) go together")
        }
        if settings.has(ServerSettings.dataDir.name) && settings.has(ServerSettings.postgresURL.name) {
            throw ValidationError("--data-dir and --postgres-url exclude each other")
        }
        return settings
    }

    /// The settings of the environment's `GROUPDEFAULTS_SERVER_` variables.
    static func environment(_ environment: [String: String]) throws -> [Setting] {
        try environment.filter { $0.key.hasPrefix(ServerSettings.prefix) }.sorted { $0.key < $1.key }.map { key, value in
            let name = try settingName(String(key.dropFirst(ServerSettings.prefix.count)), where: "the environment variable \(key)")
            return Setting(name: name, value: value, source: "environment")
        }
    }

    /// The settings of a file, each blamed on its line.
    static func read(file path: String) throws -> [Setting] {
        // Read to its end, so that a pipe (`--config <(…)`) and /dev/null are files like others.
        var isFolder: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
        let data = exists && !isFolder.boolValue ? FileHandle(forReadingAtPath: path).map { $0.readDataToEndOfFile() } : nil
        guard let data, let text = String(data: data, encoding: .utf8) else {
            let why =
                !exists
                ? "no such file"
                : isFolder.boolValue
                    ? "it is a folder: name the file itself"
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
            let prefix = ServerSettings.prefix
            guard key.hasPrefix(prefix) else {
                throw CommandFailure("\(place): '\(key)' is not a setting; names start with \(prefix) (\(prefix)PORT=8080)")
            }
            let name = try settingName(String(key.dropFirst(prefix.count)), where: place)
            let value = unquoted(line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces))
            // A later line wins, as systemd reads the file.
            settings.removeAll { $0.name == name }
            settings.append(Setting(name: name, value: value, source: place))
        }
        return settings
    }

    /// `MAX_WAIT` → `max-wait`, if that is a setting. Names are exact, as shells and systemd take
    /// them: `max_wait` or `MAX-WAIT` is another variable, and not a setting.
    static func settingName(_ suffix: String, where place: String) throws -> String {
        let name = suffix.lowercased().replacingOccurrences(of: "_", with: "-")
        guard let setting = ServerSettings.named(name), setting.variable == ServerSettings.prefix + suffix else {
            let variables = ServerSettings.all.map(\.variable)
            let meant = ServerSettings.named(name)?.variable ?? Spelling.nearest(to: ServerSettings.prefix + suffix, among: variables)
            let advice = meant.map { "did you mean \($0)?" } ?? "the settings are " + variables.joined(separator: ", ")
            throw CommandFailure("\(place): \(ServerSettings.prefix)\(suffix) is not a setting; \(advice)")
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

/// The settings a command runs with, each checked and blamed on its source.
struct ResolvedSettings: Sendable {
    /// In `ServerSettings.all`'s order; an unset setting without a default is absent.
    let settings: [SettingsSources.Setting]

    func has(_ name: String) -> Bool { settings.contains { $0.name == name } }

    /// Where a setting came from: `flag`, `environment`, `FILE:LINE` or `default`; nil if unset.
    func source(of name: String) -> String? { settings.first { $0.name == name }?.source }

    /// A setting's value (checked when resolved), or its default; nil if unset.
    subscript<Value>(_ setting: ServerSetting<Value>) -> Value? {
        settings.first { $0.name == setting.name }.flatMap { Value(settingText: $0.value) } ?? setting.defaultValue
    }

    /// A setting that has a default: its value.
    subscript<Value>(defaulted setting: ServerSetting<Value>) -> Value {
        guard let value = self[setting] ?? setting.defaultValue else { preconditionFailure("\(setting.name) has no default") }
        return value
    }
}

/// One source of settings for `ConfigReader`: its settings by name, each answered as a string with
/// its source as the encoded key, which `BlameRecorder` keeps. (Not swift-configuration's
/// `EnvironmentVariablesProvider` or a `FileProvider`: a value must be blamed on its file's line.)
struct SettingsProvider: ConfigProvider, ConfigSnapshot {
    let providerName: String
    let settings: [String: SettingsSources.Setting]

    init(name: String, settings: [SettingsSources.Setting]) {
        providerName = name
        self.settings = Dictionary(settings.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
    }

    func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        guard let setting = settings[key.components.joined(separator: ".")] else {
            return LookupResult(encodedKey: key.description, value: nil)
        }
        // Every setting is read as text; its type is `ServerSetting`'s to check.
        guard type == .string else { throw CommandFailure("\(setting.source): \(setting.name) is read as text") }
        return LookupResult(encodedKey: setting.source, value: ConfigValue(.string(setting.value), isSecret: false))
    }

    func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey,
        type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws
            -> Return
    ) async throws -> Return {
        try await watchValueFromValue(forKey: key, type: type, updatesHandler: updatesHandler)
    }

    func snapshot() -> any ConfigSnapshot { self }

    func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        try await watchSnapshotFromSnapshot(updatesHandler: updatesHandler)
    }
}

/// Where each value read came from: the encoded key of the source that answered it (a
/// `SettingsProvider` answers with its setting's source).
final class BlameRecorder: AccessReporter, Sendable {
    private let sources = Mutex<[String: String]>([:])

    func report(_ event: AccessEvent) {
        guard case .success(let lookup)? = event.providerResults.last?.result, lookup.value != nil else { return }
        sources.withLock { $0[event.metadata.key.components.joined(separator: ".")] = lookup.encodedKey }
    }

    func source(of name: String) -> String {
        sources.withLock { $0[name] } ?? "default"
    }
}
