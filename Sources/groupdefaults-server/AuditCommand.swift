import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire

/// `groupdefaults-server audit`: the administrative acts recorded, oldest first.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Show the audit log: who did which administrative act, when and from where.",
        discussion: """
            Recorded, by the name each record gives its act: \(recordedActs). Records are kept \
            --audit-days days. They hold names and ids, never values, passwords or tokens. A token's invitations for read or write made (or revoked) beyond 20 in 10 \
            minutes, alike in all but their ids (suite, role, address), are counted in one record \
            ("repeated: N like it from then until …"); every other act is recorded on its own. \
            It shows the latest --limit records; when there are earlier ones, a line on stderr \
            gives the --before that shows the page before.

            Example: groupdefaults-server audit --account ana --since 7d --config /etc/groupdefaults-server.conf
            """
    )

    /// Every act the log records, as a record names it (console sign-ins, failed ones too;
    /// invitations and members of shared suites), from `AuditRecord.Act` itself: the help lists
    /// what the code records.
    static let recordedActs = AuditRecord.Act.allCases.map(\.rawValue).joined(separator: ", ")

    @OptionGroup var storage: StorageOptions
    @Option(help: "Only the acts on this account.") var account: String?
    @Option(help: "Only acts since then: a time ago (30d, 12h, 15m, 45s) or a UTC date or time (2026-11-27, 2026-11-27T09:00:00Z).")
    var since: String?
    @Option(help: "Only acts before then (as --since takes it): the page before the one shown, as the line on stderr says.")
    var before: String?
    @Option(help: "At most this many records, the latest.") var limit = 1000
    @Flag(help: "Print one JSON array.") var json = false

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be at least 1, not \(limit)") }
        if let since { _ = try Self.moment(since, now: Date(), option: "--since") }
        if let before { _ = try Self.moment(before, now: Date(), option: "--before") }
    }

    /// `--since`'s moment: a duration back from `now`, or an ISO 8601 date (midnight UTC) or time.
    static func moment(_ text: String, now: Date, option: String = "--since") throws -> Date {
        if let date = TypedJSONDate.parse(text) ?? TypedJSONDate.parse(text + "T00:00:00Z") { return date }
        if let unit = text.last, "dhms".contains(unit), let count = Double(text.dropLast()), count > 0, count.isFinite {
            return now.addingTimeInterval(-(try TokenDuration.seconds(text)))
        }
        throw ValidationError(
            "\(option) takes a time ago (30d, 12h, 15m, 45s) or a UTC date or time (2026-11-27, 2026-11-27T09:00:00Z), not '\(text)'"
        )
    }

    func run() async throws {
        try await reportingFailure {
            let now = Date()
            let start = try since.map { try Self.moment($0, now: now) }
            let end = try before.map { try Self.moment($0, now: now, option: "--before") }
            let (page, known) = try await storage.withStorage { store in
                let page = try await store.auditPage(account: account, since: start, before: end, limit: limit)
                // No records of an account: is there such an account? (A look-alike name is told by its code points.)
                guard page.records.isEmpty, let account else { return (page, true) }
                return (page, try await store.accountSummaries().contains { $0.account.isSameName(as: account) })
            }
            let records = page.records
            // Where the earlier records are, on stderr: stdout stays the records alone.
            defer {
                if let earlier = page.earlier, let text = TypedJSONDate.format(earlier) {
                    printError("earlier records: add --before \(text)", tool: "groupdefaults-server")
                }
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                encoder.dateEncodingStrategy = .iso8601
                return output(String(decoding: try encoder.encode(records), as: UTF8.self))
            }
            if records.isEmpty {
                if !known, let account {
                    return groupdefaultsServer.outputHint(
                        "no records: no account is named \(NewNames.shown(account)) (see `groupdefaults-server accounts list`)"
                    )
                }
                return output("no records")
            }
            let dates = ISO8601DateFormatter()
            for record in records { output(Self.line(record, dates: dates)) }
        }
    }

    /// A record as one line of tab-separated fields, each through `printable`: a name holding a
    /// line break, a tab or an escape sequence cannot print as another record or another field.
    static func line(_ record: AuditRecord, dates: ISO8601DateFormatter) -> String {
        [
            dates.string(from: record.time), record.act.rawValue,
            record.account.map { "account \(printable($0))" } ?? "-", record.target.map(printable) ?? "-",
            "by \(printable(record.actor))", "from \(printable(record.source))", record.outcome.map(printable) ?? "",
        ].filter { !$0.isEmpty }.joined(separator: "\t")
    }
}
