import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire
import PropertyListFormats

extension GroupDefaultsCommand {
    struct Managed: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the settings an administrator forces, and from which file.",
            discussion: """
                An administrator forces settings with files that programs read above everything else: \
                DIR/SUITE.plist for every user and DIR/users/USER/SUITE.plist for one user (winning key by \
                key), in any property-list format, where DIR is /etc/groupdefaults/managed (or \
                $GROUPDEFAULTS_MANAGED_DIR). Programs read the managed value whatever the suite holds, and \
                `objectIsForced(forKey:)` is true for it; a write is stored but shadowed (`write` warns). \
                A file that does not parse, is writable by others than its owner, or holds a key or value \
                a suite cannot store is ignored whole (and the log says so). Prints one line per forced \
                key, SUITE KEY VALUE (FILE), and one per ignored file, SUITE ignored: FILE: REASON.

                Example: groupdefaults managed group.com.example.chat
                """
        )

        @Argument(help: "Only this suite (by default every suite with a managed settings file).") var suite: String?
        @Flag(name: .long, help: "Print JSON lines.") var json = false

        func run() throws {
            try perform {
                if let suite {
                    try SuiteOptions.checkNotAnOption(suite)
                    if suite.isEmpty || suite.contains("/") { throw CommandFailure("\(printable(suite)) is not a suite name") }
                }
                let directory = SharedDefaults.Configuration.defaultManagedDirectory
                if !FileManager.default.fileExists(atPath: directory) {
                    groupdefaults.printError("note: \(directory) does not exist: no setting is managed")
                }
                for name in suite.map({ [$0] }) ?? SharedDefaults.managedSuiteNames(directory: directory) {
                    let report = SharedDefaults.managedSettings(forSuite: name, directory: directory)
                    for setting in report.settings {
                        if json {
                            let object: [String: PropertyListValue] = [
                                "suite": .string(name), "key": .string(setting.key), "value": setting.value, "file": .string(setting.file),
                            ]
                            output(Watch.oneLineJSON(.dictionary(object)))
                        } else {
                            output("\(printable(name)) \(printable(setting.key)) \(ValueText.oneLine(setting.value)) (\(printable(setting.file)))")
                        }
                    }
                    for ignored in report.ignoredFiles {
                        if json {
                            output(
                                Watch.oneLineJSON(
                                    .dictionary(["suite": .string(name), "file": .string(ignored.file), "ignored": .string(ignored.reason)])
                                )
                            )
                        } else {
                            output("\(printable(name)) ignored: \(printable(ignored.file)): \(printable(ignored.reason))")
                        }
                    }
                }
            }
        }
    }
}
