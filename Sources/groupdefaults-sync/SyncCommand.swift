import ArgumentParser

@main
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "groupdefaults-sync")
}
