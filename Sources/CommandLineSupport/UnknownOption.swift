import ArgumentParser
import Foundation
import GroupDefaultsWire

/// An option the command line names that its command does not have (or a subcommand its command
/// group does not have), found from the command's own description (ArgumentParser's JSON dump of
/// its tree), with the nearest one it has: a tool answers `unknown option '--sever'; did you mean
/// '--server'?` instead of the first thing ArgumentParser missed (often a required option that the
/// typo was meant to be), and `unknown command 'tokn'; did you mean 'token'?`.
struct UnknownOption: Equatable {
    /// What was mistyped: `option` or `command`.
    var kind = "option"
    /// The word as typed, `--sever`.
    var typed: String
    /// The nearest option (or command) there is, `--server`, if one is close.
    var suggestion: String?
    /// For a command none is close to: the commands there are.
    var choices: [String] = []

    /// The sentence: `unknown option '--sever'; did you mean '--server'?`, or `unknown command
    /// 'delete' (the commands: create, list, revoke)`.
    var message: String {
        if let suggestion { return "unknown \(kind) '\(typed)'; did you mean '\(suggestion)'?" }
        if !choices.isEmpty { return "unknown \(kind) '\(typed)' (the commands: \(choices.joined(separator: ", ")))" }
        return "unknown \(kind) '\(typed)'"
    }

    /// The first `--name` (before a `--` that ends the options) that the command `arguments` run
    /// does not take, in `root`'s tree of commands; or, first, a word where a command group's
    /// subcommand goes that is near one of them.
    static func first(in arguments: [String], root: any ParsableCommand.Type) -> UnknownOption? {
        // `_dumpHelp()` is the JSON `--experimental-dump-help` prints (Tools/package makes the man
        // pages from it): every command, and every option's names, hidden ones included.
        guard let tree = CommandTree(root) else { return nil }
        var command = tree.command
        var rest = arguments[...]
        // The subcommands named first (`token create`), else the default one.
        while let word = rest.first, !word.hasPrefix("-"),
            let sub = command.subcommands?.first(where: { $0.commandName == word || ($0.aliases ?? []).contains(word) })
        {
            command = sub
            rest = rest.dropFirst()
        }
        if let word = rest.first, !word.hasPrefix("-"), let subcommands = command.subcommands {
            let names = subcommands.map(\.commandName).filter { $0 != "help" }
            if let meant = Spelling.nearest(to: word, among: names) {
                return UnknownOption(kind: "command", typed: word, suggestion: meant)
            }
            // A group without a default command takes no other word: the word is a command not there
            // (rather than whatever ArgumentParser missed next, an option of another command).
            if command.defaultSubcommand == nil { return UnknownOption(kind: "command", typed: word, choices: names) }
        }
        if let name = command.defaultSubcommand, rest.first?.hasPrefix("-") ?? true,
            let sub = command.subcommands?.first(where: { $0.commandName == name })
        {
            command = sub
        }
        let known = command.longOptions.union(["--help", "--version", "--generate-completion-script", "--experimental-dump-help"])
        for argument in rest {
            if argument == "--" { break }
            guard argument.hasPrefix("--") else { continue }
            let option = String(argument.prefix { $0 != "=" })
            if known.contains(option) { continue }
            let suggestion = Spelling.nearest(to: String(option.dropFirst(2)), among: known.map { String($0.dropFirst(2)) })
            return UnknownOption(typed: option, suggestion: suggestion.map { "--" + $0 })
        }
        return nil
    }
}
