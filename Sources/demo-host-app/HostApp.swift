import ArgumentParser
import Foundation
import DemoSupport
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
        mainReportingOneLineErrors(tool: "demo-host-app", helpHint: "see demo-host-app help")
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

func printError(_ message: String) {
    printError(message, tool: "demo-host-app")
}

/// Writes a line to stdout at once (so that `watch` reaches a pipe line by line).
func output(_ text: String) {
    FileHandle.standardOutput.write(Data((text + "\n").utf8))
}
