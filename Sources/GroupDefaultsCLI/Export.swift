public import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import PropertyListFormats

extension PropertyListFormat: ExpressibleByArgument {}

extension GroupDefaultsCommand {
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a suite to a file, or to stdout.",
            discussion: """
                To a path, a binary property list; to -, an XML property list, as `defaults export` does. \
                --format json writes the lossless typed JSON.

                Example: groupdefaults export group.com.example.chat backup.plist
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The file to write, or - for stdout.") var path: String
        @Option(name: .long, help: "xml, binary, openStep or json.") var format: PropertyListFormat?

        func run() throws {
            try perform {
                let data = try PropertyListValue.propertyListData(
                    entries: try contents(of: options.open(suite)),
                    format: format ?? (path == "-" ? .xml : .binary)
                )
                if path == "-" {
                    FileHandle.standardOutput.write(data)
                } else {
                    do {
                        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
                    } catch {
                        throw CommandFailure("cannot write \(path): \((error as NSError).localizedDescription)")
                    }
                }
            }
        }
    }
}
