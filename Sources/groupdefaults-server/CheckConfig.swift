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
        try groupdefaultsServer.perform {
            let own = Array(CommandLine.arguments.dropFirst().drop { $0 != "check-config" }.dropFirst())
            let fromSources = Dictionary(
                try SettingsSources.settings(own, environment: ProcessInfo.processInfo.environment).map { ($0.name, $0.source) },
                uniquingKeysWith: { $1 }
            )
            let flags = Set(own.compactMap { $0.hasPrefix("--") ? String($0.dropFirst(2).prefix { $0 != "=" }) : nil })
            let configuration = try options.serverConfiguration()
            // What `serve` checks before it listens: the TLS files load, and the key belongs to the certificate.
            if let tls = configuration.tls {
                do { try TLSFilesError.check(tls) } catch { throw CommandFailure("\(error)") }
            }
            for (name, value) in options.settingValues {
                let source = flags.contains(name) ? "flag" : fromSources[name] ?? "default"
                output("\(name) = \(name == "postgres-url" ? Self.redacted(value) : value)  (\(source))")
            }
            output("ok: serve would listen on \(configuration.tls == nil ? "http" : "https")://\(configuration.host):\(configuration.port)")
        }
    }

    /// A database URL without its password.
    static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "redacted"
        return components.string ?? "(a URL with a password)"
    }
}
