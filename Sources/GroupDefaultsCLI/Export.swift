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
                --format json writes the lossless typed JSON (dates to the microsecond). XML keeps dates \
                to the second, and refuses a string or key holding a character XML 1.0 cannot hold \
                (U+0000 to U+001F but tab, line feed and carriage return; U+FFFE, U+FFFF), naming it: \
                nothing is written.

                Example: groupdefaults export group.com.example.chat backup.plist
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The file to write, or - for stdout.") var path: String
        @Option(name: .long, help: "xml, binary, openStep or json.") var format: PropertyListFormat?

        func run() throws {
            try perform {
                let format = format ?? (path == "-" ? .xml : .binary)
                let entries = try contents(of: options.open(suite))
                let data: Data
                do {
                    data = try PropertyListValue.propertyListData(entries: entries, format: format)
                } catch let error as PropertyListFormatError where !error.formatsThatHoldIt.isEmpty {
                    // Nothing is written: name the option that writes the suite whole.
                    let options = error.formatsThatHoldIt.map { "--format \($0.rawValue)" }.joined(separator: " or ")
                    throw CommandFailure("\(error) (export with \(options))")
                }
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
