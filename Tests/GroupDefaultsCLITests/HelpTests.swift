import Foundation
import GroupDefaults
import TestSupport
import Testing

@testable import GroupDefaultsCLI

/// `groupdefaults`' help against what it does (`HelpCheck`: every command from the tool's own
/// description), and the sets its texts list against the code's own.
@Suite struct HelpTests {
    static let check = HelpCheck(tool: "groupdefaults", root: GroupDefaultsCommand.self)

    @Test("every command's help matches what the parser and the README hold", arguments: try await check.commands())
    func helpMatchesBehaviour(_ command: HelpCheck.Command) async throws {
        try await Self.check.check(command, knownOptions: await HelpCheck.knownOptions, headings: try HelpCheck.readmeHeadings())
    }

    /// `watch` names every kind of change it prints.
    @Test func watchListsEveryKind() async throws {
        let help = try await runProcess(Tool.executable, ["watch", "--help"]).stdout
        let kinds = Set(SharedDefaults.Change.Kind.allCases.map(\.rawValue))
        #expect(HelpCheck.listed(in: help, after: "kind (", upTo: ")") == kinds, "\(help)")
    }

    /// `increment` takes one number, a negative one too, as its usage shows (`[<by>]`; it showed
    /// `[<by> ...]`, and a second number was refused).
    @Test func incrementTakesOneNumber() async throws {
        let help = try await runProcess(Tool.executable, ["increment", "--help"]).stdout
        let usage = try #require(HelpCheck.usage(in: help))
        #expect(usage.hasSuffix(" <suite> <key> [<by>]"), "\(usage)")
        try await withSandbox { sandbox in
            #expect(try await sandbox.ok("increment", "s", "n", "-3") == "-3\n")
            #expect(try await sandbox.ok("increment", "s", "n") == "-2\n")
            #expect(try await sandbox.ok("increment", "s", "n", "5") == "3\n")
            expectOneLineFailure(try await sandbox.run("increment", "s", "n", "1", "2"), mentioning: ["one whole number", "'1 2'"])
            expectOneLineFailure(try await sandbox.run("increment", "s", "n", "-1", "-2"), mentioning: ["one whole number", "'-1 -2'"])
            #expect(try await sandbox.ok("read", "s", "n") == "3\n")
        }
    }

    /// The completion shells the guide's page on the tool (docs/guide/cli.md) promises are the ones
    /// made; another is refused in one line that names them, not as an unknown option.
    @Test func completionShells() async throws {
        let page = try String(contentsOf: HelpCheck.repository.appendingPathComponent("docs/guide/cli.md"), encoding: .utf8)
        let words = page.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let promised = try #require(
            HelpCheck.listed(in: words.replacingOccurrences(of: "|", with: ", "), after: "--generate-completion-script ", upTo: "`")
        )
        for shell in promised {
            let script = try await runProcess(Tool.executable, ["--generate-completion-script", shell])
            #expect(script.succeeded && !script.stdout.isEmpty, "\(shell): \(script)")
        }
        for arguments in [
            ["--generate-completion-script", "tcsh"], ["--generate-completion-script=tcsh"], ["read", "--generate-completion-script", "tcsh"],
        ] {
            let refused = try await runProcess(Tool.executable, arguments)
            expectOneLineFailure(refused, mentioning: ["tcsh", "completions are made for"], "\(arguments)")
            #expect(!refused.stderr.contains("unknown option"), "\(refused)")
            #expect(HelpCheck.listed(in: refused.stderr, after: "made for ", upTo: " only") == promised, "\(refused)")
        }
    }
}

/// Every README section a message of the code cites by its title (an error's recipe, a help text
/// built at run time) is a heading of the README; every page of docs/ it names exists, and every
/// section of one it cites (`docs/guide/operating.md, "Backups and restore"`) is a heading of it.
@Test func everyREADMESectionTheCodeCitesExists() throws {
    let headings = try HelpCheck.readmeHeadings()
    let sources = HelpCheck.repository.appendingPathComponent("Sources")
    let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
    var cited = 0
    for file in files {
        let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
        let code = text.split(separator: "\n").filter { !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//") }
            .joined(separator: " ").replacingOccurrences(of: "\\\"", with: "\"")
        for case .title(let title) in HelpCheck.readmeCitations(in: code) {
            cited += 1
            #expect(headings.contains(title), "\(file) cites the README's \"\(title)\", which has no such heading")
        }
        for citation in HelpCheck.docsCitations(in: code) {
            let page = HelpCheck.repository.appendingPathComponent(citation.file)
            #expect(FileManager.default.fileExists(atPath: page.path), "\(file) names \(citation.file), which does not exist")
            guard let title = citation.title else { continue }
            cited += 1
            let pageHeadings = (try? HelpCheck.headings(of: citation.file)) ?? []
            #expect(pageHeadings.contains(title), "\(file) cites \(citation.file), \"\(title)\", which has no such heading")
        }
    }
    #expect(cited > 0)
}

/// What `HelpCheck` reads in a help text, on texts it must find fault with.
@Suite struct HelpCheckReadingTests {
    @Test func usagesPositionals() {
        typealias P = HelpCheck.Positional
        #expect(
            HelpCheck.positionals(inUsage: "[--directory <DIR>] <suite> <key> [<by> ...]")
                == [
                    P(name: "suite", isOptional: false, isRepeating: false), P(name: "key", isOptional: false, isRepeating: false),
                    P(name: "by", isOptional: true, isRepeating: true),
                ]
        )
        #expect(
            HelpCheck.positionals(inUsage: "[--exclude <PATTERN> ...] [<suite>] --server <URL> <ids> ...")
                == [P(name: "suite", isOptional: true, isRepeating: false), P(name: "ids", isOptional: false, isRepeating: true)]
        )
    }

    @Test func mentionsAndCitations() {
        #expect(HelpCheck.optionMentions(in: "kept --audit-days days; `--since N`, not x--y or --") == ["--audit-days", "--since"])
        #expect(
            HelpCheck.readmeCitations(in: #"(README: "Exporting an account") and the README's recipe"#)
                == [.title("Exporting an account"), .untitled("README's recipe")]
        )
        #expect(HelpCheck.docsFiles(in: "its schema: docs/account-export.md (README).") == ["docs/account-export.md"])
        #expect(
            HelpCheck.docsCitations(in: #"docs/account-export.md (the recipe in docs/guide/operating.md, "Backups and restore"); x/docs/y.md"#)
                == [
                    .init(file: "docs/account-export.md", title: nil),
                    .init(file: "docs/guide/operating.md", title: "Backups and restore"),
                ]
        )
    }
}
