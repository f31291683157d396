import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaultsServer
import GroupDefaultsWire

/// `groupdefaults-server suites repair-clock` and `suites reset`, on the same storage a running
/// server uses.
struct SuitesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "suites",
        abstract: "Repair or reset an account's suite.",
        discussion:
            "Example: groupdefaults-server suites repair-clock --account ana --suite group.com.example.chat --config /etc/groupdefaults-server.conf",
        subcommands: [RepairClock.self, Reset.self]
    )

    struct RepairClock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "repair-clock",
            abstract: "List a suite's entries stamped in the future, and stamp them again or drop them.",
            discussion: """
                An entry stamped more than 5 minutes ahead of the server's clock was written while a \
                clock was wrong (the server's, or a device's that the server's agreed with), or comes \
                from a restored backup of such a server. Devices refuse it, and any honest write of its \
                key replaces it. Without an action this lists them; --restamp stamps each again with \
                the server's clock, keeping its value; --drop replaces each with a deletion. Devices \
                receive the repair at their next pull. An end-to-end encrypted suite cannot be repaired \
                here: a device with its key writes the keys again.

                Example: groupdefaults-server suites repair-clock --account ana --suite group.com.example.chat --restamp --data-dir /var/lib/groupdefaults-server
                """
        )

        @OptionGroup var storage: StorageOptions
        @Option(help: "The suite's account.") var account: String
        @Option(help: "The suite's name.") var suite: String
        @Flag(help: "Stamp each entry again with the server's clock, keeping its value.") var restamp = false
        @Flag(help: "Replace each entry with a deletion stamped with the server's clock.") var drop = false
        @Option(help: "How many versions of each key the history keeps: the server's --history.") var history = 10

        func validate() throws {
            if restamp && drop { throw ValidationError("--restamp and --drop cannot be used together") }
        }

        func run() async throws {
            try await reportingFailure {
                let action: ClockRepair.Action = restamp ? .restamp : drop ? .drop : .list
                let outcome = try await storage.withStorage { store in
                    guard try await store.suites(account: account).suites.contains(where: { $0.name.isSameName(as: suite) }) else {
                        throw CommandFailure(
                            "account \(account) has no suite \(suite) in this store (see the console, or check --account, --suite and the storage flags)"
                        )
                    }
                    let outcome = try await ClockRepair.run(store, account: account, suite: suite, action: action, historyDepth: history)
                    // Only a repair that changed something is audited (nothing to repair is no act).
                    if action != .list, outcome.repaired > 0 {
                        try await store.appendAudit(
                            .commandLine(.clockRepair, account: account, target: "suite \(suite) (\(action == .drop ? "drop" : "restamp"))")
                        )
                    }
                    return outcome
                }
                let now = HLC.wallClockMilliseconds()
                for entry in outcome.found {
                    let ahead = entry.hlc.milliseconds > now ? (entry.hlc.milliseconds - now) / 1000 : 0
                    output(
                        "\(printable(entry.key))\tstamped \(TypedJSONDate.format(milliseconds: entry.hlc.milliseconds)) (\(ahead) s ahead)\tby device \(entry.origin)"
                    )
                }
                switch (action, outcome.found.isEmpty, outcome.sealed) {
                case (_, true, _):
                    output("\(printable(account))/\(printable(suite)): no entry is stamped in the future")
                case (.list, false, true):
                    output(
                        "\(printable(account))/\(printable(suite)): \(outcome.found.count) entr\(outcome.found.count == 1 ? "y" : "ies") stamped in the future; the suite is end-to-end encrypted: write those keys again on a device that has its key"
                    )
                case (.list, false, false):
                    output(
                        "\(printable(account))/\(printable(suite)): \(outcome.found.count) entr\(outcome.found.count == 1 ? "y" : "ies") stamped in the future; --restamp or --drop repairs them"
                    )
                case (_, false, true):
                    throw CommandFailure(
                        "\(printable(account))/\(printable(suite)) is end-to-end encrypted: the server cannot stamp its entries again; write those keys again on a device that has the suite's key"
                    )
                case (_, false, false):
                    output(
                        "\(printable(account))/\(printable(suite)): \(outcome.repaired) entr\(outcome.repaired == 1 ? "y" : "ies") \(action == .drop ? "dropped" : "stamped again")"
                    )
                }
            }
        }
    }

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "reset",
            abstract: "Clear a suite no device can use any more: the server's copy starts again, empty, and devices join it again.",
            discussion: """
                For a suite that is dead: full of values nobody wants, or (with --keys) an encrypted \
                suite whose keys are lost or were anchored by someone else's keys. Deletes the \
                suite's entries and history in one transaction, and with --keys its key bags and \
                anchor, and forgets its key epoch; its revisions go on. Each device learns of it at \
                its next sync (suite_reset; a running one within a heartbeat) and uploads every \
                value and deletion it holds, each keeping its stamp, so the latest write of each \
                key a device holds wins and nothing a device holds is lost; what only the server \
                held (history, values no device still has) is. After --keys the first device back \
                anchors the suite at its key epoch: sync the device with the newest keys first. \
                Without --yes this says what would be deleted and changes nothing.

                Example: groupdefaults-server suites reset --account ana --suite group.com.example.chat --yes --data-dir /var/lib/groupdefaults-server
                """
        )

        @OptionGroup var storage: StorageOptions
        @Option(help: "The suite's account.") var account: String
        @Option(help: "The suite's name.") var suite: String
        @Flag(help: "Forget the suite's key bags, anchor and key epoch too (an encrypted suite whose keys are lost or anchored by someone else).")
        var keys = false
        @Flag(help: "Reset it: without this, only say what would be deleted.") var yes = false

        func run() async throws {
            try await reportingFailure {
                try await storage.withStorage { store in
                    guard let summary = try await store.suites(account: account).suites.first(where: { $0.name.isSameName(as: suite) }) else {
                        throw CommandFailure(
                            "account \(account) has no suite \(suite) in this store (see the console, or check --account, --suite and the storage flags)"
                        )
                    }
                    let what =
                        "\(printable(account))/\(printable(suite))'s \(summary.keys) key\(summary.keys == 1 ? "" : "s") and its history\(keys ? ", key bags and anchor" : "")"
                    guard yes else {
                        output("would delete \(what) from the server (devices keep theirs and upload them again): add --yes to reset it")
                        return
                    }
                    // The reset and its audit record in one transaction: an interrupted command
                    // leaves both or neither.
                    let record = AuditRecord.commandLine(.suiteReset, account: account, target: "suite \(suite)" + (keys ? " (with its keys)" : ""))
                    guard let count = try await store.resetSuite(account: account, suite: suite, keys: keys, audit: record) else {
                        throw CommandFailure("account \(account) has no suite \(suite) in this store")
                    }
                    InterruptionPoint.reached("suites-reset.reset")
                    output(
                        "\(printable(account))/\(printable(suite)): reset (\(count) key\(count == 1 ? "" : "s") deleted\(keys ? ", and its keys" : "")); each device joins it again at its next sync and uploads what it holds"
                    )
                }
            }
        }
    }
}
