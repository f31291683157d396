import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire

/// The options every verb that names a suite shares.
struct SuiteOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The folder of the suites.", valueName: "DIR"))
    var directory: String?

    var directoryURL: URL? { directory.map { URL(fileURLWithPath: $0, isDirectory: true) } }

    /// How the tool opens suites: without an argument domain (its own options are not settings).
    static var configuration: SharedDefaults.Configuration {
        var configuration = SharedDefaults.Configuration()
        configuration.arguments = []
        return configuration
    }

    /// Opens an existing suite for reading or editing: a name, or the path of a `.lmdb` file.
    func open(_ suite: String) throws -> SharedDefaults {
        if let file = Self.fileURL(suite) {
            return try SharedDefaults(fileURL: file, configuration: Self.configuration)
        }
        return try SharedDefaults(existingSuiteName: suite, directory: directoryURL, configuration: Self.configuration)
    }

    /// Opens a suite for writing, creating it if needed.
    func openOrCreate(_ suite: String) throws -> SharedDefaults {
        if let file = Self.fileURL(suite) {
            if FileManager.default.fileExists(atPath: file.path) { return try SharedDefaults(fileURL: file, configuration: Self.configuration) }
            return try SharedDefaults(
                suiteName: file.deletingPathExtension().lastPathComponent,
                directory: file.deletingLastPathComponent(),
                configuration: Self.configuration
            )
        }
        return try SharedDefaults(suiteName: suite, directory: directoryURL, configuration: Self.configuration)
    }

    /// Runs `body` on `suite` opened for writing, creating it if needed, once `values` (what the
    /// write stores, by key) are known to be storable (`SharedDefaults.checkStorable`): a write
    /// refused for its input creates no suite. (A suite is never removed again after a refusal:
    /// another process may have created it meanwhile, and be writing to it.)
    func writing(_ suite: String, checking values: [String: PropertyListValue?] = [:], _ body: (SharedDefaults) throws -> Void) throws {
        try writing(suite, checking: values.map { (key: $0.key, value: $0.value) }, body)
    }

    /// `writing(_:checking:_:)` for a whole suite's entries, every key as its bytes.
    func writing(_ suite: String, checking entries: [(key: String, value: PropertyListValue?)], _ body: (SharedDefaults) throws -> Void) throws {
        let name = Self.fileURL(suite)?.deletingPathExtension().lastPathComponent ?? suite
        for (key, value) in entries { try SharedDefaults.checkStorable(value, forKey: key, suiteName: name) }
        try checkNotSwapped(suite, keys: entries.map(\.key))
        let defaults = try openOrCreate(suite)
        try body(defaults)
        let pinned = Set(defaults.pinnedKeys.map(\.exact))
        for (key, _) in entries where pinned.contains(key.exact) {
            groupdefaults.printError(
                "warning: \(printable(key)) is pinned by the suite's owner: the value was stored here, but sync does not push it and puts the owner's value back"
            )
        }
        for (key, _) in entries {
            guard let setting = defaults.managedSettings.settings.first(where: { $0.key.isSameName(as: key) }) else { continue }
            groupdefaults.printError(
                "warning: \(printable(key)) is managed by \(setting.file): the value was stored, but programs read \(ValueText.oneLine(setting.value))"
            )
        }
    }

    /// Refuses to create a suite for a write whose key is the name of an existing suite (`write
    /// sound group.com.example.chat ring`): the suite and the key were given in the wrong order.
    private func checkNotSwapped(_ suite: String, keys: [String]) throws {
        guard Self.fileURL(suite) == nil, keys.count == 1, let key = keys.first,
            let names = try? SharedDefaults.suiteNames(in: directoryURL), !names.contains(where: { $0.isSameName(as: suite) }),
            names.contains(where: { $0.isSameName(as: key) })
        else { return }
        throw CommandFailure(
            "there is no suite \(suite), but there is a suite \(key): the suite goes first (write \(key) \(suite) …); nothing was written"
        )
    }

    /// Refuses an empty `--directory`: `''`, and `--directory=`, for which the argument parser
    /// takes the next word (the suite) as the folder. Records the folder for the commands the tool
    /// prints (`GivenLocation`).
    func validate() throws {
        GivenLocation.record("--directory", directory)
        if directory?.isEmpty == true || CommandLine.arguments.contains("--directory=") {
            throw ValidationError("--directory needs a folder, not an empty string")
        }
    }

    /// Refuses a suite argument that is an option mistyped (`--directry`) or misplaced, naming the
    /// option meant: such a word is never taken for a suite's name.
    static func checkNotAnOption(_ suite: String, options: [String] = ["--directory", "--help"]) throws {
        guard suite.hasPrefix("-") else { return }
        let name = String(suite.prefix { $0 != "=" })
        if let meant = Spelling.nearest(to: name, among: options) {
            throw CommandFailure("unknown option '\(name)'; did you mean '\(meant)'? (options go before SUITE)")
        }
        throw CommandFailure("unknown option '\(name)' where a suite name was expected (options go before SUITE)")
    }

    /// The suite's file, if `suite` is a path rather than a name.
    static func fileURL(_ suite: String) -> URL? {
        suite.hasSuffix(".lmdb") && suite.contains("/") || suite.hasSuffix(".lmdb") && FileManager.default.fileExists(atPath: suite)
            ? URL(fileURLWithPath: suite) : nil
    }
}

extension CommandFailure {
    /// `The domain/default pair of (SUITE, KEY) does not exist`, without the tool's name, as
    /// `defaults` prints it (scripts match these lines).
    static func missingKey(_ suite: String, _ key: String) -> CommandFailure {
        var failure = CommandFailure("The domain/default pair of (\(suite), \(key)) does not exist")
        failure.showsToolName = false
        return failure
    }

    /// `Domain SUITE does not exist`, without the tool's name, as `defaults` prints it.
    static func missingSuite(_ suite: String) -> CommandFailure {
        var failure = CommandFailure("Domain \(suite) does not exist")
        failure.showsToolName = false
        return failure
    }
}

/// How `groupdefaults` reports a failure: one line on stderr and exit status 1 (or the status a
/// `CommandFailure` carries), never a stack trace.
let groupdefaults = CommandLineTool(name: "groupdefaults", root: GroupDefaultsCommand.self) { error in
    switch error {
    case let error as SharedDefaultsError where error.code == .suiteNotFound: .missingSuite(error.suiteName)
    case let error as SharedDefaultsError where error.code == .invalidSuiteName && error.suiteName.contains("/"):
        CommandFailure("\(error) (--directory DIR)")
    default: CommandFailure("\(error)")  // a SharedDefaultsError's description included
    }
}

/// Runs a verb's body as `groupdefaults` reports failures.
func perform(_ body: () throws -> Void) throws {
    try groupdefaults.perform(body)
}
