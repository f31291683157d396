import ArgumentParser

/// `groupdefaults-server`: serve the sync API, or manage its tokens.
@main
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groupdefaults-server",
        abstract: "The GroupDefaults sync server.",
        subcommands: [Serve.self, TokenCommand.self],
        defaultSubcommand: Serve.self)
}
