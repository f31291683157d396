import ArgumentParser

@main
struct GroupDefaultsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groupdefaults",
        abstract: "Inspect and edit GroupDefaults suites: the verbs of macOS `defaults`, and more."
    )
}
