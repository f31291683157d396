import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsWire

extension GroupDefaultsCommand {
    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Check every page and record of a suite; exit 0 only when all are good.",
            discussion: "Example: groupdefaults verify group.com.example.chat"
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String

        func run() throws {
            try perform {
                let report: SharedDefaults.VerifyReport
                if let file = SuiteOptions.fileURL(suite) {
                    guard FileManager.default.fileExists(atPath: file.path) else { throw CommandFailure("no such file: \(suite)") }
                    report = SharedDefaults.verify(fileAt: file)
                } else {
                    report = try options.open(suite).verify()
                }
                if let problem = report.structureProblem { output("damaged structure: \(problem)") }
                for damaged in report.damagedKeys { output("damaged key \(printable(damaged.key)): \(printable(damaged.reason))") }
                guard report.isHealthy else {
                    throw CommandFailure("\(suite) is damaged (\(report.damagedKeys.count) of \(report.checkedKeys) keys)")
                }
                output("\(suite): \(report.checkedKeys) keys, all good")
            }
        }
    }
}
