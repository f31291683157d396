import Foundation
import GroupDefaultsServer
import TestSupport
import Testing

@testable import groupdefaults_server

/// `groupdefaults-server`'s help against what it does (`HelpCheck`: every command from the tool's
/// own description), and the sets its texts list against the code's own.
@Suite struct ServerHelpTests {
    static let check = HelpCheck(tool: "groupdefaults-server", root: ServerCommand.self)

    @Test("every command's help matches what the parser and the README hold", arguments: try await check.commands())
    func helpMatchesBehaviour(_ command: HelpCheck.Command) async throws {
        try await Self.check.check(command, knownOptions: await HelpCheck.knownOptions, headings: try HelpCheck.readmeHeadings())
    }

    /// `audit`'s "Recorded" list is every act the log records.
    @Test func auditListsEveryAct() async throws {
        let help = try await runProcess(BuiltExecutable.url("groupdefaults-server"), ["audit", "--help"]).stdout
        let acts = Set(AuditRecord.Act.allCases.map(\.rawValue))
        #expect(HelpCheck.listed(in: help, after: "Recorded, by the name each record gives its act: ", upTo: ". ") == acts, "\(help)")
    }
}
