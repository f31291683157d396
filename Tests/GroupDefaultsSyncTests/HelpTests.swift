import Foundation
import TestSupport
import Testing

@testable import groupdefaults_sync

/// `groupdefaults-sync`'s help against what it does (`HelpCheck`: every command from the tool's
/// own description).
@Suite struct SyncHelpTests {
    static let check = HelpCheck(tool: "groupdefaults-sync", root: SyncCommand.self)

    @Test("every command's help matches what the parser and the README hold", arguments: try check.commands())
    func helpMatchesBehaviour(_ command: HelpCheck.Command) throws {
        try Self.check.check(command, knownOptions: HelpCheck.knownOptions, headings: try HelpCheck.readmeHeadings())
    }
}
