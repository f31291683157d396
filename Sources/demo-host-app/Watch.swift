import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults

extension HostApp {
    struct Watch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the changes other processes make to the group's settings, as they happen.",
            discussion: """
                First prints `watching GROUP`, then one line per change (`sound = bell.aiff`, \
                `removed sound`, `cleared`); ends on SIGINT or SIGTERM.
                """
        )

        @ParentCommand var app: HostApp

        func run() throws {
            let defaults = try SharedDefaults(appGroup: app.group.container())
            let feed = try defaults.changeFeed()
            // Output is written line by line, unbuffered: ending at a signal loses nothing.
            exitOnInterruptOrTermination()
            output("watching \(app.group.group)")
            while let change = try feed.next() {
                switch change.kind {
                case .set: output("\(change.key) = \(change.value.map(oneLine) ?? "(removed since)")")
                case .removed: output("removed \(change.key)")
                case .cleared: output("cleared")
                case .reset: output("reset (this watcher fell behind the change log)")
                case .restored: output("restored (the suite was put back to its last durability point after a crash)")
                }
            }
        }
    }
}
