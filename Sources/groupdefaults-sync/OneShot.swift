import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire
import Logging

extension SyncCommand {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pull, push what is pending, pull again; exit 0 when the suite and the server agree.",
            discussion: """
                In an end-to-end encrypted suite, on a device holding the owner key, it also makes \
                the key rotation the server marks due since a member holding the keys was removed \
                (from the console, the API, or a member leaving): the new key is sealed for the \
                owner's devices and the remaining members only.

                A server that cannot be reached (connection refused, unknown host, TLS failure, no \
                connection within --connect-timeout, no answer within --answer-timeout) is one line \
                at once, exit status 1: nothing pending is lost. A busy server (429, 503) is tried \
                again after its Retry-After, at most six times within a minute. Another sync of \
                the same suite (or its run) pushing at the same moment is waited for: each change \
                is pushed once, by one of them.

                Example: groupdefaults-sync sync group.com.example.chat
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await withEngine(options, server, suite) { engine in
                // A rotation this device began and did not finish: finished first (it syncs too).
                if let rotation = try await engine.sharing.finishRotation() {
                    output(
                        "finished rotating \(suite) to key epoch \(rotation.keys.currentEpoch), begun here before "
                            + "(\(rotation.resealed) \(rotation.resealed == 1 ? "entry" : "entries") sealed again)"
                    )
                }
                let report = try await engine.syncOnce()
                // A member that held the keys was removed since the last rotation: rotated now.
                if let (due, rotation) = try await engine.sharing.rotateIfDue() {
                    output(
                        "rotated \(suite) to key epoch \(rotation.keys.currentEpoch) (\(rotation.resealed) \(rotation.resealed == 1 ? "entry" : "entries") sealed again): "
                            + "\(due.removed.map(printable).joined(separator: ", ")) held its keys when removed, and cannot open what is written from now on"
                    )
                }
                return report
            }
        }
    }

    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Push the suite's pending changes.",
            discussion: "Example: groupdefaults-sync push group.com.example.chat"
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await withEngine(options, server, suite) { engine in try await engine.push() }
        }
    }

    struct Pull: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pull and apply what changed on the server.",
            discussion: "Example: groupdefaults-sync pull group.com.example.chat"
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String

        func run() async throws {
            try await withEngine(options, server, suite, pushes: false) { engine in try await engine.pull() }
        }
    }
}

/// Runs one step on the suite's engine and prints what it did; exits 1 if the server refused a key
/// (or, with `pushes`, changes are still pending), 3 if authentication is needed.
func withEngine(
    _ options: SuiteOptions,
    _ server: ServerOptions,
    _ suite: String,
    pushes: Bool = true,
    _ step: @Sendable (SyncEngine) async throws -> SyncReport
) async throws {
    // The outcome is printed; details only when something is wrong.
    LoggingSystem.bootstrap { label in PrintableLogHandler.standardError(label: label, level: .warning) }
    let progress = TerminalProgress()
    var engineOptions = SyncEngine.Options()
    engineOptions.progress = progress.show
    try await withConfiguredEngine(options, server, suite, engineOptions: engineOptions) { _, engine in
        let result: Result<SyncReport, any Error>
        do { result = .success(try await step(engine)) } catch { result = .failure(error) }
        progress.clear()
        let report = try result.get()
        var line = "\(suite): applied \(report.applied), pushed \(report.pushed)"
        if report.pruned > 0 { line += ", removed \(report.pruned)" }
        if report.ignored > 0 { line += ", ignored \(report.ignored) (local-only)" }
        line += ", \(report.pendingCount) pending"
        output(line)
        if let summary = report.replacementSummary(suite: suite) { groupdefaultsSync.outputHint(summary) }
        for refusal in report.rejected { printError(refusal.description) }
        for entry in report.refused { printError("refused from the server: \(entry) (not applied)") }
        if !report.omitted.isEmpty {
            printError(
                "the server's snapshot left out \(report.omitted.count) key(s) it had acknowledged, kept here: \(report.omitted.prefix(20).joined(separator: ", "))"
            )
        }
        if !report.rejected.isEmpty || !report.refused.isEmpty || !report.omitted.isEmpty { throw ExitCode(1) }
        if pushes, report.keptLocal > 0, let shared = engine.shared {
            throw CommandFailure(
                "\(report.keptLocal) local change(s) stay on this device, not sent: this account is a read member of \(shared.owner)'s suite \(shared.suite)"
            )
        }
        if pushes && report.pendingCount > 0 {
            throw CommandFailure("\(report.pendingCount) change(s) are still pending: run it again")
        }
    }
}

/// Runs `body` with an engine for the configured suite, and its HTTP client shut down afterwards
/// (one-line failures, exit status 3 when authentication is needed): for every verb that talks to
/// the server.
func withConfiguredEngine(
    _ options: SuiteOptions,
    _ server: ServerOptions,
    _ suite: String,
    engineOptions: SyncEngine.Options = SyncEngine.Options(),
    _ body: (SharedDefaults, SyncEngine) async throws -> Void
) async throws {
    try await perform {
        let defaults = try options.open(suite)
        guard let settings = try SyncSettings.stored(in: defaults) else {
            throw CommandFailure(UnconfiguredHint.sentence(suite: suite, defaults: defaults))
        }
        try await withHTTPClient(server, caFile: settings.caFile) { http in
            try await body(defaults, try SyncEngine(configured: defaults, http: http, options: server.applied(to: engineOptions)))
        }
    }
}

/// Runs `body` with an HTTP client that trusts `caFile` too and waits for connections as `server`
/// says, shut down afterwards, whether `body` returns or throws.
func withHTTPClient<T>(_ server: ServerOptions, caFile: String?, _ body: (HTTPClient) async throws -> T) async throws -> T {
    let http = try server.makeHTTPClient(caFile: caFile)
    let result: Result<T, any Error>
    do { result = .success(try await body(http)) } catch { result = .failure(error) }
    try await http.shutdown()
    return try result.get()
}

/// Progress of long steps on stderr, when stderr is a terminal.
final class TerminalProgress: Sendable {
    let isTerminal = isatty(STDERR_FILENO) == 1

    var show: @Sendable (SyncProgress) -> Void {
        { [isTerminal] progress in
            guard isTerminal else { return }
            FileHandle.standardError.write(Data("\r\u{1B}[K\(progress.phase.rawValue): \(progress.done)".utf8))
        }
    }

    func clear() {
        if isTerminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}
