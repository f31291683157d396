import ArgumentParser
import Foundation
import Synchronization

/// The options that say where a command's data is (`--directory DIR`, `--data-dir DIR`,
/// `--config FILE`), as this process was given them: the commands a tool prints for a person to
/// run repeat them, so that a hint pasted as is acts on the same suites or store. Without them,
/// `restore it with groupdefaults-server restore --from nightly.backup` after a backup of
/// `--data-dir server` made a new empty store in the default folder and said it had restored.
///
/// Each tool's location options record themselves while the command line is parsed (their
/// `validate()`); `CommandLineTool` completes the hints it prints (`CommandLineTool.pasteable(_:)`).
package enum GivenLocation {
    private static let recorded = Mutex<[(flag: String, value: String)]>([])

    /// Records `flag` with `value` (nothing for nil), once per flag: the last value given wins, as
    /// ArgumentParser's.
    package static func record(_ flag: String, _ value: String?) {
        guard let value else { return }
        recorded.withLock { flags in
            flags.removeAll { $0.flag == flag }
            flags.append((flag, value))
        }
    }

    /// The flags recorded, in the order first given.
    package static var flags: [(flag: String, value: String)] { recorded.withLock { $0 } }
}

/// `word` as a shell reads it back: as it is when it holds only characters no shell treats
/// specially, else in single quotes.
package func shellWord(_ word: String) -> String {
    let plain =
        !word.isEmpty
        && word.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_./,:=@%+".unicodeScalars.contains($0)) }
    return plain ? word : "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

/// Completing a tool's printed commands with the location it was given.
enum PasteableHint {
    /// `message` with each command of `tool` written in backticks (`` `groupdefaults-sync status
    /// fam` ``) given the recorded location flags its verb takes and the command does not name
    /// already, right after the verb (`` `groupdefaults-sync status --directory /srv/suites fam` ``).
    /// A command of another tool, and text outside backticks, are left as they are.
    static func complete(_ message: String, tool: String, root: any ParsableCommand.Type, flags: [(flag: String, value: String)]) -> String {
        guard !flags.isEmpty, message.contains("`" + tool + " ") else { return message }
        let parts = message.split(separator: "`", omittingEmptySubsequences: false)
        guard parts.count >= 3 else { return message }
        let tree = CommandTree(root)
        var result = ""
        for (index, part) in parts.enumerated() {
            if index > 0 { result += "`" }
            // Odd parts are inside backticks (a last unclosed one is not).
            guard index % 2 == 1, index < parts.count - 1, part.hasPrefix(tool + " ") else {
                result += part
                continue
            }
            result += completed(String(part), tool: tool, tree: tree, flags: flags)
        }
        return result
    }

    /// One command line `tool VERB… ARGUMENTS` with the flags its verb takes added after the verb.
    private static func completed(_ command: String, tool: String, tree: CommandTree?, flags: [(flag: String, value: String)]) -> String {
        let words = command.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard let tree, words.first == tool else { return command }
        let (verbLength, options) = tree.verb(of: Array(words.dropFirst()))
        let missing = flags.filter { flag in options.contains(flag.flag) && !words.contains { $0 == flag.flag || $0.hasPrefix(flag.flag + "=") } }
        guard !missing.isEmpty else { return command }
        let added = missing.map { "\($0.flag) \(shellWord($0.value))" }
        return (words.prefix(1 + verbLength) + added + words.dropFirst(1 + verbLength)).joined(separator: " ")
    }
}

/// A tool's commands and the long options each takes, from ArgumentParser's description of it
/// (the JSON `--experimental-dump-help` prints, which `UnknownOption` reads too).
struct CommandTree {
    /// The root command, as the description gives it.
    let command: Command

    init?(_ root: any ParsableCommand.Type) {
        guard let tree = try? JSONDecoder().decode(Tree.self, from: Data(root._dumpHelp().utf8)) else { return nil }
        command = tree.command
    }

    /// How many of `words` name the verb (`accounts list`: 2), and the long options it takes.
    func verb(of words: [String]) -> (length: Int, options: Set<String>) {
        var command = self.command
        var length = 0
        while length < words.count, let sub = command.subcommands?.first(where: { $0.commandName == words[length] }) {
            command = sub
            length += 1
        }
        return (length, command.longOptions)
    }

    private struct Tree: Decodable {
        var command: Command
    }

    /// One command: its name, aliases, default subcommand, subcommands and arguments.
    struct Command: Decodable {
        var commandName: String
        var aliases: [String]?
        var defaultSubcommand: String?
        var subcommands: [Command]?
        var arguments: [Argument]?

        /// Its options' long names, `--server`, hidden ones included.
        var longOptions: Set<String> {
            Set((arguments ?? []).flatMap { ($0.names ?? []).filter { $0.kind == "long" }.map { "--" + $0.name } })
        }
    }

    struct Argument: Decodable {
        var names: [Name]?
    }

    struct Name: Decodable {
        var kind: String
        var name: String
    }
}
