package import ArgumentParser
package import Foundation
package import Testing

/// What a tool's help promises, checked against what it does: every command of the tool, found in
/// ArgumentParser's description of it (`--experimental-dump-help`, so that a new command, option
/// or argument is checked without a list to keep). For each command, its `--help` as the real
/// executable prints it:
///
/// - exits 0 and shows a `USAGE:` line;
/// - every option and flag it lists is taken by the parser (given with a value, it is never an
///   unknown option), and so is every value it lists for one;
/// - the usage's arity is the truth: an argument shown repeatable (`...`) takes two values, and
///   one more value than the usage shows is refused;
/// - every `--option` its text names is an option of the tools (this one or another);
/// - every README section it cites ("README: \"Title\"", "the README's \"Title\"") is a heading
///   of the README, every `docs/…` file it names exists, and every section of one it cites
///   (`docs/guide/operating.md, "Backups and restore"`) is a heading of that file.
///
/// The parser is the tool's own command type, run in this process (`parseAsRoot`: parsing and
/// `validate()`, never `run()`), so that no command does anything while its options are tried.
/// What it cannot see: a count a command checks only in `run()` (check it in `validate()`), and an
/// option or argument count whose plausible values (`1`, a listed value, the default) the
/// command's `validate()` refuses first (ArgumentParser validates before it looks for unknown
/// options and extra values); the values are chosen to get past `validate()` where one option's
/// value does.
package struct HelpCheck: Sendable {
    /// The executable's name (`groupdefaults`).
    package let tool: String
    /// Its root command type, whose parser the options are tried with.
    package let root: any ParsableCommand.Type

    /// A check of `tool`, whose root command type is `root`.
    package init(tool: String, root: any ParsableCommand.Type) {
        self.tool = tool
        self.root = root
    }

    /// One command of the tool as ArgumentParser describes it.
    package struct Command: Sendable, CustomTestStringConvertible {
        /// The words after the tool's name (`["token", "create"]`; the root is `[]`).
        package var path: [String]
        /// Its options and flags shown in its help: names, and the values listed for each.
        package var options: [Option]
        /// Whether it is a group of commands (its arguments are subcommands).
        package var isGroup: Bool
        /// Its positionals its help does not show: whether each is repeating.
        package var hiddenPositionals: [Bool]

        /// The command line, for test names.
        package var testDescription: String { path.isEmpty ? "(root)" : path.joined(separator: " ") }
    }

    /// An option or flag a command's help lists.
    package struct Option: Sendable {
        /// Its names as typed (`--format`, `-f`).
        package var names: [String]
        /// Whether it takes a value (an option) or not (a flag).
        package var takesValue: Bool
        /// Whether a command line must give it.
        package var isRequired: Bool
        /// The values its help lists, if it lists them.
        package var choices: [String]
        /// Its default, as shown.
        package var defaultValue: String?

        /// A value the option can plausibly take: a listed one, its default, or `1`.
        var plausibleValue: String { choices.first ?? defaultValue ?? "1" }
    }

    /// The README, and the folder it is in (the repository).
    package static let repository: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The heading texts of the README (without their `#`s).
    package static func readmeHeadings() throws -> Set<String> {
        try headings(of: "README.md")
    }

    /// The heading texts (without their `#`s) of a Markdown file of the repository: `file` is its
    /// path from the repository (`docs/guide/operating.md`).
    package static func headings(of file: String) throws -> Set<String> {
        let text = try String(contentsOf: repository.appendingPathComponent(file), encoding: .utf8)
        return Set(
            text.split(separator: "\n").filter { $0.hasPrefix("#") }.map {
                $0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            }
        )
    }

    /// Every command of the tool, from its description.
    package func commands() async throws -> [Command] {
        try await Self.commands(of: tool)
    }

    /// Every command of `tool`, from its description.
    package static func commands(of tool: String) async throws -> [Command] {
        let dump = try await runProcess(BuiltExecutable.url(tool), ["--experimental-dump-help"])
        let tree = try JSONDecoder().decode(Tree.self, from: dump.stdoutData)
        return walk(tree.command, path: [])
    }

    /// Every long option of any command of the three tools, and ArgumentParser's own: what a help
    /// text may name.
    package static var knownOptions: Set<String> {
        get async { await knownOptionsOnce.value }
    }

    private static let knownOptionsOnce = Task {
        var names: [String] = []
        for tool in ["groupdefaults", "groupdefaults-server", "groupdefaults-sync"] {
            let dump = try? await runProcess(BuiltExecutable.url(tool), ["--experimental-dump-help"])
            let tree = dump.flatMap { try? JSONDecoder().decode(Tree.self, from: $0.stdoutData) }
            names += tree.map { walk($0.command, path: []).flatMap { $0.options.flatMap(\.names) } } ?? []
        }
        return Set(names.filter { $0.hasPrefix("--") }).union(["--help", "--version", "--generate-completion-script"])
    }

    private static func walk(_ command: Tree.Command, path: [String]) -> [Command] {
        let options = (command.arguments ?? []).filter { $0.kind != "positional" && $0.shouldDisplay }
            .map { argument in
                Option(
                    names: (argument.names ?? []).map { ($0.kind == "long" ? "--" : "-") + $0.name },
                    takesValue: argument.kind == "option",
                    isRequired: !argument.isOptional,
                    choices: argument.allValues ?? [],
                    defaultValue: argument.defaultValue
                )
            }
            .filter { !$0.names.contains("--help") && !$0.names.contains("--version") }
        let subcommands = (command.subcommands ?? []).filter { $0.commandName != "help" }
        let hidden = (command.arguments ?? []).filter { $0.kind == "positional" && !$0.shouldDisplay }.map(\.isRepeating)
        return [Command(path: path, options: options, isGroup: !subcommands.isEmpty, hiddenPositionals: hidden)]
            + subcommands.flatMap { walk($0, path: path + [$0.commandName]) }
    }

    /// What the parser makes of `arguments`: nil if it takes them, else its message.
    package func parse(_ arguments: [String]) -> String? {
        do {
            _ = try root.parseAsRoot(arguments)
            return nil
        } catch {
            return root.message(for: error)
        }
    }

    /// Runs every check on `command`, recording each failure as a test issue; `knownOptions` are the
    /// options any text may name (those of every tool), `headings` the README's.
    package func check(
        _ command: Command,
        knownOptions: Set<String>,
        headings: Set<String>,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let name = ([tool] + command.path).joined(separator: " ")
        let result = try await runProcess(BuiltExecutable.url(tool), command.path + ["--help"])
        #expect(result.succeeded, "\(name) --help: \(result)", sourceLocation: sourceLocation)
        let help = result.stdout
        let words = help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        let usage = try #require(Self.usage(in: help), "\(name) --help shows no USAGE line:\n\(help)", sourceLocation: sourceLocation)
        #expect(usage.hasPrefix(name), "\(name): the usage names another command: \(usage)", sourceLocation: sourceLocation)

        // A usage written by hand (`increment`'s) still shows every option.
        if !usage.contains("<options>") {
            for option in command.options where !option.names.contains(where: { usage.contains($0) }) {
                Issue.record("\(name): the usage does not show \(option.names[0]): \(usage)", sourceLocation: sourceLocation)
            }
        }

        // The positionals as the usage shows them, each given "1"; required options a plausible value.
        let positionals = Self.positionals(inUsage: String(usage.dropFirst(name.count)))
        let required = command.options.filter(\.isRequired).flatMap { option in
            [option.names.first { $0.hasPrefix("--") } ?? option.names[0]] + (option.takesValue ? [option.plausibleValue] : [])
        }
        // A hidden argument is taken too (an old spelling kept working), but never shown; a hidden
        // catch-all (`increment`'s negative amount) is left to the command's `validate()`.
        let all = positionals.map { _ in "1" } + Array(repeating: "1", count: command.hiddenPositionals.filter { !$0 }.count)
        // ArgumentParser runs `validate()` before it looks for unknown options and extra values:
        // the values must get past it. If the plausible ones do not, the first option whose
        // plausible value makes them do is added.
        var prefix = command.path + required
        if !command.isGroup, parse(prefix + all) != nil,
            let option = command.options.first(where: {
                !$0.isRequired && $0.takesValue && parse(prefix + [$0.names[0], $0.plausibleValue] + all) == nil
            })
        {
            prefix += [option.names[0], option.plausibleValue]
        }
        let given = command.isGroup ? [] : all

        // Every option and flag listed is taken, and every value listed for one: all at once if
        // they parse together, else one by one.
        let together = command.options.flatMap { [$0.names[0]] + ($0.takesValue ? [$0.plausibleValue] : []) }
        let allTaken = !command.options.isEmpty && parse(prefix + together + given) == nil
        for option in command.options {
            let values: [String?] = option.takesValue ? (option.choices.isEmpty ? [option.plausibleValue] : option.choices) : [nil]
            for spelling in option.names {
                for value in values where !(allTaken && spelling == option.names[0] && value == values[0]) {
                    let valueWords: [String] = value.map { [$0] } ?? []
                    let message = parse(prefix + [spelling] + valueWords + given) ?? ""
                    #expect(
                        !message.localizedCaseInsensitiveContains("unknown option"),
                        "\(name) --help lists \(spelling), which the parser does not take: \(message)",
                        sourceLocation: sourceLocation
                    )
                    if let value, !option.choices.isEmpty {
                        #expect(
                            !message.contains("'\(value)' is invalid"),
                            "\(name) --help lists \(value) for \(spelling), which the parser refuses: \(message)",
                            sourceLocation: sourceLocation
                        )
                    }
                }
            }
        }

        // The arity: a repeatable argument takes two values; one more value than shown is refused.
        if !command.isGroup {
            let baseline = parse(prefix + all)
            for (index, positional) in positionals.enumerated() where positional.isRepeating {
                var twice = all
                twice.insert("1", at: index)
                let message = parse(prefix + twice) ?? ""
                #expect(
                    !message.contains("Unexpected argument") && message.isEmpty == (baseline == nil),
                    "\(name): the usage shows <\(positional.name)> ... but two values are refused: \(message)",
                    sourceLocation: sourceLocation
                )
            }
            // Decided only where the values get past `validate()`.
            if positionals.last?.isRepeating != true, baseline == nil {
                let extra = parse(prefix + all + ["1"])
                #expect(
                    extra != nil,
                    "\(name): the usage shows \(positionals.count) argument(s), but one more is taken: \(usage)",
                    sourceLocation: sourceLocation
                )
            }
        }

        // Every option the text names exists.
        for mention in Self.optionMentions(in: words) where !knownOptions.contains(mention) {
            Issue.record("\(name) --help names \(mention), which no command of the tools has", sourceLocation: sourceLocation)
        }
        // Every README section it cites is a heading; every docs/ file it names exists, and every
        // section of one it cites is a heading of that file.
        for cited in Self.readmeCitations(in: words) {
            switch cited {
            case .title(let title):
                #expect(
                    headings.contains(title),
                    "\(name) --help cites the README's \"\(title)\", which has no such heading",
                    sourceLocation: sourceLocation
                )
            case .untitled(let context):
                Issue.record("\(name) --help cites the README without naming a section: …\(context)…", sourceLocation: sourceLocation)
            }
        }
        for file in Self.docsFiles(in: words) {
            #expect(
                FileManager.default.fileExists(atPath: Self.repository.appendingPathComponent(file).path),
                "\(name) --help names \(file), which does not exist",
                sourceLocation: sourceLocation
            )
        }
        for citation in Self.docsCitations(in: words) {
            guard let title = citation.title else { continue }
            let pageHeadings = (try? Self.headings(of: citation.file)) ?? []
            #expect(
                pageHeadings.contains(title),
                "\(name) --help cites \(citation.file), \"\(title)\", which has no such heading",
                sourceLocation: sourceLocation
            )
        }
    }

    /// The usage line of a help text, its wrapped lines joined: `groupdefaults read [--json] <suite>`.
    package static func usage(in help: String) -> String? {
        guard let start = help.range(of: "USAGE: ") else { return nil }
        let rest = help[start.upperBound...]
        let paragraph = rest.components(separatedBy: "\n\n").first ?? String(rest)
        return paragraph.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// A positional argument as a usage shows it.
    package struct Positional: Equatable, Sendable {
        /// Its value name.
        package var name: String
        /// Shown in brackets.
        package var isOptional: Bool
        /// Shown with `...`.
        package var isRepeating: Bool

        /// A positional `name`.
        package init(name: String, isOptional: Bool, isRepeating: Bool) {
            self.name = name
            self.isOptional = isOptional
            self.isRepeating = isRepeating
        }
    }

    /// The positionals of a usage after the command's name: `<suite>`, `[<key>]`, `[<keys> ...]`
    /// (options, bracketed or not, left out).
    package static func positionals(inUsage usage: String) -> [Positional] {
        let tokens = usage.split(separator: " ").map(String.init)
        var result: [Positional] = []
        var index = 0
        while index < tokens.count {
            let token = tokens[index]
            if token.hasPrefix("[-") {  // an optional option: up to its closing bracket
                var depth = 0
                repeat {
                    depth += tokens[index].filter { $0 == "[" }.count - tokens[index].filter { $0 == "]" }.count
                    index += 1
                } while depth > 0 && index < tokens.count
            } else if token.hasPrefix("-") {  // a required option and its value
                index += 1
                if index < tokens.count, tokens[index].hasPrefix("<") { index += 1 }
                if index < tokens.count, tokens[index].hasPrefix("...") { index += 1 }
            } else if token.hasPrefix("<") || token.hasPrefix("[<") {
                let name = String(token.drop { $0 == "[" || $0 == "<" }.prefix { $0 != ">" })
                let next = index + 1 < tokens.count ? tokens[index + 1] : ""
                let repeating = token.contains("...") || next.hasPrefix("...")
                result.append(Positional(name: name, isOptional: token.hasPrefix("["), isRepeating: repeating))
                index += next.hasPrefix("...") ? 2 : 1
            } else {
                index += 1
            }
        }
        return result
    }

    /// The `--options` a text names (`--since`, `--audit-days`), in the order it names them.
    package static func optionMentions(in text: String) -> [String] {
        var found: [String] = []
        var rest = text[...]
        while let range = rest.range(of: "--") {
            let before = rest[..<range.lowerBound].last
            let name = rest[range.upperBound...].prefix { $0.isLetter || $0.isNumber || $0 == "-" }
            if before.map({ !$0.isLetter && !$0.isNumber && $0 != "-" }) ?? true, let first = name.first, first.isLetter {
                found.append("--" + name.trimmingCharacters(in: CharacterSet(charactersIn: "-")))
            }
            rest = rest[range.upperBound...].dropFirst(name.count)
        }
        return found
    }

    /// A README citation in a help text.
    package enum Citation: Equatable, Sendable {
        /// A section by its title.
        case title(String)
        /// The README without a section: the words that follow.
        case untitled(String)
    }

    /// Every citation of the README in a text: the quoted title that follows it (`README:
    /// "Title"`, `the README's "Title" recipe`), or none.
    package static func readmeCitations(in text: String) -> [Citation] {
        var found: [Citation] = []
        var rest = text[...]
        while let range = rest.range(of: "README") {
            let after = rest[range.upperBound...].prefix(12)
            if let quote = after.firstIndex(of: "\""), case let titleStart = text.index(after: quote),
                let end = text[titleStart...].firstIndex(of: "\"")
            {
                found.append(.title(String(text[titleStart..<end])))
            } else {
                found.append(.untitled(String(rest[range.lowerBound...].prefix(60))))
            }
            rest = rest[range.upperBound...]
        }
        return found
    }

    /// A page of `docs/` a text names, and the section of it that it cites, if any.
    package struct DocsCitation: Equatable, Sendable {
        /// The page's path from the repository (`docs/guide/operating.md`).
        package var file: String
        /// The quoted title that follows the path (`docs/guide/operating.md, "Backups and
        /// restore"`), or nil when none does.
        package var title: String?

        /// The page `file`, cited at the section `title` (nil: the page as a whole).
        package init(file: String, title: String?) {
            self.file = file
            self.title = title
        }
    }

    /// Every `docs/…` page a text names, each with the section cited after it as `, "Title"`.
    package static func docsCitations(in text: String) -> [DocsCitation] {
        var found: [DocsCitation] = []
        var rest = text[...]
        while let range = rest.range(of: "docs/") {
            let before = rest[..<range.lowerBound].last
            let path = rest[range.lowerBound...].prefix { !$0.isWhitespace && !",;()\"".contains($0) }
            rest = rest[path.endIndex...]
            // A path that starts here, not the end of another (`Sources/x/docs/…`).
            guard before.map({ $0.isWhitespace || "(`\"".contains($0) }) ?? true else { continue }
            let file = String(path).trimmingCharacters(in: CharacterSet(charactersIn: ".:`"))
            var title: String?
            if rest.hasPrefix(", \""), let end = rest.dropFirst(3).firstIndex(of: "\"") {
                title = String(rest[rest.index(rest.startIndex, offsetBy: 3)..<end])
            }
            found.append(DocsCitation(file: file, title: title))
        }
        return found
    }

    /// The `docs/…` files a text names.
    package static func docsFiles(in text: String) -> [String] {
        text.split(whereSeparator: { $0 == " " || $0 == "(" || $0 == ")" || $0 == ";" || $0 == "," }).compactMap { word in
            guard word.hasPrefix("docs/") else { return nil }
            return String(word.drop { $0 == "(" }.prefix { !",;)".contains($0) }).trimmingCharacters(in: CharacterSet(charactersIn: "."))
        }
    }

    /// The set a help text lists after `label`, up to `end`: `kind (set, removed, cleared)` read
    /// with label `kind (` and end `)` is `["set", "removed", "cleared"]` (", ", " and " and " or " separate).
    package static func listed(in help: String, after label: String, upTo end: String) -> Set<String>? {
        let words = help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        guard let start = words.range(of: label), let stop = words[start.upperBound...].range(of: end) else { return nil }
        let list = words[start.upperBound..<stop.lowerBound]
            .replacingOccurrences(of: " and ", with: ", ").replacingOccurrences(of: " or ", with: ", ")
        return Set(list.components(separatedBy: ", ").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }

    /// What this needs of ArgumentParser's description of a tool.
    private struct Tree: Decodable {
        struct Command: Decodable {
            var commandName: String
            var subcommands: [Command]?
            var arguments: [Argument]?
        }
        struct Argument: Decodable {
            var kind: String
            var isOptional: Bool
            var isRepeating: Bool
            var shouldDisplay: Bool
            var names: [Name]?
            var allValues: [String]?
            var defaultValue: String?
        }
        struct Name: Decodable {
            var kind: String
            var name: String
        }
        var command: Command
    }
}
