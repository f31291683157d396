import Foundation
import Glibc
import GroupDefaults
import TestSupport
import Testing

/// A device as the tools see it: a directory of suites, driven by the real `groupdefaults-sync`
/// and `groupdefaults` executables (and, for reads and writes, by this process too: a suite may be
/// open in several processes at once).
struct ToolDevice {
    static let syncExecutable = BuiltExecutable.url("groupdefaults-sync")
    static let defaultsExecutable = BuiltExecutable.url("groupdefaults")

    let directory: URL
    let suite: String

    init(_ suite: String) {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("gds-tool-\(UUID().uuidString)", isDirectory: true)
        self.suite = suite
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// A token file (mode 0600 unless told otherwise) in the device's directory.
    func tokenFile(_ token: String, name: String = "token", mode: mode_t = 0o600) throws -> String {
        let path = directory.appendingPathComponent(name).path
        try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: path))
        guard chmod(path, mode) == 0 else { throw FixtureError("chmod \(path) failed") }
        return path
    }

    /// `groupdefaults-sync VERB SUITE --directory DIR ARGUMENTS…`, to completion; under `launcher`
    /// if given (`ToolDevice.clockAhead`: a machine whose clock is wrong).
    func sync(_ verb: String, _ arguments: [String] = [], launcher: [String] = []) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await Self.run(Self.syncExecutable, [verb, suite, "--directory", directory.path] + arguments, launcher: launcher)
    }

    /// `groupdefaults-sync ARGUMENTS… --directory DIR`, to completion: for verbs that name no suite
    /// first (`configure --invitation`).
    func syncTool(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await Self.run(Self.syncExecutable, arguments + ["--directory", directory.path], launcher: [])
    }

    /// Debian's `faketime`, 100 years ahead: the launcher of a process whose clock is wrong.
    static let clockAhead = ["/usr/bin/faketime", "-f", "+100y"]

    private static func run(
        _ executable: URL,
        _ arguments: [String],
        environment: [String: String]? = nil,
        launcher: [String]
    ) async throws -> (status: Int32, stdout: String, stderr: String) {
        guard let command = launcher.first else { return try await BuiltExecutable.run(executable, arguments, environment: environment) }
        return try await BuiltExecutable.run(
            URL(fileURLWithPath: command),
            launcher.dropFirst() + [executable.path] + arguments,
            environment: environment
        )
    }

    /// `configure` with `token` written to a 0600 file named `tokenName`; expects success.
    func configure(
        _ server: SyncServer,
        token: String? = nil,
        tokenName: String = "token",
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let file = try tokenFile(token ?? server.token, name: tokenName)
        let result = try await sync("configure", ["--server", server.url.absoluteString, "--token-file", file])
        #expect(result.status == 0, "configure: \(result.stderr)", sourceLocation: sourceLocation)
    }

    /// `configure --encrypt` with the server's token (expects success); returns the recovery key it
    /// printed.
    func configureEncrypted(_ server: SyncServer, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        let configured = try await sync(
            "configure",
            ["--server", server.url.absoluteString, "--token-file", try tokenFile(server.token), "--encrypt"]
        )
        #expect(configured.status == 0, "configure --encrypt: \(configured.stderr)", sourceLocation: sourceLocation)
        let line = try #require(configured.stdout.split(separator: "\n").first { $0.hasPrefix("recovery key: ") }, sourceLocation: sourceLocation)
        return String(line.dropFirst("recovery key: ".count))
    }

    /// `groupdefaults ARGUMENTS…` with `$GROUPDEFAULTS_DIR` set to the device's directory; under
    /// `launcher` if given.
    func defaultsTool(_ arguments: [String], launcher: [String] = []) async throws -> (status: Int32, stdout: String, stderr: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["GROUPDEFAULTS_DIR"] = directory.path
        return try await Self.run(Self.defaultsExecutable, arguments, environment: environment, launcher: launcher)
    }

    /// Opens the device's suite in this process.
    func open() throws -> SharedDefaults {
        try SharedDefaults(suiteName: suite, directory: directory)
    }

    /// Starts `groupdefaults-sync VERB SUITE --directory DIR ARGUMENTS…` in the background.
    func start(_ verb: String, _ arguments: [String] = []) throws -> ChildProcess {
        try ChildProcess(Self.syncExecutable, [verb, suite, "--directory", directory.path] + arguments)
    }

    /// The key files in the device's directory (`configure` writes one beside a token file there,
    /// named for the suite, the server and the token).
    func keyFiles() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasSuffix(".keys") }.sorted()
            .map { directory.appendingPathComponent($0).path }
    }

    /// The one key file in the device's directory.
    func keyFile(sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
        let files = keyFiles()
        #expect(files.count == 1, "\(files)", sourceLocation: sourceLocation)
        return try #require(files.first, sourceLocation: sourceLocation)
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Two devices configured on `server`, each with a `groupdefaults-sync run` process (logging at
/// `logLevel`); `body` gets them. Afterwards both must stop cleanly on SIGTERM; they are killed
/// whatever happens.
func withRunningPair(
    _ server: SyncServer,
    _ suite: String,
    logLevel: String = "warning",
    _ body: (_ phone: ToolDevice, _ tablet: ToolDevice, _ phoneRun: ChildProcess, _ tabletRun: ChildProcess) async throws -> Void
) async throws {
    try await withToolPair(suite) { phone, tablet in
        try await phone.configure(server)
        try await tablet.configure(server)
        let phoneRun = try phone.start("run", ["--log-level", logLevel])
        let tabletRun = try tablet.start("run", ["--log-level", logLevel])
        defer {
            phoneRun.signal(SIGKILL)
            tabletRun.signal(SIGKILL)
        }
        try await body(phone, tablet, phoneRun, tabletRun)
        #expect(await phoneRun.terminate().status == 0, "run stops cleanly on SIGTERM: \(phoneRun.stderr)")
        #expect(await tabletRun.terminate().status == 0, "\(tabletRun.stderr)")
    }
}

/// Two devices (phone and tablet) of `suite`, each its own directory, removed afterwards.
func withToolPair(_ suite: String, _ body: (_ phone: ToolDevice, _ tablet: ToolDevice) async throws -> Void) async throws {
    let phone = ToolDevice(suite)
    let tablet = ToolDevice(suite)
    defer {
        phone.remove()
        tablet.remove()
    }
    try await body(phone, tablet)
}
