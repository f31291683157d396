import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import PropertyListFormats

extension GroupDefaultsCommand {
    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace a suite with the contents of a file, or of stdin.",
            discussion: """
                Reads a property list (XML, binary or old-style) or typed JSON whose top level is a \
                dictionary, and replaces the suite with it in one transaction: all or nothing.

                Example: groupdefaults import group.com.example.chat backup.plist
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String
        @Argument(help: "The file to read, or - for stdin.") var path: String

        func run() throws {
            try perform {
                let data: Data
                if path == "-" {
                    data = FileHandle.standardInput.readDataToEndOfFile()
                } else {
                    do {
                        data = try Data(contentsOf: URL(fileURLWithPath: path))
                    } catch {
                        throw CommandFailure("cannot read \(path): \((error as NSError).localizedDescription)")
                    }
                }
                // A suite's keys are their bytes: `decodeSuite` keeps "caf\u{E9}" and "cafe\u{301}" as two.
                let decoded: PropertyListTopLevel
                do {
                    decoded = try PropertyListValue.decodeSuite(propertyListData: data)
                } catch {
                    throw CommandFailure("\(path == "-" ? "stdin" : path) is not a property list or typed JSON: \(error)")
                }
                switch decoded {
                case .value(let value):
                    throw CommandFailure("the top level of \(path == "-" ? "stdin" : path) is a \(value.typeName), not a dictionary")
                case .entries(let entries):
                    try options.writing(suite, checking: entries.map { (key: $0.key, value: Optional($0.value)) }) {
                        try $0.replaceAll(with: entries)
                    }
                }
            }
        }
    }
}
