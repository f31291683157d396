import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer

/// `groupdefaults-server check-config`: what `serve` would use, and where each setting comes from.
struct CheckConfig: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Show the settings `serve` would use with the same options, settings file and environment, and check them.",
        discussion: """
            Each setting is shown with where it comes from: a flag, the environment, a line of the \
            settings file, or the default. Exit status 0 when `serve` would start with them (the \
            database is not contacted), 1 with one line saying what is wrong.

            Example: groupdefaults-server check-config --config /etc/groupdefaults-server.conf
            """
    )

    @OptionGroup var options: ServeOptions

    func run() async throws {
        try await groupdefaultsServer.perform {
            let settings = try options.settings()
            let configuration = try ServeOptions.serverConfiguration(settings)
            // What `serve` checks before it listens: the TLS files load, and the key belongs to the certificate.
            if let tls = configuration.tls {
                do { try TLSFilesError.check(tls) } catch { throw CommandFailure("\(error)") }
            }
            // And the address is free: a port in use, or a host that is not this machine's, is said now.
            if let refusal = await ListenFailure.probe(host: configuration.host, port: configuration.port) {
                throw CommandFailure(refusal)
            }
            for line in Self.lines(settings) { output(line) }
            output("ok: serve would listen on \(configuration.tls == nil ? "http" : "https")://\(configuration.host):\(configuration.port)")
        }
    }

    /// `name = value  (source)` for each setting that applies: the store's (its directory, the
    /// default one included, or PostgreSQL and its connect timeout), and every other one that is set.
    static func lines(_ settings: ResolvedSettings) -> [String] {
        let postgres = settings.has(ServerSettings.postgresURL.name)
        var lines: [String] = []
        for setting in ServerSettings.all {
            if setting.name == ServerSettings.dataDir.name && !postgres {
                let source = settings.source(of: setting.name) ?? "default"
                lines.append("\(setting.name) = \(StorageOptions.resolvedDataDirectory(settings))  (\(source))")
                continue
            }
            if setting.name == ServerSettings.postgresConnectTimeout.name && !postgres { continue }
            guard let found = settings.settings.first(where: { $0.name == setting.name }) else { continue }
            let value =
                setting.name == ServerSettings.postgresURL.name ? PostgresStorageConfiguration.redacted(found.value) : setting.shown(found.value)
            lines.append("\(setting.name) = \(value)  (\(found.source))")
        }
        return lines
    }
}
