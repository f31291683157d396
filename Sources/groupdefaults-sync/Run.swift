import ArgumentParser
import AsyncHTTPClient
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import Logging

extension SyncCommand {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Keep suites in sync continuously (for a service manager); stops cleanly on SIGTERM or SIGINT.",
            discussion: """
                Local changes, by any process, are pushed a moment after they are made; remote changes \
                arrive through the server's event stream. Logs go to stderr. A server that cannot be \
                reached is tried again with backoff (up to every 30 seconds), each failure logged in \
                the words `sync` uses. A refused token pauses that suite (nothing is sent, nothing \
                pending is lost; `status` says so) until its token file holds a new token, or \
                `configure` names a new one: `run` goes on, and so do the other suites.

                Exit status: 0 after SIGTERM or SIGINT (a second one while it stops ends it at once, \
                with 128 + the signal's number); 1 at once, before syncing anything, when a \
                suite does not exist or is not configured, or its settings or key file cannot be \
                read: a restart cannot fix that (the user unit groupdefaults-sync@.service does not \
                restart it: RestartPreventExitStatus=1).

                Example: groupdefaults-sync run group.com.example.chat
                Example: groupdefaults-sync run group.com.example.chat --log-level debug
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite names.") var suites: [String]
        @Option(help: "How remote changes arrive: events or long-poll.") var transport: String = "events"
        @Option(help: "Log level: trace, debug, info, notice, warning, error, critical.") var logLevel: String = "info"

        func validate() throws {
            guard !suites.isEmpty else { throw ValidationError("name at least one suite") }
            guard SyncEngine.Options.Transport(rawValue: transport) != nil else { throw ValidationError("--transport is events or long-poll") }
            guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("unknown --log-level \(logLevel)") }
        }

        func run() async throws {
            let level = Logger.Level(rawValue: logLevel) ?? .info
            LoggingSystem.bootstrap { label in PrintableLogHandler.standardError(label: label, level: level) }
            try await perform {
                // SIGTERM and SIGINT cancel the engines (`interruptible`: its handler is in place
                // before anything starts, so a signal that comes at once is not lost); once they
                // and their HTTP clients have stopped, the run ends with status 0.
                do {
                    try await interruptible { try await runEngines() }
                } catch is Interrupted {}
            }
        }

        /// Opens every suite, then runs their engines until the task is cancelled.
        private func runEngines() async throws {
            var engines: [SyncEngine] = []
            var clients: [HTTPClient] = []
            var engineOptions = server.applied(to: SyncEngine.Options())
            engineOptions.transport = SyncEngine.Options.Transport(rawValue: transport) ?? .eventStream
            do {
                for suite in suites {
                    let defaults = try options.open(suite)
                    guard let settings = try SyncSettings.stored(in: defaults) else {
                        throw CommandFailure(UnconfiguredHint.sentence(suite: suite, defaults: defaults))
                    }
                    let http = try server.makeHTTPClient(caFile: settings.caFile)
                    clients.append(http)
                    // The event stream on a connection of its own: the server holds it with no task.
                    let streamHTTP = try server.makeHTTPClient(caFile: settings.caFile)
                    clients.append(streamHTTP)
                    engines.append(try SyncEngine(configured: defaults, http: http, streamHTTP: streamHTTP, options: engineOptions))
                }
            } catch {
                // Exit status 1, which the user unit does not restart: every suite starts, or none.
                for client in clients { try? await client.shutdown() }
                throw error
            }
            let logger = Logger(label: "groupdefaults-sync")
            logger.info("running", metadata: ["suites": "\(suites.joined(separator: ","))"])
            await withTaskGroup(of: Void.self) { group in
                for engine in engines { group.addTask { await engine.run() } }
            }
            for client in clients { try? await client.shutdown() }
            logger.info("stopped")
        }
    }
}
