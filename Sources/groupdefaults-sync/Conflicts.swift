import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import GroupDefaultsSync
import GroupDefaultsWire

extension SyncCommand {
    struct Conflicts: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the local values sync replaced, newest first (the suite's conflict journal).",
            discussion: """
                A local change that another device's newer write replaced before it reached the \
                server, or a value the suite held before sync was turned on that the server's \
                replaced at the first sync, is kept here with its stamp and what replaced it. Bring \
                one back with `restore`. Entries the server sent that this device refused (tampered, \
                rolled back, or stamped far ahead of this machine's clock) and local changes sync \
                could not push are listed here too, with why (nothing to restore). The journal stays on this device; see `configure \
                --journal-entries/--journal-days` for how much it keeps.

                Example: groupdefaults-sync conflicts group.com.example.chat
                Example: groupdefaults-sync conflicts group.com.example.chat sound --json
                """
        )

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name.") var suite: String
        @Argument(help: "Only this key's.") var key: String?
        @Flag(help: "Print one JSON array.") var json = false

        func run() async throws {
            try await perform {
                let conflicts = try options.open(suite).conflicts(forKey: key)
                if json { return output(try jsonText(conflicts.map(ConflictJSON.init))) }
                guard !conflicts.isEmpty else { return output("\(suite): no replaced values kept") }
                output(conflicts.map(Self.line).joined(separator: "\n"))
            }
        }

        static func line(_ conflict: SharedDefaults.Conflict) -> String {
            if let refusal = conflict.refusal {
                return "\(conflict.id)  \(printable(conflict.key))  refused \(TypedJSONDate.format(conflict.replacedAt) ?? "?"): "
                    + "a write of \(time(conflict.stamp.hlc)) by device \(conflict.stamp.origin): \(printable(refusal))"
            }
            let what = conflict.value.map(typedJSONText) ?? "(deleted)"
            return "\(conflict.id)  \(printable(conflict.key)) = \(what)  written \(time(conflict.stamp.hlc)) by device \(conflict.stamp.origin); "
                + "replaced \(TypedJSONDate.format(conflict.replacedAt) ?? "?") by device \(conflict.replacedBy.origin)'s write of \(time(conflict.replacedBy.hlc))"
        }

        static func time(_ hlc: HLC) -> String { TypedJSONDate.format(milliseconds: hlc.milliseconds) }
    }

    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a value sync replaced, or a version the server keeps, back as a new local change that syncs as the newest write.",
            discussion: """
                Without --conflict or --rev, the newest value kept for KEY in the conflict journal; \
                with --rev, the server's version of that revision (see `history`). Restoring a \
                deletion removes the key. Nothing changes if there is nothing to restore.

                Example: groupdefaults-sync restore group.com.example.chat sound
                Example: groupdefaults-sync restore group.com.example.chat sound --rev 1
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Argument(help: "The key to restore.") var key: String
        @Option(help: ArgumentHelp("The conflict journal entry (an id `conflicts` lists).", valueName: "ID")) var conflict: UInt64?
        @Option(help: ArgumentHelp("The server's revision of the key (a `rev` that `history` lists).", valueName: "R")) var rev: UInt64?

        func validate() throws {
            if conflict != nil && rev != nil { throw ValidationError("--conflict and --rev exclude each other") }
        }

        func run() async throws {
            if let rev {
                return try await withConfiguredEngine(options, server, suite) { _, engine in
                    let version = try await engine.history.restore(key, revision: rev)
                    output(
                        "\(printable(suite)): \(printable(key)) " + (version.entry.value.map { "= \(typedJSONText($0))" } ?? "removed")
                            + " (restored from server revision \(rev))"
                    )
                }
            }
            try await perform {
                let restored = try options.open(suite).restore(key, conflict: conflict)
                output(
                    "\(printable(suite)): \(printable(key)) " + (restored.value.map { "= \(typedJSONText($0))" } ?? "removed")
                        + " (restored from conflict \(restored.id))"
                )
            }
        }
    }
}

extension SyncCommand {
    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the versions of a key the server keeps, newest first.",
            discussion: """
                The server keeps each key's last versions (`groupdefaults-server serve --history N`, \
                10 by default), deletions included, from every device. Bring one back with \
                `restore SUITE KEY --rev R`.

                Example: groupdefaults-sync history group.com.example.chat sound
                """
        )

        @OptionGroup var options: SuiteOptions
        @OptionGroup var server: ServerOptions
        @Argument(help: "The suite name.") var suite: String
        @Argument(help: "The key.") var key: String
        @Flag(help: "Print the server's JSON.") var json = false

        func run() async throws {
            try await withConfiguredEngine(options, server, suite) { defaults, engine in
                let history = try await engine.history.versions(of: key)
                if json { return output(try jsonText(history)) }
                let lines = history.versions.map { version in
                    let entry = version.entry
                    let what = entry.value.map(typedJSONText) ?? entry.unavailable.map { "(unavailable: \($0.words))" } ?? "(deleted)"
                    let mine = entry.origin == defaults.origin ? " (this device)" : ""
                    // On a member's device, a write naming no account is the owner's.
                    let account = (entry.account ?? engine.shared?.owner).map { " of account \(printable($0))" } ?? ""
                    return "rev \(entry.rev.map(String.init) ?? "?")  \(printable(key)) = \(what)  written \(Conflicts.time(entry.hlc)) "
                        + "by device \(entry.origin)\(account)\(mine); received \(version.received)"
                }
                output(lines.joined(separator: "\n"))
            }
        }
    }
}

/// A value as compact typed JSON, `{"string":"bell.caf"}`, as a line of text shows it: one line,
/// and through `printable` (JSON escapes line breaks and ESC, not U+2028 or the bidirectional
/// overrides).
func typedJSONText(_ value: PropertyListValue) -> String {
    printable((try? value.typedJSON()).map { String(decoding: $0, as: UTF8.self) } ?? "\(value)")
}

/// Pretty, sorted JSON of `value`.
func jsonText(_ value: some Encodable) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// One conflict journal entry in `conflicts --json`.
struct ConflictJSON: Encodable {
    var id: UInt64
    var key: String
    var value: PropertyListValue?
    var deleted: Bool?
    var hlc: HLC
    var origin: String
    var replacedByHLC: HLC
    var replacedByOrigin: String
    var at: String
    var refused: String?

    init(_ conflict: SharedDefaults.Conflict) {
        refused = conflict.refusal
        id = conflict.id
        key = conflict.key
        value = conflict.value
        deleted = conflict.isDeletion ? true : nil
        hlc = conflict.stamp.hlc
        origin = String(conflict.stamp.origin)
        replacedByHLC = conflict.replacedBy.hlc
        replacedByOrigin = String(conflict.replacedBy.origin)
        at = TypedJSONDate.format(conflict.replacedAt) ?? ""
    }

    enum CodingKeys: String, CodingKey {
        case id, key, value, deleted, hlc, origin
        case replacedByHLC = "replaced_by_hlc"
        case replacedByOrigin = "replaced_by_origin"
        case at, refused
    }
}
