import Foundation
import GroupDefaultsWire
import TestSupport
import Testing

@testable import groupdefaults_sync

/// `groupdefaults-sync`'s help against what it does (`HelpCheck`: every command from the tool's
/// own description).
@Suite struct SyncHelpTests {
    static let check = HelpCheck(tool: "groupdefaults-sync", root: SyncCommand.self)

    @Test("every command's help matches what the parser and the README hold", arguments: try await check.commands())
    func helpMatchesBehaviour(_ command: HelpCheck.Command) async throws {
        try await Self.check.check(command, knownOptions: await HelpCheck.knownOptions, headings: try HelpCheck.readmeHeadings())
    }

    /// `share --role` lists every role an invitation gives (`SuiteRole.invitable`), and each is taken.
    @Test func shareListsEveryRole() async throws {
        let help = try await runProcess(BuiltExecutable.url("groupdefaults-sync"), ["share", "--help"]).stdout
        let roles = Set(SuiteRole.invitable.map(\.rawValue))
        #expect(HelpCheck.listed(in: help, after: "What the invited account may do: ", upTo: ".") == roles, "\(help)")
        for role in roles {
            #expect(Self.check.parse(["share", "s", "--role", role]) == nil, "\(role)")
        }
    }
}
