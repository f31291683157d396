import ArgumentParser
import CommandLineSupport
import GroupDefaults
import GroupDefaultsWire

@main
struct GroupDefaultsCommand: ParsableCommand {
    /// Parses and runs a verb; a command line that does not parse is one line on stderr (help and
    /// completion scripts print as usual).
    static func main() {
        main(
            reportingAs: groupdefaults,
            helpHint: "see `groupdefaults help`",
            arguments: GlobalDomainFlag.rewritten(Array(CommandLine.arguments.dropFirst()))
        )
    }

    static let configuration = CommandConfiguration(
        commandName: "groupdefaults",
        abstract: "Inspect and edit GroupDefaults suites: the verbs of macOS `defaults`, and more.",
        discussion: """
            A SUITE is a suite name, found in --directory, else $GROUPDEFAULTS_DIR, else \
            $XDG_DATA_HOME/groupdefaults, else ~/.local/share/groupdefaults; or the path of a .lmdb file; \
            or -g for the global domain (the suite NSGlobalDomain, which every program reads after its \
            own suites). Reading never creates a suite. Exit status: 0 on success, 1 on errors and for a command \
            line that does not parse (one line on stderr).
            """,
        version: packageVersion,
        subcommands: [
            Domains.self, Read.self, ReadType.self, Write.self, Rename.self, Delete.self, Find.self,
            Export.self, Import.self, Watch.self, Increment.self, Info.self, Verify.self, Backup.self,
            Restore.self, Managed.self,
        ]
    )
}
