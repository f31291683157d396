import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults

/// The host app of the seed scenario: its settings screen, as a command line. The user chooses a
/// notification sound; the app copies it into the app group's `Library/Sounds` and stores its name
/// under `sound` in the group's suite, where the notification service reads it.
@main
struct HostApp: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-host-app",
        abstract: "The seed scenario's host app: choose a notification sound, show and watch the settings.",
        discussion: """
            The group container is ROOT/GROUP/: the settings are the suite GROUP in Library/Preferences, \
            the sounds are in Library/Sounds.

            Example: demo-host-app --group group.com.example.chat choose-sound ring.wav ~/ring.wav
            """,
        subcommands: [ChooseSound.self, Show.self, Watch.self]
    )

    @OptionGroup var group: GroupOptions

    /// Parses and runs a subcommand; any failure is one line on stderr and a non-zero exit status.
    static func main() {
        main(reportingAs: tool, helpHint: "see demo-host-app help")
    }

    /// How the app reports a failure: one line on stderr, exit status 1.
    static let tool = CommandLineTool(name: "demo-host-app") { error in
        (error as? SharedDefaultsError).map { CommandFailure($0.description) }
    }
}

/// The app group, from `--group` and `--root`.
struct GroupOptions: ParsableArguments {
    @Option(name: .long, help: "The app group identifier, e.g. group.com.example.chat.") var group: String
    @Option(name: .long, help: "The directory holding group containers (default: the suites' default directory).")
    var root: String?

    func container() throws -> AppGroupContainer {
        try AppGroupContainer(groupIdentifier: group, root: root.map { URL(fileURLWithPath: $0, isDirectory: true) })
    }
}
