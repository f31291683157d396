import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import PropertyListFormats

extension HostApp {
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the group's settings, one `key = value` line each.",
            discussion: "Reading creates nothing: a group without settings shows `sound = (default)`."
        )

        @ParentCommand var app: HostApp

        func run() throws {
            let container = try app.group.container()
            var settings: [String: PropertyListValue] = [:]
            do {
                let defaults = try SharedDefaults(
                    existingSuiteName: container.groupIdentifier,
                    directory: container.preferencesDirectory
                )
                settings = try defaults.read { tx in
                    var values: [String: PropertyListValue] = [:]
                    for key in try tx.keys { values[key] = try tx.value(forKey: key) }
                    return values
                }
            } catch SharedDefaultsError.Code.suiteNotFound {
                // Nothing chosen yet.
            }
            if settings["sound"] == nil { output("sound = (default)") }
            for (key, value) in settings.sorted(by: { $0.key < $1.key }) {
                output("\(key) = \(oneLine(value))")
            }
        }
    }
}

/// A value on one line, as `defaults read` would print it.
func oneLine(_ value: PropertyListValue) -> String {
    value.openStepText.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
}
